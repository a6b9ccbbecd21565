// CartPole-v0 / CartPole-v1: gymnasium 1.4's CartPoleEnv (classic_control/cartpole.py), bit
// for bit.
//
// Exact: the state stays float64 and is advanced in gymnasium's operation order (np.cos and
// np.sin on float64 are numpy's own loops for this CPU, numpy_math.h; np.square is x * x); the
// observation is the state rounded to float32; a reset draws uniform(-0.05, 0.05) four times,
// as `np_random.uniform(size=(4,))`.
// Rewards, including the ones after termination (`steps_beyond_terminated`), and the
// `sutton_barto_reward` kwarg follow gymnasium. Actions must be 0 or 1 (gymnasium asserts).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <vector>

#include "../../env.h"
#include "../../numpy_math.h"
#include "../../registry.h"

namespace aiopool {

class CartPole {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> config_keys() {
    return {{"sutton_barto_reward", ConfigKey::Kind::kBool, 0.0}};
  }

  static EnvSpec spec(const Config&) {
    // gymnasium: high = np.array([x_threshold * 2, inf, theta_threshold * 2, inf], float32).
    const double x = static_cast<float>(kXThreshold * 2);
    const double theta = static_cast<float>(kThetaThreshold * 2);
    const double inf = std::numeric_limits<double>::infinity();
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox,        DType::kFloat32,      {4},
                           {-x, -inf, -theta, -inf}, {x, inf, theta, inf}, 0};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 2};
    s.chunk = 15;
    return s;
  }

  explicit CartPole(const Config& config) : sutton_barto_reward_(config.get_bool("sutton_barto_reward")) {}

  void reset(Rng& rng) {
    x_ = rng.uniform(-0.05, 0.05);
    x_dot_ = rng.uniform(-0.05, 0.05);
    theta_ = rng.uniform(-0.05, 0.05);
    theta_dot_ = rng.uniform(-0.05, 0.05);
    steps_beyond_terminated_ = -1;
  }

  StepResult step(const Action* action, Rng&) {
    const double force = *action == 1 ? kForceMag : -kForceMag;
    const double costheta = np_cos(theta_);
    const double sintheta = np_sin(theta_);
    const double temp = (force + kPolemassLength * (theta_dot_ * theta_dot_) * sintheta) / kTotalMass;
    const double thetaacc = (kGravity * sintheta - costheta * temp) /
                            (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
    const double xacc = temp - kPolemassLength * thetaacc * costheta / kTotalMass;
    // Euler: every update reads the previous state.
    x_ = x_ + kTau * x_dot_;
    x_dot_ = x_dot_ + kTau * xacc;
    theta_ = theta_ + kTau * theta_dot_;
    theta_dot_ = theta_dot_ + kTau * thetaacc;

    const bool terminated =
        x_ < -kXThreshold || x_ > kXThreshold || theta_ < -kThetaThreshold || theta_ > kThetaThreshold;
    double reward;
    if (!terminated) {
      reward = sutton_barto_reward_ ? 0.0 : 1.0;
    } else if (steps_beyond_terminated_ < 0) {
      steps_beyond_terminated_ = 0;
      reward = sutton_barto_reward_ ? -1.0 : 1.0;
    } else {
      ++steps_beyond_terminated_;
      reward = sutton_barto_reward_ ? -1.0 : 0.0;
    }
    return {reward, terminated, false};
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    obs[0] = static_cast<float>(x_);
    obs[1] = static_cast<float>(x_dot_);
    obs[2] = static_cast<float>(theta_);
    obs[3] = static_cast<float>(theta_dot_);
  }

  // gymnasium's `state` (float64), which its render() draws.
  std::vector<double> render_state() const { return {x_, x_dot_, theta_, theta_dot_}; }

 private:
  // Folded at compile time with the same IEEE double arithmetic Python uses at __init__.
  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kTotalMass = kMassPole + kMassCart;
  static constexpr double kLength = 0.5;
  static constexpr double kPolemassLength = kMassPole * kLength;
  static constexpr double kForceMag = 10.0;
  static constexpr double kTau = 0.02;
  static constexpr double kThetaThreshold = 12 * 2 * std::numbers::pi / 360;
  static constexpr double kXThreshold = 2.4;

  bool sutton_barto_reward_;
  double x_ = 0.0, x_dot_ = 0.0, theta_ = 0.0, theta_dot_ = 0.0;
  int64_t steps_beyond_terminated_ = -1;  // gymnasium's None is -1
};

AIOPOOL_REGISTER_ENV("CartPole-v0", CartPole, 200);
AIOPOOL_REGISTER_ENV("CartPole-v1", CartPole, 500);

}  // namespace aiopool
