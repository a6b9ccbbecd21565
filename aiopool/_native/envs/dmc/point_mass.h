// dmc/point_mass-{easy, hard}: dm_control's point_mass domain (suite/point_mass.py), bit for
// bit. A reset randomizes the joints; `hard` also draws two actuation directions that are not
// too parallel (the model's tendon wrap parameters, per env and episode). The reward is being
// near the target times small control.
#pragma once

#include <cmath>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <bool kRandomizeGains>
class PointMass {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"position", 2}, {"velocity", 2}}; }

  PointMass(const Physics& physics, const Config&)
      : target_(physics.id(mjOBJ_GEOM, "target")), mass_(physics.id(mjOBJ_GEOM, "pointmass")) {}

  void initialize_episode(Physics& physics, RandomState& random) const {
    randomize_limited_and_rotational_joints(physics, random);
    if (!kRandomizeGains) return;
    auto direction = [&random](double* dir) {  // randn(2), normalised
      dir[0] = random.standard_normal();
      dir[1] = random.standard_normal();
      const double norm = np_norm(dir, 2);
      dir[0] /= norm;
      dir[1] /= norm;
    };
    double dir1[2], dir2[2];
    direction(dir1);
    do direction(dir2);
    while (std::fabs(np_dot(dir1, dir2, 2)) > 0.9);
    double* wrap = physics.model()->wrap_prm;
    wrap[0] = dir1[0];
    wrap[1] = dir1[1];
    wrap[2] = dir2[0];
    wrap[3] = dir2[1];
  }

  void observe(const Physics& physics, double* out) const {
    std::memcpy(out, physics.data()->qpos, 2 * sizeof(double));
    std::memcpy(out + 2, physics.data()->qvel, 2 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    double to_target[3];
    for (int i = 0; i < 3; ++i) to_target[i] = d->geom_xpos[3 * target_ + i] - d->geom_xpos[3 * mass_ + i];
    const double size = m->geom_size[3 * target_];
    const double near_target = tolerance(np_norm(to_target, 3), 0.0, size, size);
    double controls[2];  // tolerance(control, margin=1, value_at_margin=0, 'quadratic').mean()
    for (int i = 0; i < 2; ++i)
      controls[i] = tolerance(d->ctrl[i], 0.0, 0.0, 1.0, Sigmoid::kQuadratic, 0.0, true);
    const double control_reward = pairwise_sum(controls, 2) / 2.0;
    const double small_control = (control_reward + 4) / 5;
    return near_target * small_control;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int target_, mass_;
};

using PointMassEasy = Dmc<PointMass<false>>;
using PointMassHard = Dmc<PointMass<true>>;
AIOPOOL_REGISTER_ENV("dmc/point_mass-easy", PointMassEasy, 0);
AIOPOOL_REGISTER_ENV("dmc/point_mass-hard", PointMassHard, 0);

}  // namespace aiopool::dmc
