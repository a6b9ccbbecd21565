// MountainCarContinuous-v0: gymnasium 1.4's Continuous_MountainCarEnv
// (classic_control/continuous_mountain_car.py), bit for bit.
//
// Exact, including numpy 2's promotion rules (NEP 50), which make this env mix precisions:
// a reset leaves a float64 state, every step stores a float32 one; the float32 action stays
// np.float32 through `min(max(action[0], -1.0), 1.0)` unless clipped to a Python float, and an
// np.float32 meeting a Python float computes (and compares) in float32 with the Python float
// rounded to float32 first. `Num` below tracks which kind of number each variable holds.
// Out-of-range actions: the force is clipped, the reward's action cost uses the raw action.
// A reset draws one uniform(-0.6, -0.4). `goal_velocity` is gymnasium's kwarg.
#pragma once

#include <cmath>
#include <vector>

#include "../../env.h"
#include "../../registry.h"

namespace aiopool {

class MountainCarContinuous {
 public:
  using Action = float;

  static std::vector<ConfigKey> config_keys() { return {{"goal_velocity", ConfigKey::Kind::kFloat, 0.0}}; }

  static EnvSpec spec(const Config&) {
    const double pmin = static_cast<float>(kMinPosition), pmax = static_cast<float>(kMaxPosition);
    const double vmin = static_cast<float>(-kMaxSpeed), vmax = static_cast<float>(kMaxSpeed);
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox, DType::kFloat32, {2}, {pmin, vmin}, {pmax, vmax}, 0};
    s.action_space = {Space::Kind::kBox, DType::kFloat32, {1}, {kMinAction}, {kMaxAction}, 0};
    s.chunk = 15;
    return s;
  }

  explicit MountainCarContinuous(const Config& config) : goal_velocity_(config.get("goal_velocity")) {}

  void reset(Rng& rng) {
    position_ = {rng.uniform(-0.6, -0.4), Kind::kF64};  // np.array([uniform, 0]): float64
    velocity_ = {0.0, Kind::kF64};
  }

  StepResult step(const Action* action, Rng&) {
    const float a = action[0];
    Num position = position_;
    Num velocity = velocity_;

    // force = min(max(action[0], self.min_action), self.max_action)
    Num force{a, Kind::kF32};
    if (py(kMinAction) > force) force = py(kMinAction);
    if (py(kMaxAction) < force) force = py(kMaxAction);

    // velocity += force * self.power - 0.0025 * math.cos(3 * position)
    const Num three_position = py(3) * position;
    const double cos3 = std::cos(three_position.v);
    velocity = velocity + (force * py(kPower) - py(0.0025 * cos3));

    if (velocity > py(kMaxSpeed)) velocity = py(kMaxSpeed);
    if (velocity < py(-kMaxSpeed)) velocity = py(-kMaxSpeed);
    position = position + velocity;
    if (position > py(kMaxPosition)) position = py(kMaxPosition);
    if (position < py(kMinPosition)) position = py(kMinPosition);
    if (position == py(kMinPosition) && velocity < py(0.0)) velocity = py(0.0);
    const bool terminated = position >= py(kGoalPosition) && velocity >= py(goal_velocity_);

    // reward = 0; if terminated: reward = 100.0; reward -= math.pow(action[0], 2) * 0.1
    // (a float32 squared is exact in double, so math.pow's result is a * a).
    const double ad = a;
    const double reward = (terminated ? 100.0 : 0.0) - ad * ad * 0.1;

    // self.state = np.array([position, velocity], dtype=np.float32)
    position_ = {static_cast<float>(position.v), Kind::kF32};
    velocity_ = {static_cast<float>(velocity.v), Kind::kF32};
    return {reward, terminated, false};
  }

  // gymnasium's `state` and whether it is float32 (render() draws it in its own dtype).
  std::vector<double> render_state() const {
    return {position_.v, velocity_.v, position_.kind == Num::Kind::kF32 ? 1.0 : 0.0};
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    obs[0] = static_cast<float>(position_.v);
    obs[1] = static_cast<float>(velocity_.v);
  }

 private:
  // A scalar as Python holds it. Mixed arithmetic and comparisons follow NEP 50: np.float64
  // wins over anything, np.float32 wins over a Python float (which is rounded to float32 first),
  // and two Python floats stay a Python float.
  struct Num {
    enum class Kind { kPy, kF64, kF32 };
    double v;
    Kind kind;
    static Kind join(Num x, Num y) {
      if (x.kind == Kind::kF64 || y.kind == Kind::kF64) return Kind::kF64;
      if (x.kind == Kind::kF32 || y.kind == Kind::kF32) return Kind::kF32;
      return Kind::kPy;
    }
    static float f(Num x) { return static_cast<float>(x.v); }
    friend Num operator+(Num x, Num y) {
      const Kind k = join(x, y);
      return {k == Kind::kF32 ? f(x) + f(y) : x.v + y.v, k};
    }
    friend Num operator-(Num x, Num y) {
      const Kind k = join(x, y);
      return {k == Kind::kF32 ? f(x) - f(y) : x.v - y.v, k};
    }
    friend Num operator*(Num x, Num y) {
      const Kind k = join(x, y);
      return {k == Kind::kF32 ? f(x) * f(y) : x.v * y.v, k};
    }
    friend bool operator>(Num x, Num y) { return join(x, y) == Kind::kF32 ? f(x) > f(y) : x.v > y.v; }
    friend bool operator<(Num x, Num y) { return y > x; }
    friend bool operator>=(Num x, Num y) { return join(x, y) == Kind::kF32 ? f(x) >= f(y) : x.v >= y.v; }
    friend bool operator==(Num x, Num y) { return join(x, y) == Kind::kF32 ? f(x) == f(y) : x.v == y.v; }
  };
  using Kind = Num::Kind;
  static Num py(double v) { return {v, Kind::kPy}; }

  static constexpr double kMinAction = -1.0;
  static constexpr double kMaxAction = 1.0;
  static constexpr double kMinPosition = -1.2;
  static constexpr double kMaxPosition = 0.6;
  static constexpr double kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.45;
  static constexpr double kPower = 0.0015;

  double goal_velocity_;
  Num position_{0.0, Kind::kF64}, velocity_{0.0, Kind::kF64};
};

AIOPOOL_REGISTER_ENV("MountainCarContinuous-v0", MountainCarContinuous, 999);

}  // namespace aiopool
