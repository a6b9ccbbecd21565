// dmc/ball_in_cup-catch: dm_control's ball_in_cup domain (suite/ball_in_cup.py), bit for bit. A
// reset draws the ball's position until it penetrates nothing (an actuation-free forward after
// each draw); the reward is 1 while the ball is inside the cup.
#pragma once

#include <cmath>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

class BallInCup {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"position", 4}, {"velocity", 4}}; }

  BallInCup(const Physics& physics, const Config&)
      : ball_x_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "ball_x")]),
        ball_z_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "ball_z")]),
        target_(physics.id(mjOBJ_SITE, "target")),
        ball_body_(physics.id(mjOBJ_BODY, "ball")),
        ball_geom_(physics.id(mjOBJ_GEOM, "ball")) {}

  void initialize_episode(Physics& physics, RandomState& random) const {
    double* qpos = physics.data()->qpos;
    do {
      qpos[ball_x_] = random.uniform(-.2, .2);
      qpos[ball_z_] = random.uniform(.2, .5);
      physics.forward_without_actuation();
    } while (physics.data()->ncon > 0);
  }

  void observe(const Physics& physics, double* out) const {
    std::memcpy(out, physics.data()->qpos, 4 * sizeof(double));
    std::memcpy(out + 4, physics.data()->qvel, 4 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    const double ball_size = m->geom_size[3 * ball_geom_];
    bool inside = true;
    for (int axis : {0, 2}) {  // x and z
      const double to_target = std::fabs(d->site_xpos[3 * target_ + axis] - d->xpos[3 * ball_body_ + axis]);
      inside = inside && to_target < m->site_size[3 * target_ + axis] - ball_size;
    }
    return inside ? 1.0 : 0.0;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int ball_x_, ball_z_, target_, ball_body_, ball_geom_;
};

using BallInCupCatch = Dmc<BallInCup>;
AIOPOOL_REGISTER_ENV("dmc/ball_in_cup-catch", BallInCupCatch, 0);

}  // namespace aiopool::dmc
