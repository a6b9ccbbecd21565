// The Atari 2600 games: ALE with ale-py 0.12.1's vector-env preprocessing
// (`ale::vector::PreprocessedEnv`, which `ale_py.vector_env.AtariVectorEnv` steps), bit for bit.
//
// One class serves every game; the ROM is the `rom_path` config key, whose per-id default the
// module sets and Python resolves to the file in the installed ale-py wheel. What this
// reproduces, and why it matters for equal observations:
//   - step: the action repeats `frameskip` times; the episode counter counts frames; the loop
//     stops early on game over, the frame limit or (episodic_life) a lost life, *before*
//     grabbing that frame, so such a step's observation reuses the frames grabbed earlier.
//     Frames are grabbed on the last two repeats, max-pooled, resized (area_resize.h) and
//     pushed on a circular stack that is written oldest first.
//   - reset: a re-seed (Rng::take_seed) sets ALE's random_seed, seeds a std::mt19937 and
//     reloads the ROM, as ale-py does; then reset_game, FIRE if the game has it and
//     use_fire_reset, then uniform_int_distribution(0, noop_max - 1) NOOPs minus that FIRE (a
//     game over among them resets the game). The older frame buffer and the stack are zeroed.
//   - terminated = game over, or a lost life with episodic_life or life_loss_info; truncated =
//     the frame limit without termination. With life_loss_info alone the game goes on
//     (StepResult::continues), as ale-py only resets on game over, the limit or episodic_life.
//   - soft_reset_on_life_loss (with life_loss_info; EnvPool's episodic_life): the step after a
//     lost life ignores its action and starts play again as a reset does, without resetting
//     the game: FIRE and NOOPs, then the screen goes on the stack unpooled; reward 0, and the
//     frame counter (the frame limit) does not count those frames.
// libstdc++'s uniform_int_distribution must match the one in ale-py's wheel (both GCC).
// Compile with -ffp-contract=off (the resize).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../env.h"
#include "ale/ale_interface.hpp"
#include "area_resize.h"

namespace aiopool::atari {

class Atari {
 public:
  using Action = int64_t;

  // ale-py's AtariVectorEnv keyword arguments and defaults, plus the ROM file.
  static std::vector<ConfigKey> config_keys() {
    using K = ConfigKey::Kind;
    return {{"img_height", K::kInt, 84},
            {"img_width", K::kInt, 84},
            {"grayscale", K::kBool, 1},
            {"stack_num", K::kInt, 4},
            {"frameskip", K::kInt, 4},
            {"maxpool", K::kBool, 1},
            {"noop_max", K::kInt, 30},
            {"use_fire_reset", K::kBool, 1},
            {"episodic_life", K::kBool, 0},
            {"life_loss_info", K::kBool, 0},
            {"reward_clipping", K::kBool, 1},
            {"repeat_action_probability", K::kFloat, 0.0},
            {"full_action_space", K::kBool, 0},
            {"max_num_frames_per_episode", K::kInt, 108000},
            {"soft_reset_on_life_loss", K::kBool, 0},
            {"rom_path", K::kString, 0.0, ""}};
  }

  static EnvSpec spec(const Config& config) {
    const Options o(config);
    const RomInfo rom = rom_info(o);
    if (const char* why = resize_unsupported(o, rom))
      throw std::invalid_argument(std::string(why) + " (this game's screen is " + std::to_string(rom.height) +
                                  "x" + std::to_string(rom.width) + ")");
    EnvSpec s;
    std::vector<int64_t> shape{o.stack, o.height, o.width};
    if (!o.grayscale) shape.push_back(3);
    s.observation_space = {Space::Kind::kBox, DType::kUInt8, shape, {}, {}, 0};
    const std::size_t n = static_cast<std::size_t>(s.observation_space.size());
    s.observation_space.low.assign(n, 0.0);
    s.observation_space.high.assign(n, 255.0);
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, rom.actions};
    s.info = {{"lives", DType::kInt32, {}},
              {"frame_number", DType::kInt32, {}},
              {"episode_frame_number", DType::kInt32, {}},
              {"reward_unclipped", DType::kInt32, {}},
              {"episode_score", DType::kFloat64, {}}};
    s.max_seed = std::numeric_limits<int32_t>::max();  // ale-py's seeds are C ints
    s.render_shape = {rom.height, rom.width, 3};
    return s;
  }

