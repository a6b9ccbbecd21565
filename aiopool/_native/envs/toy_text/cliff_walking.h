// CliffWalking-v1 / CliffWalkingSlippery-v1: gymnasium 1.4's CliffWalkingEnv
// (toy_text/cliffwalking.py), bit for bit, with its kwarg is_slippery. A row's info has "prob",
// the probability of the transition taken (1 after a reset). gymnasium sets no time limit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "../../env.h"
#include "../../registry.h"
#include "tabular.h"

namespace aiopool {

class CliffWalking {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> keys(bool is_slippery) {
    return {{"is_slippery", ConfigKey::Kind::kBool, is_slippery ? 1.0 : 0.0}};
  }
  static std::vector<ConfigKey> config_keys() { return keys(false); }

  static EnvSpec spec(const Config&) {
    EnvSpec s;
    s.observation_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, kRows * kCols};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 4};
    s.info = {{"prob", DType::kFloat64, {}}};
    s.chunk = 32;
    return s;
  }

  explicit CliffWalking(const Config& config) {
    const bool slippery = config.get_bool("is_slippery");
    walk_.model = toy_text::shared_model(slippery ? "slippery" : "dry", [&] { return build(slippery); });
    walk_.s = kStart;
  }

  void reset(Rng& rng) { walk_.reset(rng); }
  StepResult step(const Action* action, Rng& rng) { return walk_.step(*action, rng); }
  void write(Row& row) const { walk_.write(row); }
  // gymnasium's `s`, which its render() draws.
  std::vector<double> render_state() const { return {static_cast<double>(walk_.s)}; }

 private:
  static constexpr int32_t kRows = 4, kCols = 12;
  static constexpr int32_t kStart = 3 * kCols;  // (3, 0)

  // gymnasium's __init__ and _calculate_transition_prob: moves UP, RIGHT, DOWN, LEFT clipped to
  // the grid; (3, 1..10) is the cliff (-100, back to the start); (3, 11) the goal.
  static toy_text::Model build(bool slippery) {
    toy_text::Model m(kRows * kCols, 4);
    const int32_t dr[4] = {-1, 0, 1, 0}, dc[4] = {0, 1, 0, -1};
    for (int32_t s = 0; s < kRows * kCols; ++s)
      for (int32_t move = 0; move < 4; ++move) {
        const double p = 1.0 / (slippery ? 3 : 1);
        auto add = [&](int32_t a) {
          const int32_t r = std::clamp(s / kCols + dr[a], 0, kRows - 1);
          const int32_t c = std::clamp(s % kCols + dc[a], 0, kCols - 1);
          if (r == 3 && c >= 1 && c <= kCols - 2)
            m.add(s, move, p, kStart, -100.0, false);
          else
            m.add(s, move, p, r * kCols + c, -1.0, r == kRows - 1 && c == kCols - 1);
        };
        if (slippery) {
          for (int32_t a : {(move + 3) % 4, move, (move + 1) % 4}) add(a);
        } else {
          add(move);
        }
      }
    std::vector<double> weights(kRows * kCols, 0.0);
    weights[kStart] = 1.0;
    m.set_initial(weights);
    return m;
  }

  toy_text::Walk walk_;
};

// CliffWalkingSlippery-v1: gymnasium registers the same env with is_slippery=True.
class CliffWalkingSlippery : public CliffWalking {
 public:
  using CliffWalking::CliffWalking;
  static std::vector<ConfigKey> config_keys() { return keys(true); }
};

AIOPOOL_REGISTER_ENV("CliffWalking-v1", CliffWalking, 0);
AIOPOOL_REGISTER_ENV("CliffWalkingSlippery-v1", CliffWalkingSlippery, 0);

}  // namespace aiopool
