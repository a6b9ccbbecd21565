// Procgen's 16 games: procgen 0.10.7's own library (libenv.h), one libenv_env per env, stepped
// by the pool's worker threads. The games, their levels and frames are the library's; this
// class only drives it as procgen's `ProcgenGym3Env(num=1, num_threads=0, rand_seed=seed)`
// does, so frames, rewards and level seeds are procgen's for the same options and seed.
//
//   - reset with a seed (Rng::take_seed: make's `seed + i`, or async_reset(seed=...)): a new
//     libenv_env with rand_seed = that seed. Its first level is drawn from rand_seed as
//     procgen draws it (num_levels, start_level).
//   - step: libenv_act with num_threads=0 steps the game on the calling worker. When a level
//     ends, the library starts the next one within the same call and shows its first frame:
//     procgen never draws the last frame of a level. `terminated` is procgen's `done` (its
//     games' time limits included: procgen reports no truncation).
//   - reset without a seed: after a step that ended a level (autoreset) nothing is left to do,
//     the next level is already on screen; mid-level (async_reset()), procgen's forced reset
//     (action -1) ends the level and the library starts the next one in its own sequence.
//   - info: level_seed, prev_level_seed, prev_level_complete, the library's own values.
//   - render: the 512x512 frame procgen's `render_mode="rgb_array"` gives as info["rgb"],
//     drawn by the library's libenv_observe (render_human, set by make for rendering pools).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../env.h"
#include "libenv.h"

namespace aiopool::procgen {

inline constexpr int kSize = 64;         // procgen's RES_W x RES_H observation
inline constexpr int kRenderSize = 512;  // procgen's RENDER_RES frame
inline constexpr int kNumActions = 15;   // procgen's get_combos()
inline constexpr int kInt32Max = std::numeric_limits<int32_t>::max();

// procgen's DISTRIBUTION_MODE_DICT; exploration is hard mode on one fixed level.
struct Mode {
  const char* name;
  int code;
};
inline constexpr Mode kModes[] = {
    {"easy", 0}, {"hard", 1}, {"extreme", 2}, {"memory", 10}, {"exploration", 20}};

struct Game {
  const char* name;
  bool extreme;
  bool memory;
  int exploration_seed;  // procgen's EXPLORATION_LEVEL_SEEDS; 0: no exploration mode
};

// procgen's ENV_NAMES, with the modes game.cpp's parse_options allows for each.
inline constexpr Game kGames[] = {
    {"bigfish", false, false, 0},
    {"bossfight", false, false, 0},
    {"caveflyer", false, true, 1259048185},
    {"chaser", true, false, 0},
    {"climber", false, false, 1561126160},
    {"coinrun", false, false, 1949448038},
    {"dodgeball", true, true, 0},
    {"fruitbot", false, false, 0},
    {"heist", false, true, 876640971},
    {"jumper", false, true, 1434825276},
    {"leaper", true, false, 1318677581},
    {"maze", false, true, 158988835},
    {"miner", false, true, 0},
    {"ninja", false, false, 1123500215},
    {"plunder", false, false, 0},
    {"starpilot", true, false, 0},
};

inline bool has_mode(const Game& g, const std::string& mode) {
  return mode == "easy" || mode == "hard" || (mode == "extreme" && g.extreme) ||
         (mode == "memory" && g.memory) || (mode == "exploration" && g.exploration_seed != 0);
}

// The options of one env, checked: procgen's library ends the process on a bad option.
struct Options {
  std::string game;
  int mode = 0;  // procgen's distribution_mode code
  int num_levels = 0;
  int start_level = 0;
  bool use_sequential_levels, center_agent, use_backgrounds, restrict_themes, use_monochrome_assets,
      paint_vel_info, use_generated_assets, render_human;
  std::string library, resource_root;