  // ALE loads a ROM in ~0.1 s, so an env loads it at its first reset, which always carries a
  // seed (the pool stages one for every env before any reset), not here and again there.
  explicit Atari(const Config& config) : o_(config), rom_(rom_info(o_)) {
    const int cn = o_.grayscale ? 1 : 3;
    raw_pixels_ = static_cast<std::size_t>(rom_.height * rom_.width);
    raw_size_ = raw_pixels_ * static_cast<std::size_t>(cn);
    obs_size_ = static_cast<std::size_t>(o_.height * o_.width * cn);
    pooled_.assign(raw_size_, 0);
    last_.assign(raw_pixels_, 0);
    if (o_.maxpool)
      for (auto& o : older_) o.assign(raw_pixels_, 0);
    changed_.assign(static_cast<std::size_t>(rom_.height), 1);
    stack_.assign(obs_size_ * static_cast<std::size_t>(o_.stack), 0);
    if (resizes()) resize_ = AreaResize(rom_.height, rom_.width, o_.height, o_.width, cn);
  }

  void reset(Rng& rng) {
    if (const int64_t seed = rng.take_seed(); seed >= 0 || !ale_) {
      const int s = static_cast<int>(std::max<int64_t>(seed, 0));
      noop_rng_.seed(static_cast<unsigned>(s));
      if (ale_) {
        ale_->setInt("random_seed", s);
        ale_->loadROM(o_.rom);
      } else {
        ale_ = load(o_, s);
        actions_ = action_set(*ale_, o_);
        copy_palette();
        has_fire_ = o_.use_fire_reset &&
                    std::find(actions_.begin(), actions_.end(), ale::PLAYER_A_FIRE) != actions_.end();
      }
    }
    ale_->reset_game();
    start_play();
    std::fill(stack_.begin(), stack_.end(), 0);
    stack_idx_ = 0;
    older_black_ = true;
    pool(true);
    elapsed_ = 0;
    reward_ = 0;
    score_ = 0;
    game_over_ = false;
    lives_ = ale_->lives();
    life_lost_ = false;
    restart_ = false;
  }

  StepResult step(const Action* action, Rng&) {
    if (restart_) return restart_play();
    const ale::Action a = actions_[static_cast<std::size_t>(*action)];  // range checked by the pool
    int reward = 0;
    bool grabbed = false;
    for (int skip = o_.frameskip; skip > 0; --skip) {
      reward += ale_->act(a, 1.0f);
      game_over_ = ale_->game_over();
      ++elapsed_;
      life_lost_ = ale_->lives() < lives_ && ale_->lives() > 0;
      if (game_over_ || elapsed_ >= o_.max_frames || (o_.episodic_life && life_lost_)) break;
      if (skip == 2 && o_.maxpool) {
        older_idx_ ^= 1;  // the other buffer keeps the previous step's, for pool()'s comparison
        std::memcpy(older_[older_idx_].data(), ale_->getScreen().getArray(), raw_pixels_);
        older_black_ = false;
      }
      grabbed = skip == 1;
    }
    pool(grabbed);
    lives_ = ale_->lives();
    reward_ = reward;
    score_ += reward;
    StepResult r;
    r.reward = o_.reward_clipping ? std::clamp(reward, -1, 1) : reward;
    r.terminated = game_over_ || ((o_.life_loss_info || o_.episodic_life) && life_lost_);
    r.truncated = elapsed_ >= o_.max_frames && !r.terminated;
    const bool over = game_over_ || elapsed_ >= o_.max_frames || (o_.episodic_life && life_lost_);
    r.continues = r.terminated && !over;
    restart_ = r.continues && o_.soft_reset_on_life_loss;
    return r;
  }

  // The screen the last frame left, in colour: ale-py's env.render() (ALE's getScreenRGB).
  void render(uint8_t* rgb) const {
    const ale::pixel_t* screen = ale_->getScreen().getArray();
    for (std::size_t p = 0; p < raw_pixels_; ++p)
      std::memcpy(rgb + 3 * p, colour_.data() + 3 * static_cast<std::size_t>(screen[p]), 3);
  }

