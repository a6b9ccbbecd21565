// dmc/acrobot-{swingup, swingup_sparse}: dm_control's acrobot domain (suite/acrobot.py), bit for
// bit (its model integrates with RK4). A reset draws both joint angles in [-pi, pi); the
// observation is the arms' orientations (xmat xz, then zz) and the velocities; the reward is
// the tip's closeness to the target (a Gaussian margin of 1, or none when sparse).
#pragma once

#include <numbers>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <bool kSparse>
class Acrobot {
 public:
  static constexpr double kTimeLimit = 10.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"orientations", 4}, {"velocity", 2}}; }

  Acrobot(const Physics& physics, const Config&)
      : upper_(physics.id(mjOBJ_BODY, "upper_arm")),
        lower_(physics.id(mjOBJ_BODY, "lower_arm")),
        shoulder_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "shoulder")]),
        elbow_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "elbow")]),
        target_(physics.id(mjOBJ_SITE, "target")),
        tip_(physics.id(mjOBJ_SITE, "tip")) {}

  void initialize_episode(Physics& physics, RandomState& random) const {
    double* qpos = physics.data()->qpos;
    qpos[shoulder_] = random.uniform(-std::numbers::pi, std::numbers::pi);
    qpos[elbow_] = random.uniform(-std::numbers::pi, std::numbers::pi);
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    out[0] = d->xmat[9 * upper_ + 2];
    out[1] = d->xmat[9 * lower_ + 2];
    out[2] = d->xmat[9 * upper_ + 8];
    out[3] = d->xmat[9 * lower_ + 8];
    std::memcpy(out + 4, d->qvel, 2 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    double tip_to_target[3];
    for (int i = 0; i < 3; ++i) tip_to_target[i] = d->site_xpos[3 * target_ + i] - d->site_xpos[3 * tip_ + i];
    const double radius = physics.model()->site_size[3 * target_];
    return tolerance(np_norm(tip_to_target, 3), 0.0, radius, kSparse ? 0.0 : 1.0);
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int upper_, lower_, shoulder_, elbow_, target_, tip_;
};

using AcrobotSwingup = Dmc<Acrobot<false>>;
using AcrobotSwingupSparse = Dmc<Acrobot<true>>;
AIOPOOL_REGISTER_ENV("dmc/acrobot-swingup", AcrobotSwingup, 0);
AIOPOOL_REGISTER_ENV("dmc/acrobot-swingup_sparse", AcrobotSwingupSparse, 0);

}  // namespace aiopool::dmc
