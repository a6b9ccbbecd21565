// Pendulum-v1: gymnasium 1.4's PendulumEnv (classic_control/pendulum.py), bit for bit.
//
// Exact: the state stays float64; the action is np.clip'ed as float32 and `u` stays np.float32,
// so (NEP 50) `3.0 * u` and `0.001 * u ** 2` are float32 products; `x ** 2` on numpy scalars is
// libm pow / powf (not x * x: they differ in ~1e-3 of cases), so it is called as such;
// angle_normalize's `%` is numpy's floor-mod; np.cos / np.sin are numpy's loops (numpy_math.h).
// The observation is [cos th, sin th, thdot] rounded to float32; a reset draws uniform(-pi, pi)
// then uniform(-1, 1). `g` is gymnasium's kwarg.
#pragma once

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "../../env.h"
#include "../../numpy_math.h"
#include "../../registry.h"

namespace aiopool {

class Pendulum {
 public:
  using Action = float;

  static std::vector<ConfigKey> config_keys() { return {{"g", ConfigKey::Kind::kFloat, 10.0}}; }

  static EnvSpec spec(const Config&) {
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox,        DType::kFloat32,       {3},
                           {-1.0, -1.0, -kMaxSpeed}, {1.0, 1.0, kMaxSpeed}, 0};
    s.action_space = {Space::Kind::kBox, DType::kFloat32, {1}, {-kMaxTorque}, {kMaxTorque}, 0};
    s.chunk = 15;
    return s;
  }

  explicit Pendulum(const Config& config) : g_(config.get("g")) {}

  void reset(Rng& rng) {
    // uniform(low=-high, high=high) with high = np.array([pi, 1.0]): one draw per element.
    th_ = rng.uniform(-std::numbers::pi, std::numbers::pi);
    thdot_ = rng.uniform(-1.0, 1.0);
    last_u_ = std::numeric_limits<double>::quiet_NaN();
  }

  StepResult step(const Action* action, Rng&) {
    // u = np.clip(u, -max_torque, max_torque)[0]: float32, NaN passes through.
    const float u = clip(action[0], static_cast<float>(-kMaxTorque), static_cast<float>(kMaxTorque));
    last_u_ = u;

    // A Python float times an np.float32 is a float32 product with the Python float rounded
    // to float32; float32 + float64 is float64.
    const float u_cost = static_cast<float>(0.001) * powf(u, 2.0f);
    const double costs =
        pow(angle_normalize(th_), 2.0) + 0.1 * pow(thdot_, 2.0) + static_cast<double>(u_cost);
    const float u_acc = static_cast<float>(3.0 / (kM * kL * kL)) * u;
    double newthdot = thdot_ + (3 * g_ / (2 * kL) * np_sin(th_) + static_cast<double>(u_acc)) * kDt;
    newthdot = clip(newthdot, -kMaxSpeed, kMaxSpeed);
    th_ = th_ + newthdot * kDt;
    thdot_ = newthdot;
    return {-costs, false, false};
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    obs[0] = static_cast<float>(np_cos(th_));
    obs[1] = static_cast<float>(np_sin(th_));
    obs[2] = static_cast<float>(thdot_);
  }

  // gymnasium's `state` and `last_u` (NaN for None: NaN actions are refused), which its
  // render() draws.
  std::vector<double> render_state() const { return {th_, thdot_, last_u_}; }

 private:
  // np.clip on a scalar: min(max(x, lo), hi), NaN passes through.
  template <class T>
  static T clip(T x, T lo, T hi) {
    if (std::isnan(x)) return x;
    const T m = x > lo ? x : lo;
    return m < hi ? m : hi;
  }

  // (x + pi) % (2 * pi) - pi, with numpy's float64 remainder (npy_divmod: fmod, then moved
  // into the divisor's sign).
  static double angle_normalize(double x) {
    const double a = x + std::numbers::pi;
    const double b = 2 * std::numbers::pi;
    double mod = std::fmod(a, b);
    if (mod != 0.0) {
      if (mod < 0.0) mod += b;
    } else {
      mod = 0.0;
    }
    return mod - std::numbers::pi;
  }

  // numpy's scalar `**` calls libm pow/powf; an opaque exponent keeps the compiler from
  // rewriting pow(x, 2.0) as x * x.
  static double pow(double x, double y) {
    asm("" : "+x"(y));
    return std::pow(x, y);
  }
  static float powf(float x, float y) {
    asm("" : "+x"(y));
    return std::pow(x, y);
  }

  static constexpr double kMaxSpeed = 8;
  static constexpr double kMaxTorque = 2.0;
  static constexpr double kDt = 0.05;
  static constexpr double kM = 1.0;
  static constexpr double kL = 1.0;

  double g_;
  double th_ = 0.0, thdot_ = 0.0;
  double last_u_ = std::numeric_limits<double>::quiet_NaN();  // a float32, or None
};

AIOPOOL_REGISTER_ENV("Pendulum-v1", Pendulum, 200);

}  // namespace aiopool
