// Acrobot-v1: gymnasium 1.4's AcrobotEnv (classic_control/acrobot.py, "book" dynamics), bit
// for bit.
//
// Exact: one rk4 step over [0, dt] with gymnasium's array arithmetic in its order, `x ** 2` on
// numpy scalars as libm pow (not x * x), `wrap` and `bound` as written. A reset draws
// uniform(-0.1, 0.1) four times and keeps the state as float32 (`.astype(np.float32)`), so the
// reset observation takes cos/sin of np.float32 scalars, which numpy computes with its own SIMD
// kernel (reproduced in `numpy_sincos_f32`); after a step the state is float64 and cos/sin are
// libm's. Actions must be 0, 1 or 2.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "../../env.h"
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

    const bool terminated = -std::cos(s_[0]) - std::cos(s_[1] + s_[0]) > 1.0;
    return {terminated ? 0.0 : -1.0, terminated, false};
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    if (state_is_f32_) {
      obs[0] = numpy_sincos_f32(static_cast<float>(s_[0]), true);
      obs[1] = numpy_sincos_f32(static_cast<float>(s_[0]), false);
      obs[2] = numpy_sincos_f32(static_cast<float>(s_[1]), true);
      obs[3] = numpy_sincos_f32(static_cast<float>(s_[1]), false);
    } else {
      obs[0] = static_cast<float>(std::cos(s_[0]));
      obs[1] = static_cast<float>(std::sin(s_[0]));
      obs[2] = static_cast<float>(std::cos(s_[1]));
      obs[3] = static_cast<float>(std::sin(s_[1]));
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
                      kM2 * ((kL1 * kL1) + (kLc2 * kLc2) + 2 * kL1 * kLc2 * std::cos(theta2)) + kI1 + kI2;
    const double d2 = kM2 * ((kLc2 * kLc2) + kL1 * kLc2 * std::cos(theta2)) + kI2;
    const double phi2 = kM2 * kLc2 * kG * std::cos(theta1 + theta2 - std::numbers::pi / 2.0);
    const double phi1 = -kM2 * kL1 * kLc2 * pow(dtheta2, 2) * std::sin(theta2) -
                        2 * kM2 * kL1 * kLc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                        (kM1 * kLc1 + kM2 * kL1) * kG * std::cos(theta1 - std::numbers::pi / 2) + phi2;
    const double ddtheta2 =
        (a + d2 / d1 * phi1 - kM2 * kL1 * kLc2 * pow(dtheta1, 2) * std::sin(theta2) - phi2) /
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

  // np.cos / np.sin of an np.float32 with |x| <= 0.1 (the reset's range). With AVX2+FMA
  // (numpy's X86_V3 target and up) numpy runs its own SIMD kernel: Cody-Waite reduction by pi/2
  // and minimax polynomials with fused multiply-adds; without FMA it calls libm's cosf/sinf.
  // Checked against numpy 2.4 on every float32 with |x| <= 0.1; numpy's range reduction
  // differs from this one for |x| above a few hundred, which Acrobot never feeds it.
  static float numpy_sincos_f32(float x, bool cosine) {
    static const bool kFma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!kFma || std::isnan(x)) return cosine ? std::cos(x) : std::sin(x);
    if (!(std::fabs(x) <= (cosine ? 71476.0625f : 117435.992f))) return cosine ? std::cos(x) : std::sin(x);

    float quadrant = x * 0x1.45f306p-1f;  // 2 / pi; round to nearest integer:
    quadrant = quadrant + 0x1.800000p+23f;
    quadrant = quadrant - 0x1.800000p+23f;
    float r = std::fma(quadrant, -0x1.921fb0p+00f, x);
    r = std::fma(quadrant, -0x1.5110b4p-22f, r);
    r = std::fma(quadrant, -0x1.846988p-48f, r);
    const float r2 = r * r;

    float c = std::fma(0x1.98e616p-16f, r2, -0x1.6c06dcp-10f);
    c = std::fma(c, r2, 0x1.55553cp-05f);
    c = std::fma(c, r2, -0x1.000000p-01f);
    c = std::fma(c, r2, 0x1.000000p+00f);

    float s = std::fma(0x1.7d3bbcp-19f, r2, -0x1.a06bbap-13f);
    s = std::fma(s, r2, 0x1.11119ap-07f);
    s = std::fma(s, r2, -0x1.555556p-03f);
    s = std::fma(s, r2, 0.0f);
    s = std::fma(s, r, r);

    int32_t q = static_cast<int32_t>(std::nearbyint(quadrant));
    if (cosine) q += 1;
    float out = (q & 1) == 0 ? s : c;
    if ((q & 2) == 2) out = 0.0f - out;
    return out;
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
