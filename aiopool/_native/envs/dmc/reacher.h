// dmc/reacher-{easy, hard}: dm_control's reacher domain (suite/reacher.py), bit for bit. A reset
// sets the target's size (0.05 easy, 0.015 hard), randomizes the joints and puts the target at a
// random angle and radius; the reward is 1 while the finger touches the target.
#pragma once

#include <numbers>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <bool kHard>
class Reacher {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    return {{"position", 2}, {"to_target", 2}, {"velocity", 2}};
  }

  Reacher(const Physics& physics, const Config&)
      : target_(physics.id(mjOBJ_GEOM, "target")), finger_(physics.id(mjOBJ_GEOM, "finger")) {}

  void initialize_episode(Physics& physics, RandomState& random) const {
    mjModel* m = physics.model();
    m->geom_size[3 * target_] = kHard ? .015 : .05;
    randomize_limited_and_rotational_joints(physics, random);
    const double angle = random.uniform(0, 2 * std::numbers::pi);
    const double radius = random.uniform(.05, .20);
    m->geom_pos[3 * target_] = radius * np_sin(angle);
    m->geom_pos[3 * target_ + 1] = radius * np_cos(angle);
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    std::memcpy(out, d->qpos, 2 * sizeof(double));
    out[2] = d->geom_xpos[3 * target_] - d->geom_xpos[3 * finger_];
    out[3] = d->geom_xpos[3 * target_ + 1] - d->geom_xpos[3 * finger_ + 1];
    std::memcpy(out + 4, d->qvel, 2 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    const double radii = m->geom_size[3 * target_] + m->geom_size[3 * finger_];  // .sum() of two
    const double to_target[2] = {d->geom_xpos[3 * target_] - d->geom_xpos[3 * finger_],
                                 d->geom_xpos[3 * target_ + 1] - d->geom_xpos[3 * finger_ + 1]};
    return tolerance(np_norm(to_target, 2), 0.0, radii);
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int target_, finger_;
};

using ReacherEasy = Dmc<Reacher<false>>;
using ReacherHard = Dmc<Reacher<true>>;
AIOPOOL_REGISTER_ENV("dmc/reacher-easy", ReacherEasy, 0);
AIOPOOL_REGISTER_ENV("dmc/reacher-hard", ReacherHard, 0);

}  // namespace aiopool::dmc
