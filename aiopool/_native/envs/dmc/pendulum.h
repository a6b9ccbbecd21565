// dmc/pendulum-swingup: dm_control's pendulum domain (suite/pendulum.py), bit for bit. A reset
// draws the hinge angle uniformly in [-pi, pi); the observation is the pole's orientation
// (xmat zz, xz) and the hinge's velocity; the reward is tolerance(xmat zz, (cos 8deg, 1)).
#pragma once

#include <numbers>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

class Pendulum {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"orientation", 2}, {"velocity", 1}}; }

  Pendulum(const Physics& physics, const Config&)
      : pole_(physics.id(mjOBJ_BODY, "pole")),
        hinge_qpos_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "hinge")]),
        hinge_dof_(physics.model()->jnt_dofadr[physics.id(mjOBJ_JOINT, "hinge")]),
        // np.cos(np.deg2rad(8)): deg2rad is x * (pi / 180), one rounding as numpy's loop does.
        cosine_bound_(np_cos(8.0 * (std::numbers::pi / 180.0))) {}

  void initialize_episode(Physics& physics, RandomState& random) const {
    physics.data()->qpos[hinge_qpos_] = random.uniform(-std::numbers::pi, std::numbers::pi);
  }

  void observe(const Physics& physics, double* out) const {
    const double* xmat = physics.data()->xmat + 9 * pole_;
    out[0] = xmat[8];  // zz
    out[1] = xmat[2];  // xz
    out[2] = physics.data()->qvel[hinge_dof_];
  }

  double reward(const Physics& physics) const {
    return tolerance(physics.data()->xmat[9 * pole_ + 8], cosine_bound_, 1.0);
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int pole_, hinge_qpos_, hinge_dof_;
  double cosine_bound_;
};

AIOPOOL_REGISTER_ENV("dmc/pendulum-swingup", Dmc<Pendulum>, 0);

}  // namespace aiopool::dmc
