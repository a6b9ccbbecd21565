// dmc/cartpole-{balance, balance_sparse, swingup, swingup_sparse, two_poles, three_poles}:
// dm_control's cartpole domain (suite/cartpole.py), bit for bit, one to any number of poles
// (three_poles takes the task kwargs num_poles and sparse; dm_control builds the chain of poles).
// The observation: the cart's position and each pole's orientation (xmat zz, xz), and every
// velocity. The dense reward: uprightness x small control x small angular velocity x centred
// cart; the sparse one: the cart within 0.25 and every pole within cos(angle) >= 0.995.
#pragma once

#include <numbers>
#include <string>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <bool kSwingUp, bool kSparse, int kPoles = 1, bool kConfigurable = false>
class Cartpole {
 public:
  static constexpr double kTimeLimit = 10.0;

  static std::vector<ConfigKey> task_keys() {
    if constexpr (kConfigurable)
      return {{"num_poles", ConfigKey::Kind::kInt, kPoles},
              {"sparse", ConfigKey::Kind::kBool, kSparse ? 1.0 : 0.0}};
    return {};
  }
  static int poles(const Config& config) {
    if constexpr (kConfigurable) {
      const int64_t n = config.get_int("num_poles");
      if (n < 1) throw std::invalid_argument("num_poles is " + std::to_string(n) + ", expected >= 1");
      return static_cast<int>(n);
    }
    return kPoles;
  }
  static std::vector<Part> parts(const Config& config) {
    const int n = poles(config);
    return {{"position", 1 + 2 * n}, {"velocity", 1 + n}};
  }

  Cartpole(const Physics& physics, const Config& config)
      : poles_(poles(config)),
        sparse_(kConfigurable ? config.get_bool("sparse") : kSparse),
        slider_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "slider")]),
        hinge_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "hinge_1")]) {
    if (physics.model()->nv != 1 + poles_ || physics.model()->nbody != 2 + poles_)
      throw std::invalid_argument("the cartpole model has not " + std::to_string(poles_) + " poles");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    const int nv = physics.model()->nv;
    double* qpos = physics.data()->qpos;
    if (kSwingUp) {
      qpos[slider_] = .01 * random.standard_normal();
      qpos[hinge_] = std::numbers::pi + .01 * random.standard_normal();
      for (int i = 2; i < nv; ++i) qpos[i] = .1 * random.standard_normal();
    } else {
      qpos[slider_] = random.uniform(-.1, .1);
      for (int i = 1; i < nv; ++i) qpos[i] = random.uniform(-.034, .034);
    }
    double* qvel = physics.data()->qvel;
    for (int i = 0; i < nv; ++i) qvel[i] = .01 * random.standard_normal();
  }

  // position: np.hstack((cart_position, xmat[2:, ['zz', 'xz']].ravel())); velocity: qvel.
  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    out[0] = d->qpos[slider_];
    for (int p = 0; p < poles_; ++p) {
      const double* xmat = d->xmat + 9 * (2 + p);
      out[1 + 2 * p] = xmat[8];
      out[2 + 2 * p] = xmat[2];
    }
    std::memcpy(out + 1 + 2 * poles_, d->qvel, sizeof(double) * static_cast<std::size_t>(1 + poles_));
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double cart = d->qpos[slider_];
    auto cosine = [&](int p) { return d->xmat[9 * (2 + p) + 8]; };
    if (sparse_) {
      const double cart_in_bounds = tolerance(cart, -.25, .25);
      double angle_in_bounds = 1.0;  // np.prod: a running product in order
      for (int p = 0; p < poles_; ++p)
        angle_in_bounds *= tolerance(cosine(p), .995, 1.0, 0.0, Sigmoid::kGaussian, .1, true);
      return cart_in_bounds * angle_in_bounds;
    }
    // upright.mean(): numpy's sum (sequential below 8 elements, then pairwise) over the count.
    std::vector<double> upright(static_cast<std::size_t>(poles_));
    for (int p = 0; p < poles_; ++p) upright[static_cast<std::size_t>(p)] = (cosine(p) + 1) / 2;
    const double mean = pairwise_sum(upright.data(), upright.size()) / static_cast<double>(poles_);
    const double centered = (1 + tolerance(cart, 0.0, 0.0, 2.0)) / 2;
    const double control = tolerance(d->ctrl[0], 0.0, 0.0, 1.0, Sigmoid::kQuadratic, 0.0, true);
    const double small_control = (4 + control) / 5;
    double velocity = tolerance(d->qvel[1], 0.0, 0.0, 5.0, Sigmoid::kGaussian, .1, true);
    for (int p = 1; p < poles_; ++p) {  // .min(), NaN winning as in numpy
      const double v = tolerance(d->qvel[1 + p], 0.0, 0.0, 5.0, Sigmoid::kGaussian, .1, true);
      velocity = std::isnan(velocity) || velocity <= v ? velocity : v;
    }
    const double small_velocity = (1 + velocity) / 2;
    return mean * small_control * small_velocity * centered;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int poles_;
  bool sparse_;
  int slider_, hinge_;
};

using CartpoleBalance = Dmc<Cartpole<false, false>>;
using CartpoleBalanceSparse = Dmc<Cartpole<false, true>>;
using CartpoleSwingup = Dmc<Cartpole<true, false>>;
using CartpoleSwingupSparse = Dmc<Cartpole<true, true>>;
using CartpoleTwoPoles = Dmc<Cartpole<true, false, 2>>;
using CartpoleThreePoles = Dmc<Cartpole<true, false, 3, true>>;
AIOPOOL_REGISTER_ENV("dmc/cartpole-balance", CartpoleBalance, 0);
AIOPOOL_REGISTER_ENV("dmc/cartpole-balance_sparse", CartpoleBalanceSparse, 0);
AIOPOOL_REGISTER_ENV("dmc/cartpole-swingup", CartpoleSwingup, 0);
AIOPOOL_REGISTER_ENV("dmc/cartpole-swingup_sparse", CartpoleSwingupSparse, 0);
AIOPOOL_REGISTER_ENV("dmc/cartpole-two_poles", CartpoleTwoPoles, 0);
AIOPOOL_REGISTER_ENV("dmc/cartpole-three_poles", CartpoleThreePoles, 0);

}  // namespace aiopool::dmc