  explicit Options(const Config& c)
      : game(c.get_string("env_name")),
        use_sequential_levels(c.get_bool("use_sequential_levels")),
        center_agent(c.get_bool("center_agent")),
        use_backgrounds(c.get_bool("use_backgrounds")),
        restrict_themes(c.get_bool("restrict_themes")),
        use_monochrome_assets(c.get_bool("use_monochrome_assets")),
        paint_vel_info(c.get_bool("paint_vel_info")),
        use_generated_assets(c.get_bool("use_generated_assets")),
        render_human(c.get_bool("render_human")),
        library(c.get_string("library")),
        resource_root(c.get_string("resource_root")) {
    const Game* g =
        std::find_if(std::begin(kGames), std::end(kGames), [&](const Game& x) { return game == x.name; });
    if (g == std::end(kGames))
      throw std::invalid_argument("env_name is '" + game + "', not one of procgen's games");
    const std::string mode_name = c.get_string("distribution_mode");
    if (!has_mode(*g, mode_name)) {
      std::string modes;
      for (const Mode& m : kModes)
        if (has_mode(*g, m.name)) modes += std::string(modes.empty() ? "" : ", ") + m.name;
      throw std::invalid_argument("distribution_mode is '" + mode_name + "'; " + game + " has " + modes);
    }
    mode = std::find_if(std::begin(kModes), std::end(kModes), [&](const Mode& m) {
             return mode_name == m.name;
           })->code;
    const double levels = c.get("num_levels"), start = c.get("start_level");
    if (levels < 0 || levels > kInt32Max) throw std::invalid_argument(range("num_levels", levels));
    if (start < 0 || start > kInt32Max) throw std::invalid_argument(range("start_level", start));
    if (start + levels > kInt32Max)
      throw std::invalid_argument("start_level + num_levels is " +
                                  std::to_string(static_cast<int64_t>(start + levels)) +
                                  ", expected at most 2**31 - 1 (procgen's level seeds are C ints)");
    num_levels = static_cast<int>(levels);
    start_level = static_cast<int>(start);
    if (mode_name == "exploration") {
      if (num_levels != 0 || start_level != 0)
        throw std::invalid_argument("distribution_mode 'exploration' sets num_levels=1 and start_level=" +
                                    std::to_string(g->exploration_seed) + " (" + game +
                                    "'s exploration level), as procgen does; leave both out");
      mode = 1;
      num_levels = 1;
      start_level = g->exploration_seed;
    }
  }

  static std::string range(const char* key, double v) {
    return std::string(key) + " is " + std::to_string(static_cast<int64_t>(v)) + ", expected 0 to 2**31 - 1";
  }
};

class Procgen {
 public:
  using Action = int64_t;

  // procgen's ProcgenGym3Env keyword arguments and defaults (the id sets env_name and
  // distribution_mode), render_human (set by make for rendering pools), and where the library
  // and its assets are (set by aiopool.procgen).
  static std::vector<ConfigKey> config_keys() {
    using K = ConfigKey::Kind;
    return {{"env_name", K::kString, 0.0, "coinrun"},
            {"distribution_mode", K::kString, 0.0, "hard"},
            {"num_levels", K::kInt, 0},
            {"start_level", K::kInt, 0},
            {"use_sequential_levels", K::kBool, 0},
            {"center_agent", K::kBool, 1},
            {"use_backgrounds", K::kBool, 1},
            {"restrict_themes", K::kBool, 0},
            {"use_monochrome_assets", K::kBool, 0},
            {"paint_vel_info", K::kBool, 0},
            {"use_generated_assets", K::kBool, 0},
            {"render_human", K::kBool, 0},
            {"library", K::kString, 0.0, ""},
            {"resource_root", K::kString, 0.0, ""}};
  }

  static EnvSpec spec(const Config& config) {
    const Options o(config);
    EnvSpec s;
    const std::size_t pixels = static_cast<std::size_t>(kSize) * kSize * 3;
    s.observation_space = {Space::Kind::kBox,
                           DType::kUInt8,
                           {kSize, kSize, 3},
                           std::vector<double>(pixels, 0.0),
                           std::vector<double>(pixels, 255.0)};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, kNumActions};
    s.info = {{"level_seed", DType::kInt32, {}},
              {"prev_level_seed", DType::kInt32, {}},
              {"prev_level_complete", DType::kUInt8, {}}};
    s.max_seed = kInt32Max;  // rand_seed is a C int
    s.render_shape = {kRenderSize, kRenderSize, 3};
    s.render_fps = 15.0;  // procgen's video.frames_per_second
    return s;
  }

  explicit Procgen(const Config& config) : o_(config), lib_(&Library::get(o_.library)) {
    if (!std::filesystem::is_directory(o_.resource_root))
      throw std::invalid_argument("procgen's assets are not at '" + o_.resource_root + "'");
  }

  void reset(Rng& rng) {
    if (const int64_t seed = rng.take_seed(); seed >= 0 || !env_) {
      env_ = open(static_cast<int32_t>(std::max<int64_t>(seed, 0)));
    } else if (!level_start_) {
      env_->action = -1;  // procgen's forced reset: the level ends, the next one starts
      lib_->act(env_->handle);
    }
    level_start_ = true;
  }

  StepResult step(const Action* action, Rng&) {
    env_->action = static_cast<int32_t>(*action);
    lib_->act(env_->handle);
    level_start_ = env_->first != 0;
    return {static_cast<double>(env_->reward), env_->first != 0, false};
  }

  void write(Row& row) const {
    std::memcpy(row.obs, env_->obs.data(), env_->obs.size());
    *row.info_as<int32_t>(0) = env_->level_seed;
    *row.info_as<int32_t>(1) = env_->prev_level_seed;
    *row.info_as<uint8_t>(2) = env_->prev_level_complete;
  }

