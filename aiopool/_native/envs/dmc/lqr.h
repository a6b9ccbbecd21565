// dmc/lqr-{lqr_2_1, lqr_6_2}: dm_control's LQR domain (suite/lqr.py), bit for bit: a chain of 2
// (or 6) sliding bodies on springs, the first 1 (or 2) actuated, no time limit. dm_control
// builds the model from the seed: each joint's stiffness (uniform in [15, 25]) and damping
// (uniform in [0, 0]) come from the task's RandomState before its first episode, so each seed
// is its own model (`seeded`). A reset puts the state on the sphere of radius sqrt(2)
// (randn(nq) normalised); the reward is 1 - (|q|^2 / 2 + 0.1 |u|^2 / 2); the episode ends
// (discount 0) once the state's norm is below 1e-6.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kBodies, int kActuators>
class Lqr {
 public:
  static constexpr double kTimeLimit = std::numeric_limits<double>::infinity();
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"position", kBodies}, {"velocity", kBodies}}; }

  Lqr(const Physics& physics, const Config&) {
    const mjModel* m = physics.model();
    if (m->nq != kBodies || m->nv != kBodies || m->nu != kActuators || m->na != 0)
      throw std::invalid_argument("not the LQR model");
    for (int b = 0; b < kBodies; ++b)
      joints_[b] = physics.id(mjOBJ_JOINT, ("joint_" + std::to_string(b)).c_str());
  }

  // _make_model(n_bodies, n_actuators, random): each body's joint draws its stiffness, then its
  // damping, as the model is built (str(value) in the XML is the same double).
  void seeded(Physics& physics, RandomState& random) const {
    mjModel* m = physics.model();
    for (int j : joints_) {
      m->jnt_stiffness[j] = random.uniform(15, 25);
      m->dof_damping[m->jnt_dofadr[j]] = random.uniform(0, 0);
    }
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    double unit[kBodies];
    for (double& u : unit) u = random.standard_normal();
    const double norm = np_norm(unit, kBodies);
    const double sqrt2 = std::sqrt(2.0);
    for (int i = 0; i < kBodies; ++i) physics.data()->qpos[i] = sqrt2 * unit[i] / norm;
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    for (int i = 0; i < kBodies; ++i) *out++ = d->qpos[i];
    for (int i = 0; i < kBodies; ++i) *out++ = d->qvel[i];
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double state_cost = 0.5 * np_dot(d->qpos, d->qpos, kBodies);
    const double control_cost = 0.5 * np_dot(d->ctrl, d->ctrl, kActuators);
    return 1 - (state_cost + control_cost * 0.1);
  }

  // get_termination: the physics state's norm (qpos and qvel) below 1e-6.
  bool terminated(const Physics& physics) const {
    const mjData* d = physics.data();
    double state[2 * kBodies];
    for (int i = 0; i < kBodies; ++i) {
      state[i] = d->qpos[i];
      state[kBodies + i] = d->qvel[i];
    }
    return np_norm(state, 2 * kBodies) < 1e-6;
  }

 private:
  int joints_[kBodies] = {};
};

using Lqr21 = Dmc<Lqr<2, 1>>;
using Lqr62 = Dmc<Lqr<6, 2>>;
AIOPOOL_REGISTER_ENV("dmc/lqr-lqr_2_1", Lqr21, 0);
AIOPOOL_REGISTER_ENV("dmc/lqr-lqr_6_2", Lqr62, 0);

}  // namespace aiopool::dmc