  void write(Row& row) const {
    auto* obs = row.obs_as<uint8_t>();
    const auto stack = static_cast<std::size_t>(o_.stack);
    for (std::size_t i = 0; i < stack; ++i)
      std::memcpy(obs + i * obs_size_, stack_.data() + ((stack_idx_ + i) % stack) * obs_size_, obs_size_);
    *row.info_as<int32_t>(0) = lives_;
    *row.info_as<int32_t>(1) = ale_->getFrameNumber();
    *row.info_as<int32_t>(2) = ale_->getEpisodeFrameNumber();
    *row.info_as<int32_t>(3) = reward_;
    *row.info_as<double>(4) = static_cast<double>(score_);
  }

 private:
  struct Options {
    explicit Options(const Config& c)
        : height(static_cast<int>(c.get_int("img_height"))),
          width(static_cast<int>(c.get_int("img_width"))),
          stack(static_cast<int>(c.get_int("stack_num"))),
          frameskip(static_cast<int>(c.get_int("frameskip"))),
          noop_max(static_cast<int>(c.get_int("noop_max"))),
          max_frames(static_cast<int>(c.get_int("max_num_frames_per_episode"))),
          grayscale(c.get_bool("grayscale")),
          maxpool(c.get_bool("maxpool")),
          use_fire_reset(c.get_bool("use_fire_reset")),
          episodic_life(c.get_bool("episodic_life")),
          life_loss_info(c.get_bool("life_loss_info")),
          reward_clipping(c.get_bool("reward_clipping")),
          full_action_space(c.get_bool("full_action_space")),
          soft_reset_on_life_loss(c.get_bool("soft_reset_on_life_loss")),
          repeat_action_probability(static_cast<float>(c.get("repeat_action_probability"))),
          rom(c.get_string("rom_path")) {
      positive("img_height", height);
      positive("img_width", width);
      positive("stack_num", stack);
      positive("frameskip", frameskip);
      positive("max_num_frames_per_episode", max_frames);
      if (noop_max < 0)
        throw std::invalid_argument("noop_max is " + std::to_string(noop_max) + ", expected >= 0");
      if (!(repeat_action_probability >= 0.0f && repeat_action_probability <= 1.0f))
        throw std::invalid_argument("repeat_action_probability must be in [0, 1]");
      if (soft_reset_on_life_loss && (!life_loss_info || episodic_life))
        throw std::invalid_argument(
            "soft_reset_on_life_loss needs life_loss_info=True and episodic_life=False (a lost life "
            "must not end the episode)");
      if (!std::filesystem::is_regular_file(rom))
        throw std::invalid_argument("rom_path '" + rom.string() + "' is not a ROM file");
    }
    static void positive(const char* name, int v) {
      if (v < 1)
        throw std::invalid_argument(std::string(name) + " is " + std::to_string(v) + ", expected >= 1");
    }
    int height, width, stack, frameskip, noop_max, max_frames;
    bool grayscale, maxpool, use_fire_reset, episodic_life, life_loss_info, reward_clipping,
        full_action_space, soft_reset_on_life_loss;
    float repeat_action_probability;
    std::filesystem::path rom;
  };

  // What a pool needs to know before its envs load the ROM: the action set's size and the
  // screen (210x160 for most games; 250 or 214 rows for a few). Cached, so that making a pool of
  // a game already seen does not load its ROM again.
  struct RomInfo {
    int64_t actions;
    int height, width;
  };

  static RomInfo rom_info(const Options& o) {
    static std::mutex mutex;
    static std::map<std::pair<std::string, bool>, RomInfo> known;
    const std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_pair(o.rom.string(), o.full_action_space);
    auto it = known.find(key);
    if (it == known.end()) {
      const std::unique_ptr<ale::ALEInterface> ale = load(o, 0);
      const ale::ALEScreen& screen = ale->getScreen();
      const RomInfo info{static_cast<int64_t>(action_set(*ale, o).size()), static_cast<int>(screen.height()),
                         static_cast<int>(screen.width())};
      it = known.emplace(key, info).first;
    }
    return it->second;
  }

  static const char* resize_unsupported(const Options& o, const RomInfo& rom) {
    if (o.height == rom.height && o.width == rom.width) return nullptr;
    return AreaResize::unsupported(rom.height, rom.width, o.height, o.width);
  }