  void render(uint8_t* rgb) const {
    if (!env_ || env_->rgb.empty()) {  // not made for rendering (make sets render_human)
      std::memset(rgb, 0, static_cast<std::size_t>(kRenderSize) * kRenderSize * 3);
      return;
    }
    lib_->observe(env_->handle);  // draws the frame into env_->rgb
    std::memcpy(rgb, env_->rgb.data(), env_->rgb.size());
  }

 private:
  // One libenv_env and the buffers it writes (their addresses must not move: heap-held).
  struct Instance {
    const Library* lib = nullptr;
    void* handle = nullptr;
    std::array<uint8_t, kSize * kSize * 3> obs{};
    std::vector<uint8_t> rgb;
    float reward = 0.0f;
    uint8_t first = 0;
    int32_t action = 0;
    int32_t level_seed = 0, prev_level_seed = 0;
    uint8_t prev_level_complete = 0;
    Instance() = default;
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;
    ~Instance() {
      if (handle != nullptr) lib->close(handle);
    }
  };

  // The options ProcgenGym3Env(num=1, num_threads=0, rand_seed=seed, ...) hands the library.
  std::unique_ptr<Instance> open(int32_t seed) const {
    auto env = std::make_unique<Instance>();
    env->lib = lib_;
    std::vector<abi::Option> options;
    std::deque<int32_t> ints;  // the options' values: a deque keeps their addresses
    std::deque<uint8_t> bools;
    auto add = [&](const char* name, abi::Dtype dtype, int count, void* data) {
      abi::Option opt{};
      std::strncpy(opt.name, name, abi::kMaxName - 1);
      opt.dtype = dtype;
      opt.count = count;
      opt.data = data;
      options.push_back(opt);
    };
    auto add_int = [&](const char* name, int32_t v) { add(name, abi::kInt32, 1, &ints.emplace_back(v)); };
    auto add_bool = [&](const char* name, bool v) {
      add(name, abi::kUInt8, 1, &bools.emplace_back(v ? 1 : 0));
    };
    auto add_string = [&](const char* name, const std::string& v) {
      add(name, abi::kUInt8, static_cast<int>(v.size()), const_cast<char*>(v.data()));
    };
    add_bool("center_agent", o_.center_agent);
    add_bool("use_generated_assets", o_.use_generated_assets);
    add_bool("use_monochrome_assets", o_.use_monochrome_assets);
    add_bool("restrict_themes", o_.restrict_themes);
    add_bool("use_backgrounds", o_.use_backgrounds);
    add_bool("paint_vel_info", o_.paint_vel_info);
    add_int("distribution_mode", o_.mode);
    add_string("env_name", o_.game);
    add_int("num_levels", o_.num_levels);
    add_int("start_level", o_.start_level);
    add_int("num_actions", kNumActions);
    add_bool("use_sequential_levels", o_.use_sequential_levels);
    add_int("debug_mode", 0);
    add_int("rand_seed", seed);
    add_int("num_threads", 0);  // the game steps inside libenv_act, on the calling worker
    add_bool("render_human", o_.render_human);
    add_string("resource_root", o_.resource_root);
    env->handle = lib_->make(1, abi::Options{options.data(), static_cast<int>(options.size())});
    if (env->handle == nullptr) throw std::runtime_error("procgen's libenv_make failed");

    // Buffers by name, as the library lists them (gym3's libenv.py does the same).
    void* ob[1] = {env->obs.data()};
    void* ac[1] = {&env->action};
    std::array<abi::TensorType, 8> types{};
    const int n = lib_->get_tensortypes(env->handle, abi::kInfo, nullptr);
    if (n > static_cast<int>(types.size()))
      throw std::runtime_error("procgen's library lists too many info fields");
    lib_->get_tensortypes(env->handle, abi::kInfo, types.data());
    std::array<void*, 8> info{};
    for (int k = 0; k < n; ++k) {
      const std::string name = types[static_cast<std::size_t>(k)].name;
      if (name == "level_seed") {
        info[static_cast<std::size_t>(k)] = &env->level_seed;
      } else if (name == "prev_level_seed") {
        info[static_cast<std::size_t>(k)] = &env->prev_level_seed;
      } else if (name == "prev_level_complete") {
        info[static_cast<std::size_t>(k)] = &env->prev_level_complete;
      } else if (name == "rgb") {
        env->rgb.assign(static_cast<std::size_t>(kRenderSize) * kRenderSize * 3, 0);
        info[static_cast<std::size_t>(k)] = env->rgb.data();
      } else {
        throw std::runtime_error("procgen's library has an unknown info field '" + name + "'");
      }
    }
    abi::Buffers buffers{ob, &env->reward, &env->first, info.data(), ac};
    lib_->set_buffers(env->handle, &buffers);  // resets the game and draws its first frame
    return env;
  }

  Options o_;
  const Library* lib_;
  std::unique_ptr<Instance> env_;
  bool level_start_ = false;  // the frame on screen is a level's first: a reset has nothing to do
};

}  // namespace aiopool::procgen
