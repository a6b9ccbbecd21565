// dmc/cheetah-run: dm_control's cheetah domain (suite/cheetah.py), bit for bit. A reset draws
// each limited joint uniformly in its range and lets the model settle for 200 physics steps
// (time set back to 0); the reward is tolerance(speed, (10, inf), margin=10, linear) of the
// torso's subtree linear velocity along x.
#pragma once

#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

class Cheetah {
 public:
  static constexpr double kTimeLimit = 10.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"position", 8}, {"velocity", 9}}; }

  Cheetah(const Physics& physics, const Config&) : speed_(physics.sensor("torso_subtreelinvel")) {
    if (physics.model()->nq != 9 || physics.model()->nv != 9)
      throw std::invalid_argument("not the cheetah model");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    const mjModel* m = physics.model();
    mjData* d = physics.data();
    for (int j = 0; j < m->njnt; ++j)  // nq == njnt: joint j is qpos[j]
      if (m->jnt_limited[j]) d->qpos[j] = random.uniform(m->jnt_range[2 * j], m->jnt_range[2 * j + 1]);
    physics.step(200);
    d->time = 0.0;
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    std::memcpy(out, d->qpos + 1, 8 * sizeof(double));
    std::memcpy(out + 8, d->qvel, 9 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const double inf = std::numeric_limits<double>::infinity();
    return tolerance(physics.data()->sensordata[speed_], kRunSpeed, inf, kRunSpeed, Sigmoid::kLinear, 0.0);
  }

  bool terminated(const Physics&) const { return false; }

 private:
  static constexpr double kRunSpeed = 10.0;
  int speed_;
};

AIOPOOL_REGISTER_ENV("dmc/cheetah-run", Dmc<Cheetah>, 0);

}  // namespace aiopool::dmc