  // After a reset's reset_game (or, with soft_reset_on_life_loss, a lost life): FIRE if the
  // game has it and use_fire_reset, then the random NOOPs; a game over among them resets the game.
  void start_play() {
    if (has_fire_) ale_->act(ale::PLAYER_A_FIRE);
    for (int n = noop_dist_(noop_rng_) - static_cast<int>(has_fire_); n > 0; --n) {
      ale_->act(ale::PLAYER_A_NOOP);
      if (ale_->game_over()) ale_->reset_game();
    }
  }

  // The step after a lost life with soft_reset_on_life_loss: play starts again, the game goes on.
  StepResult restart_play() {
    restart_ = false;
    start_play();
    older_black_ = true;  // the screen alone, as after a reset; the stack is kept
    pool(true);
    reward_ = 0;
    game_over_ = false;
    lives_ = ale_->lives();
    life_lost_ = false;
    return {};
  }

  bool resizes() const { return o_.height != rom_.height || o_.width != rom_.width; }

  static std::unique_ptr<ale::ALEInterface> load(const Options& o, int seed) {
    auto ale = std::make_unique<ale::ALEInterface>();
    ale->setFloat("repeat_action_probability", o.repeat_action_probability);
    ale->setInt("random_seed", seed);
    ale->loadROM(o.rom);
    return ale;
  }

  static ale::ActionVect action_set(ale::ALEInterface& ale, const Options& o) {
    return o.full_action_space ? ale.getLegalActionSet() : ale.getMinimalActionSet();
  }

  // ALE's ColourPalette::applyPaletteGrayscale / applyPaletteRGB as a table of CN bytes per
  // screen value: gray is the palette entry after the colour's (ALE: m_palette[pixel + 1] &
  // 0xFF); screen values are even, so entry 256 is never read.
  void copy_palette() {
    const ale::ColourPalette& palette = ale_->theOSystem->colourPalette();
    for (std::size_t p = 0; p < 256; ++p) {
      const uint32_t rgb = palette.getRGB(static_cast<int>(p));
      colour_[3 * p] = static_cast<uint8_t>(rgb >> 16);
      colour_[3 * p + 1] = static_cast<uint8_t>(rgb >> 8);
      colour_[3 * p + 2] = static_cast<uint8_t>(rgb);
      gray_[p] = p < 255 ? static_cast<uint8_t>(palette.getRGB(static_cast<int>(p) + 1) & 0xFF) : 0;
    }
  }

  // The frame the step ends on, into pooled_: with `fresh`, the screen just emulated, max-pooled
  // with the older frame (the second-to-last repeat's screen, kept as raw screen values, or
  // black after a reset); without (a step that stopped early), ale-py pools its stale buffers
  // again: the previous pooled frame with the older frame. Then resized onto the stack.
  void pool(bool fresh) {
    if (o_.grayscale)
      pool<1>(fresh, gray_.data());
    else
      pool<3>(fresh, colour_.data());
    uint8_t* dst = stack_.data() + stack_idx_ * obs_size_;
    if (resizes())
      resize_(pooled_.data(), rom_.width, dst, changed_.data());
    else
      std::memcpy(dst, pooled_.data(), raw_size_);
    stack_idx_ = (stack_idx_ + 1) % static_cast<std::size_t>(o_.stack);
  }

