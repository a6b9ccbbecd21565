// dmc/walker-{stand, walk, run}: dm_control's walker domain (suite/walker.py), bit for bit. A
// reset randomizes the joints (randomize_limited_and_rotational_joints); the observation is each
// body's orientation (xmat xx, xz), the torso's height and every velocity; the reward is standing
// (torso height over 1.2) and upright, times moving faster than 1 (walk) or 8 (run).
#pragma once

#include <limits>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kMoveSpeed>
class Walker {
 public:
  static constexpr double kTimeLimit = 25.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    return {{"orientations", 14}, {"height", 0}, {"velocity", 9}};
  }

  Walker(const Physics& physics, const Config&)
      : torso_(physics.id(mjOBJ_BODY, "torso")), speed_(physics.sensor("torso_subtreelinvel")) {
    if (physics.model()->nbody != 8 || physics.model()->nv != 9)
      throw std::invalid_argument("not the walker model");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    randomize_limited_and_rotational_joints(physics, random);
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    for (int b = 1; b < 8; ++b) {  // xmat[1:, ['xx', 'xz']].ravel()
      out[2 * (b - 1)] = d->xmat[9 * b];
      out[2 * (b - 1) + 1] = d->xmat[9 * b + 2];
    }
    out[14] = d->xpos[3 * torso_ + 2];
    std::memcpy(out + 15, d->qvel, 9 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double inf = std::numeric_limits<double>::infinity();
    const double standing = tolerance(d->xpos[3 * torso_ + 2], kStandHeight, inf, kStandHeight / 2);
    const double upright = (1 + d->xmat[9 * torso_ + 8]) / 2;
    const double stand_reward = (3 * standing + upright) / 4;
    if (kMoveSpeed == 0) return stand_reward;
    const double move_reward =
        tolerance(d->sensordata[speed_], kMoveSpeed, inf, kMoveSpeed / 2.0, Sigmoid::kLinear, 0.5);
    return stand_reward * (5 * move_reward + 1) / 6;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  static constexpr double kStandHeight = 1.2;
  int torso_, speed_;
};

using WalkerStand = Dmc<Walker<0>>;
using WalkerWalk = Dmc<Walker<1>>;
using WalkerRun = Dmc<Walker<8>>;
AIOPOOL_REGISTER_ENV("dmc/walker-stand", WalkerStand, 0);
AIOPOOL_REGISTER_ENV("dmc/walker-walk", WalkerWalk, 0);
AIOPOOL_REGISTER_ENV("dmc/walker-run", WalkerRun, 0);

}  // namespace aiopool::dmc
