// MountainCar-v0: gymnasium 1.4's MountainCarEnv (classic_control/mountain_car.py), bit for bit.
//
// Exact: position and velocity stay float64 (gymnasium keeps a tuple of np.float64), the step
// uses math.cos (libm) and np.clip in gymnasium's order, the observation is the state rounded to
// float32, and a reset draws one uniform(-0.6, -0.4). `goal_velocity` is gymnasium's kwarg.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "../../env.h"
#include "../../registry.h"

namespace aiopool {

class MountainCar {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> config_keys() { return {{"goal_velocity", ConfigKey::Kind::kFloat, 0.0}}; }

  static EnvSpec spec(const Config&) {
    // gymnasium: Box(np.array([min_position, -max_speed], float32), np.array([max_position, max_speed],
    // float32)).
    const double pmin = static_cast<float>(kMinPosition), pmax = static_cast<float>(kMaxPosition);
    const double vmin = static_cast<float>(-kMaxSpeed), vmax = static_cast<float>(kMaxSpeed);
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox, DType::kFloat32, {2}, {pmin, vmin}, {pmax, vmax}, 0};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 3};
    s.chunk = 15;
    return s;
  }

  explicit MountainCar(const Config& config) : goal_velocity_(config.get("goal_velocity")) {}

  void reset(Rng& rng) {
    position_ = rng.uniform(-0.6, -0.4);
    velocity_ = 0.0;
  }

  StepResult step(const Action* action, Rng&) {
    velocity_ += static_cast<double>(*action - 1) * kForce + std::cos(3 * position_) * -kGravity;
    velocity_ = clip(velocity_, -kMaxSpeed, kMaxSpeed);
    position_ += velocity_;
    position_ = clip(position_, kMinPosition, kMaxPosition);
    if (position_ == kMinPosition && velocity_ < 0) velocity_ = 0.0;
    const bool terminated = position_ >= kGoalPosition && velocity_ >= goal_velocity_;
    return {-1.0, terminated, false};
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    obs[0] = static_cast<float>(position_);
    obs[1] = static_cast<float>(velocity_);
  }

  // gymnasium's `state`, which its render() draws.
  std::vector<double> render_state() const { return {position_, velocity_}; }

 private:
  // np.clip on a float64 scalar: min(max(x, lo), hi), NaN passes through.
  static double clip(double x, double lo, double hi) {
    if (std::isnan(x)) return x;
    const double m = x > lo ? x : lo;
    return m < hi ? m : hi;
  }

  static constexpr double kMinPosition = -1.2;
  static constexpr double kMaxPosition = 0.6;
  static constexpr double kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.5;
  static constexpr double kForce = 0.001;
  static constexpr double kGravity = 0.0025;

  double goal_velocity_;
  double position_ = 0.0, velocity_ = 0.0;
};

AIOPOOL_REGISTER_ENV("MountainCar-v0", MountainCar, 200);

}  // namespace aiopool
