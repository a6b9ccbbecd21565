// FrozenLake-v1 / FrozenLake8x8-v1: gymnasium 1.4's FrozenLakeEnv (toy_text/frozen_lake.py), bit
// for bit, with every kwarg: desc, map_name, is_slippery, success_rate, reward_schedule.
//
// The transition table is built as gymnasium builds `P` (tabular.h draws from it). A row's
// info has "prob", the probability of the transition taken (1 after a reset), as gymnasium's.
// desc=None and map_name=None: gymnasium draws generate_random_map() (8x8, p=0.8) from fresh
// OS entropy at construction, so its maps are not reproducible. Here env i's map is
// generate_random_map(seed=seed + i), drawn again each time the env is re-seeded: the same as
// gymnasium.make(id, desc=generate_random_map(seed=s)).reset(seed=s). A desc without an "S"
// tile is refused (gymnasium divides by zero and starts in state 0).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../registry.h"
#include "tabular.h"

namespace aiopool {

class FrozenLake {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> keys(const char* map_name) {
    return {{"desc", ConfigKey::Kind::kLines, 0.0, ""},
            {"map_name", ConfigKey::Kind::kOptionalString, 0.0, map_name},
            {"is_slippery", ConfigKey::Kind::kBool, 1.0},
            {"success_rate", ConfigKey::Kind::kFloat, 1.0 / 3.0},
            {"reward_schedule", ConfigKey::Kind::kNumbers, 0.0, "", {0.0, 0.0}, {1.0, 0.0, 0.0}}};
  }
  static std::vector<ConfigKey> config_keys() { return keys("4x4"); }

