// Acrobot-v1: gymnasium 1.4's AcrobotEnv (classic_control/acrobot.py, "book" dynamics), bit
// for bit.
//
// Exact: one rk4 step over [0, dt] with gymnasium's array arithmetic in its order, `x ** 2` on
// numpy scalars as libm pow (not x * x), `wrap` and `bound` as written. A reset draws
// uniform(-0.1, 0.1) four times and keeps the state as float32 (`.astype(np.float32)`), so the
// reset observation takes cos/sin of np.float32 scalars, after a step of np.float64 ones: both
// are numpy's own loops for this CPU (np_cos / np_sin, numpy_math.h). Actions must be 0, 1 or 2.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "../../env.h"
#include "../../numpy_math.h"
#include "../../registry.h"

namespace aiopool {

class Acrobot {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> config_keys() { return {}; }

  static EnvSpec spec(const Config&) {
    const double v1 = static_cast<float>(kMaxVel1), v2 = static_cast<float>(kMaxVel2);
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox,
                           DType::kFloat32,
                           {6},
                           {-1.0, -1.0, -1.0, -1.0, -v1, -v2},
                           {1.0, 1.0, 1.0, 1.0, v1, v2},
                           0};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 3};
    s.chunk = 15;
    return s;
  }

  explicit Acrobot(const Config&) {}

  void reset(Rng& rng) {
    for (double& x : s_) x = static_cast<float>(rng.uniform(-0.1, 0.1));
    state_is_f32_ = true;
  }

  StepResult step(const Action* action, Rng&) {
    // AVAIL_TORQUE = [-1.0, 0.0, +1]; np.append(s, torque) makes a float64 array.
    const double torque = static_cast<double>(*action) - 1.0;
    const Vec y0 = {s_[0], s_[1], s_[2], s_[3], torque};

    // rk4(self._dsdt, s_augmented, [0, self.dt]): one step, array ops element by element.
    constexpr double dt = kDt - 0;
    constexpr double dt2 = dt / 2.0;
    const Vec k1 = dsdt(y0);
    const Vec k2 = dsdt(axpy(y0, dt2, k1));
    const Vec k3 = dsdt(axpy(y0, dt2, k2));
    const Vec k4 = dsdt(axpy(y0, dt, k3));
    Vec ns;
    for (int i = 0; i < 5; ++i) ns[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);

    s_[0] = wrap(ns[0], -std::numbers::pi, std::numbers::pi);
    s_[1] = wrap(ns[1], -std::numbers::pi, std::numbers::pi);
    s_[2] = bound(ns[2], -kMaxVel1, kMaxVel1);
    s_[3] = bound(ns[3], -kMaxVel2, kMaxVel2);
    state_is_f32_ = false;

    const bool terminated = -np_cos(s_[0]) - np_cos(s_[1] + s_[0]) > 1.0;
    return {terminated ? 0.0 : -1.0, terminated, false};
  }

  // gymnasium's `state` and whether it is float32 (render() draws it in its own dtype).
  std::vector<double> render_state() const { return {s_[0], s_[1], s_[2], s_[3], state_is_f32_ ? 1.0 : 0.0}; }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    if (state_is_f32_) {
      obs[0] = np_cos(static_cast<float>(s_[0]));
      obs[1] = np_sin(static_cast<float>(s_[0]));
      obs[2] = np_cos(static_cast<float>(s_[1]));
      obs[3] = np_sin(static_cast<float>(s_[1]));
    } else {
      obs[0] = static_cast<float>(np_cos(s_[0]));
      obs[1] = static_cast<float>(np_sin(s_[0]));
      obs[2] = static_cast<float>(np_cos(s_[1]));
      obs[3] = static_cast<float>(np_sin(s_[1]));
    }
    obs[4] = static_cast<float>(s_[2]);
    obs[5] = static_cast<float>(s_[3]);
  }

 private:
  using Vec = std::array<double, 5>;  // theta1, theta2, dtheta1, dtheta2, torque

  static Vec axpy(const Vec& y, double a, const Vec& k) {
    Vec out;
    for (int i = 0; i < 5; ++i) out[i] = y[i] + a * k[i];
    return out;
  }

  // AcrobotEnv._dsdt, book version, in Python's evaluation order. The constants' squares
  // (lc1 ** 2 ...) are exact, so they are written as products.
  static Vec dsdt(const Vec& y) {
    const double a = y[4];
    const double theta1 = y[0], theta2 = y[1], dtheta1 = y[2], dtheta2 = y[3];
    const double d1 = kM1 * (kLc1 * kLc1) +
                      kM2 * ((kL1 * kL1) + (kLc2 * kLc2) + 2 * kL1 * kLc2 * np_cos(theta2)) + kI1 + kI2;
    const double d2 = kM2 * ((kLc2 * kLc2) + kL1 * kLc2 * np_cos(theta2)) + kI2;
    const double phi2 = kM2 * kLc2 * kG * np_cos(theta1 + theta2 - std::numbers::pi / 2.0);
    const double phi1 = -kM2 * kL1 * kLc2 * pow(dtheta2, 2) * np_sin(theta2) -
                        2 * kM2 * kL1 * kLc2 * dtheta2 * dtheta1 * np_sin(theta2) +
                        (kM1 * kLc1 + kM2 * kL1) * kG * np_cos(theta1 - std::numbers::pi / 2) + phi2;
    const double ddtheta2 =
        (a + d2 / d1 * phi1 - kM2 * kL1 * kLc2 * pow(dtheta1, 2) * np_sin(theta2) - phi2) /
        (kM2 * (kLc2 * kLc2) + kI2 - pow(d2, 2) / d1);
    const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    return {dtheta1, dtheta2, ddtheta1, ddtheta2, 0.0};
  }

  static double wrap(double x, double m, double M) {
    const double diff = M - m;
    while (x > M) x = x - diff;
    while (x < m) x = x + diff;
    return x;
  }

  // min(max(x, m), M) with Python's max/min (the first argument wins ties and NaN).
  static double bound(double x, double m, double M) {
    const double hi = m > x ? m : x;
    return M < hi ? M : hi;
  }

  // `x ** 2` on an np.float64 (and on a Python float) calls libm pow; an opaque exponent
  // keeps the compiler from rewriting pow(x, 2.0) as x * x, which rounds differently.
  static double pow(double x, double y) {
    asm("" : "+x"(y));
    return std::pow(x, y);
  }

  static constexpr double kDt = 0.2;
  static constexpr double kL1 = 1.0;   // LINK_LENGTH_1
  static constexpr double kM1 = 1.0;   // LINK_MASS_1
  static constexpr double kM2 = 1.0;   // LINK_MASS_2
  static constexpr double kLc1 = 0.5;  // LINK_COM_POS_1
  static constexpr double kLc2 = 0.5;  // LINK_COM_POS_2
  static constexpr double kI1 = 1.0;   // LINK_MOI
  static constexpr double kI2 = 1.0;
  static constexpr double kG = 9.8;
  static constexpr double kMaxVel1 = 4 * std::numbers::pi;
  static constexpr double kMaxVel2 = 9 * std::numbers::pi;

  std::array<double, 4> s_{};
  bool state_is_f32_ = false;
};

AIOPOOL_REGISTER_ENV("Acrobot-v1", Acrobot, 500);

}  // namespace aiopool