  // Consecutive Atari frames mostly agree, so pooled_ is a cache: a screen row whose values
  // (and, when max-pooling, the older frame's) equal those it was last pooled from keeps its
  // pooled row, and the resize keeps that row's horizontal pass (changed_ marks the others).
  // Within a changed row, where 16 pixels equal the older frame's, their max is looked up once.
  template <std::size_t CN>
  void pool(bool fresh, const uint8_t* __restrict lut) {
    uint8_t* __restrict out = pooled_.data();
    const uint8_t* __restrict older = o_.maxpool ? older_[older_idx_].data() : nullptr;
    const std::size_t n = raw_pixels_;
    const bool black = !o_.maxpool || older_black_;  // max(x, black) == x
    if (!fresh) {
      if (!black) {
        for (std::size_t i = 0; i < n; ++i) {
          for (std::size_t c = 0; c < CN; ++c)
            out[CN * i + c] = std::max(out[CN * i + c], lut[CN * older[i] + c]);
        }
      }
      std::fill(changed_.begin(), changed_.end(), 1);
      pooled_from_ = Source::kNone;
      return;
    }
    const uint8_t* __restrict screen = ale_->getScreen().getArray();
    const Source source = black ? Source::kScreen : Source::kScreenAndOlder;
    const bool cached = pooled_from_ == source;
    const uint8_t* __restrict previous_older = o_.maxpool ? older_[older_idx_ ^ 1].data() : nullptr;
    const auto w = static_cast<std::size_t>(rom_.width);
    for (std::size_t row = 0, i0 = 0; i0 < n; ++row, i0 += w) {
      if (cached && std::memcmp(screen + i0, last_.data() + i0, w) == 0 &&
          (black || std::memcmp(older + i0, previous_older + i0, w) == 0)) {
        changed_[row] = 0;
        continue;
      }
      changed_[row] = 1;
      std::size_t i = i0;
      if (black) {
        for (; i < i0 + w; ++i) colour<CN>(out + CN * i, lut, screen[i]);
        continue;
      }
      for (; i + 16 <= i0 + w; i += 16) {
        if (std::memcmp(screen + i, older + i, 16) == 0) {
          for (std::size_t j = i; j < i + 16; ++j) colour<CN>(out + CN * j, lut, screen[j]);
        } else {
          for (std::size_t j = i; j < i + 16; ++j) max_colour<CN>(out + CN * j, lut, screen[j], older[j]);
        }
      }
      for (; i < i0 + w; ++i) max_colour<CN>(out + CN * i, lut, screen[i], older[i]);
    }
    std::memcpy(last_.data(), screen, n);
    pooled_from_ = source;
  }

  template <std::size_t CN>
  static void colour(uint8_t* __restrict out, const uint8_t* __restrict lut, uint8_t v) {
    for (std::size_t c = 0; c < CN; ++c) out[c] = lut[CN * v + c];
  }

  template <std::size_t CN>
  static void max_colour(uint8_t* __restrict out, const uint8_t* __restrict lut, uint8_t a, uint8_t b) {
    for (std::size_t c = 0; c < CN; ++c) out[c] = std::max(lut[CN * a + c], lut[CN * b + c]);
  }

  Options o_;
  RomInfo rom_;
  std::unique_ptr<ale::ALEInterface> ale_;
  ale::ActionVect actions_;
  bool has_fire_ = false;
  std::mt19937 noop_rng_;
  std::uniform_int_distribution<> noop_dist_{0, o_.noop_max > 0 ? o_.noop_max - 1 : 0};
  std::size_t raw_pixels_ = 0, raw_size_ = 0, obs_size_ = 0;
  // What pooled_ holds: kScreen: the colours of last_; kScreenAndOlder: their max with the
  // colours of older_[older_idx_ ^ 1] (the older frame of the step before); kNone: neither.
  enum class Source { kNone, kScreen, kScreenAndOlder };
  std::vector<uint8_t> pooled_;  // the last pooled frame, before the resize (ale-py's frame buffer 0)
  Source pooled_from_ = Source::kNone;
  std::vector<uint8_t> last_;      // the screen values pooled_ was last pooled from
  std::vector<uint8_t> older_[2];  // the second-to-last repeat's screen values (frame buffer 1) ...
  std::size_t older_idx_ = 0;      // ... of this step, and in the other buffer of the step before
  bool older_black_ = true;        // frame buffer 1 is zeroed (reset) rather than older_
  std::vector<uint8_t> changed_;   // per screen row: pooled_'s row changed in this pool()
  std::vector<uint8_t> stack_;
  std::array<uint8_t, 3 * 256> colour_{};
  std::array<uint8_t, 256> gray_{};
  std::size_t stack_idx_ = 0;
  AreaResize resize_;
  int elapsed_ = 0;
  int reward_ = 0;     // unclipped
  int64_t score_ = 0;  // the episode's unclipped rewards: the game score
  bool game_over_ = false;
  int lives_ = 0;
  bool life_lost_ = false;
  bool restart_ = false;  // soft_reset_on_life_loss: the next step restarts play
};

}  // namespace aiopool::atari