  static EnvSpec spec(const Config& config) {
    const std::vector<std::string> map = map_of(config);
    const int64_t n =
        map.empty() ? kRandomSize * kRandomSize : static_cast<int64_t>(map.size() * map[0].size());
    EnvSpec s;
    s.observation_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, n};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 4};
    s.info = {{"prob", DType::kFloat64, {}}};
    s.chunk = 32;
    return s;
  }

  explicit FrozenLake(const Config& config)
      : is_slippery_(config.get_bool("is_slippery")),
        success_rate_(config.get("success_rate")),
        reward_schedule_(config.get_numbers("reward_schedule")) {
    const std::vector<std::string> map = map_of(config);
    random_map_ = map.empty();
    if (!random_map_) walk_.model = toy_text::shared_model(key(map), [&] { return build(map); });
    desc_ = map;
  }

  void reset(Rng& rng) {
    // A random map is drawn from the fresh seeded stream (a copy: the reset then draws from
    // the same state, as gymnasium's np_random after reset(seed=s)).
    const bool reseeded = rng.take_seed() >= 0;
    if (random_map_ && (reseeded || walk_.model == nullptr)) {
      desc_ = generate_random_map(rng);
      walk_.model = std::make_shared<const toy_text::Model>(build(desc_));
    }
    walk_.reset(rng);
  }

  StepResult step(const Action* action, Rng& rng) { return walk_.step(*action, rng); }
  void write(Row& row) const { walk_.write(row); }
  // What gymnasium's render() draws: `s`, then the map (`desc`, drawn anew for a random map),
  // as its row count and its letters' codes.
  std::vector<double> render_state() const {
    std::vector<double> out{static_cast<double>(walk_.s), static_cast<double>(desc_.size())};
    for (const std::string& row : desc_)
      for (char c : row) out.push_back(static_cast<double>(c));
    return out;
  }

 private:
  static constexpr int kRandomSize = 8;  // generate_random_map(size=8, p=0.8)

  // The rows of the map, or none for a random one.
  static std::vector<std::string> map_of(const Config& config) {
    std::vector<std::string> rows;
    if (const std::string* desc = config.find_string("desc")) {
      std::size_t start = 0;
      while (start <= desc->size()) {
        const std::size_t end = std::min(desc->find('\n', start), desc->size());
        rows.push_back(desc->substr(start, end - start));
        start = end + 1;
      }
      for (const std::string& r : rows)
        if (r.empty() || r.size() != rows[0].size())
          throw std::invalid_argument("desc must be rows of equal, non-zero length");
      bool start_tile = false;
      for (const std::string& r : rows) start_tile = start_tile || r.find('S') != std::string::npos;
      if (!start_tile) throw std::invalid_argument("desc has no start tile 'S'");
    } else if (const std::string* name = config.find_string("map_name")) {
      if (*name == "4x4") {
        rows = {"SFFF", "FHFH", "FFFH", "HFFG"};
      } else if (*name == "8x8") {
        rows = {"SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF",
                "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG"};
      } else {
        throw std::invalid_argument("map_name is '" + *name + "', expected '4x4', '8x8' or None");
      }
    }
    return rows;
  }

  std::string key(const std::vector<std::string>& map) const {
    std::string k;
    for (const std::string& r : map) k += r + "\n";
    char buf[128];
    std::snprintf(buf, sizeof buf, "%d %a %a %a %a", is_slippery_ ? 1 : 0, success_rate_, reward_schedule_[0],
                  reward_schedule_[1], reward_schedule_[2]);
    return k + buf;
  }

  // gymnasium's FrozenLakeEnv.__init__: P[s][a] and the initial state distribution.
  toy_text::Model build(const std::vector<std::string>& desc) const {
    const int32_t nrow = static_cast<int32_t>(desc.size());
    const int32_t ncol = static_cast<int32_t>(desc[0].size());
    toy_text::Model m(nrow * ncol, 4);
    std::vector<double> weights;
    for (const std::string& r : desc)
      for (char c : r) weights.push_back(c == 'S' ? 1.0 : 0.0);
    m.set_initial(weights);
    const double fail_rate = (1.0 - success_rate_) / 2.0;
    for (int32_t row = 0; row < nrow; ++row)
      for (int32_t col = 0; col < ncol; ++col) {
        const int32_t s = row * ncol + col;
        const char letter = desc[static_cast<std::size_t>(row)][static_cast<std::size_t>(col)];
        for (int32_t a = 0; a < 4; ++a) {
          if (letter == 'G' || letter == 'H') {
            m.add(s, a, 1.0, s, 0.0, true);
            continue;
          }
          auto add = [&](int32_t b, double p) {
            int32_t r = row, c = col;
            if (b == 0)
              c = std::max(c - 1, 0);  // LEFT
            else if (b == 1)
              r = std::min(r + 1, nrow - 1);  // DOWN
            else if (b == 2)
              c = std::min(c + 1, ncol - 1);  // RIGHT
            else
              r = std::max(r - 1, 0);  // UP
            const char next = desc[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
            const double reward = next == 'G'   ? reward_schedule_[0]
                                  : next == 'H' ? reward_schedule_[1]
                                                : reward_schedule_[2];
            m.add(s, a, p, r * ncol + c, reward, next == 'G' || next == 'H');
          };
          if (is_slippery_) {
            for (int32_t b : {(a + 3) % 4, a, (a + 1) % 4}) add(b, b == a ? success_rate_ : fail_rate);
          } else {
            add(a, 1.0);
          }
        }
      }
    return m;
  }

  // gymnasium's generate_random_map(size=8, p=0.8, seed=s), from the stream seeded s: boards of
  // np_random.choice(["F", "H"], (8, 8), p=[p, 1 - p]) (a double per tile, in C order; "H" where
  // searchsorted(cdf, u, "right") is 1) until the goal is reachable from the start.
  static std::vector<std::string> generate_random_map(Rng rng) {
    const double p = 0.8;
    const double total = p + (1 - p);
    const double cdf0 = p / total;
    const int n = kRandomSize;
    std::vector<std::string> board(n, std::string(n, 'F'));
    do {
      for (std::string& r : board)
        for (char& c : r) c = rng.next_double() >= cdf0 ? 'H' : 'F';
      board[0][0] = 'S';
      board[n - 1][n - 1] = 'G';
    } while (!is_valid(board));
    return board;
  }

  // gymnasium's is_valid: is "G" reachable from (0, 0) through tiles that are not "H".
  static bool is_valid(const std::vector<std::string>& board) {
    const int n = static_cast<int>(board.size());
    std::vector<uint8_t> seen(static_cast<std::size_t>(n * n), 0);
    std::vector<std::pair<int, int>> frontier{{0, 0}};
    while (!frontier.empty()) {
      const auto [r, c] = frontier.back();
      frontier.pop_back();
      if (seen[static_cast<std::size_t>(r * n + c)]) continue;
      seen[static_cast<std::size_t>(r * n + c)] = 1;
      const int dr[4] = {1, 0, -1, 0}, dc[4] = {0, 1, 0, -1};
      for (int k = 0; k < 4; ++k) {
        const int rn = r + dr[k], cn = c + dc[k];
        if (rn < 0 || rn >= n || cn < 0 || cn >= n) continue;
        const char t = board[static_cast<std::size_t>(rn)][static_cast<std::size_t>(cn)];
        if (t == 'G') return true;
        if (t != 'H') frontier.emplace_back(rn, cn);
      }
    }
    return false;
  }

  bool is_slippery_;
  double success_rate_;
  std::vector<double> reward_schedule_;
  bool random_map_;
  std::vector<std::string> desc_;  // the map, for render_state()
  toy_text::Walk walk_;
};

// FrozenLake8x8-v1: gymnasium registers the same env with map_name="8x8".
class FrozenLake8x8 : public FrozenLake {
 public:
  using FrozenLake::FrozenLake;
  static std::vector<ConfigKey> config_keys() { return keys("8x8"); }
};

AIOPOOL_REGISTER_ENV("FrozenLake-v1", FrozenLake, 100);
AIOPOOL_REGISTER_ENV("FrozenLake8x8-v1", FrozenLake8x8, 200);

}  // namespace aiopool
