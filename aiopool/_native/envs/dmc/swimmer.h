// dmc/swimmer-{swimmer6, swimmer15}: dm_control's swimmer domain (suite/swimmer.py), bit for bit;
// dm_control builds the chain of 6 or 15 links. A reset randomizes the joints and draws a target
// (close, within 0.3, one time in five; else within 2); the observation is the joints, the nose
// to the target in the head's frame (numpy's vector-matrix product) and each link's velocities;
// the reward is a long-tail tolerance of the nose's distance to the target.
#pragma once

#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kLinks>
class Swimmer {
 public:
  static constexpr double kTimeLimit = 30.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    return {{"joints", kLinks - 1}, {"to_target", 2}, {"body_velocities", 3 * kLinks}};
  }

  Swimmer(const Physics& physics, const Config&)
      : target_(physics.id(mjOBJ_GEOM, "target")),
        nose_(physics.id(mjOBJ_GEOM, "nose")),
        head_(physics.id(mjOBJ_BODY, "head")),
        light_(physics.id(mjOBJ_LIGHT, "target_light")) {
    if (physics.model()->nq != kLinks + 2 || physics.model()->nsensordata != 12 + 6 * kLinks)
      throw std::invalid_argument("not the swimmer model of " + std::to_string(kLinks) + " links");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    randomize_limited_and_rotational_joints(physics, random);
    const bool close_target = random.random_sample() < .2;
    const double box = close_target ? .3 : 2;
    const double x = random.uniform(-box, box), y = random.uniform(-box, box);
    mjModel* m = physics.model();
    m->geom_pos[3 * target_] = x;
    m->geom_pos[3 * target_ + 1] = y;
    m->light_pos[3 * light_] = x;
    m->light_pos[3 * light_ + 1] = y;
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    std::memcpy(out, d->qpos + 3, sizeof(double) * (kLinks - 1));
    nose_to_target(physics, out + kLinks - 1);
    // sensordata[12:].reshape(-1, 6)[:, [0, 1, 5]].ravel(): x, y velocity and z rotation
    double* velocities = out + kLinks + 1;
    for (int i = 0; 12 + 6 * i < physics.model()->nsensordata; ++i)
      for (int j : {0, 1, 5}) *velocities++ = d->sensordata[12 + 6 * i + j];
  }

  double reward(const Physics& physics) const {
    double to_target[2];
    nose_to_target(physics, to_target);
    const double size = physics.model()->geom_size[3 * target_];
    return tolerance(np_norm(to_target, 2), 0.0, size, 5 * size, Sigmoid::kLongTail);
  }

  bool terminated(const Physics&) const { return false; }

 private:
  // (geom_xpos target - nose).dot(xmat head as 3x3)[:2]
  void nose_to_target(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    double v[3], r[3];
    for (int i = 0; i < 3; ++i) v[i] = d->geom_xpos[3 * target_ + i] - d->geom_xpos[3 * nose_ + i];
    np_vecmat(v, d->xmat + 9 * head_, 3, 3, r);
    out[0] = r[0];
    out[1] = r[1];
  }

  int target_, nose_, head_, light_;
};

using Swimmer6 = Dmc<Swimmer<6>>;
using Swimmer15 = Dmc<Swimmer<15>>;
AIOPOOL_REGISTER_ENV("dmc/swimmer-swimmer6", Swimmer6, 0);
AIOPOOL_REGISTER_ENV("dmc/swimmer-swimmer15", Swimmer15, 0);

}  // namespace aiopool::dmc
