// dmc/hopper-{stand, hop}: dm_control's hopper domain (suite/hopper.py), bit for bit. A reset
// randomizes the joints; the observation adds the feet's touch sensors (np.log1p); the reward
// is standing (torso over foot between 0.6 and 2) times small control (stand) or hopping
// forward faster than 2 (hop).
#pragma once

#include <limits>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <bool kHopping>
class Hopper {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) { return {{"position", 6}, {"velocity", 7}, {"touch", 2}}; }

  Hopper(const Physics& physics, const Config&)
      : torso_(physics.id(mjOBJ_BODY, "torso")),
        foot_(physics.id(mjOBJ_BODY, "foot")),
        speed_(physics.sensor("torso_subtreelinvel")),
        toe_(physics.sensor("touch_toe")),
        heel_(physics.sensor("touch_heel")) {
    if (physics.model()->nq != 7 || physics.model()->nu != 4)
      throw std::invalid_argument("not the hopper model");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    randomize_limited_and_rotational_joints(physics, random);
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    std::memcpy(out, d->qpos + 1, 6 * sizeof(double));
    std::memcpy(out + 6, d->qvel, 7 * sizeof(double));
    out[13] = np_log1p(d->sensordata[toe_]);
    out[14] = np_log1p(d->sensordata[heel_]);
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double height = d->xipos[3 * torso_ + 2] - d->xipos[3 * foot_ + 2];
    const double standing = tolerance(height, kStandHeight, 2.0);
    if (kHopping) {
      const double inf = std::numeric_limits<double>::infinity();
      return standing *
             tolerance(d->sensordata[speed_], kHopSpeed, inf, kHopSpeed / 2, Sigmoid::kLinear, 0.5);
    }
    double controls[4];
    for (int i = 0; i < 4; ++i)
      controls[i] = tolerance(d->ctrl[i], 0.0, 0.0, 1.0, Sigmoid::kQuadratic, 0.0, true);
    const double small_control = (pairwise_sum(controls, 4) / 4.0 + 4) / 5;
    return standing * small_control;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  static constexpr double kStandHeight = 0.6, kHopSpeed = 2.0;
  int torso_, foot_, speed_, toe_, heel_;
};

using HopperStand = Dmc<Hopper<false>>;
using HopperHop = Dmc<Hopper<true>>;
AIOPOOL_REGISTER_ENV("dmc/hopper-stand", HopperStand, 0);
AIOPOOL_REGISTER_ENV("dmc/hopper-hop", HopperHop, 0);

}  // namespace aiopool::dmc
