// dmc/fish-{upright, swim}: dm_control's fish domain (suite/fish.py), bit for bit. A reset draws
// the body's orientation (randn(4) normalised) and the fin and tail angles; swim also places the
// target. The observation is the joint angles, the torso's uprightness (xmat zz), the mouth to
// the target in the mouth's frame (swim; numpy's vector-matrix product) and every velocity; the
// reward is being upright (upright), or mostly reaching the target (swim).
#pragma once

#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <bool kSwim>
class Fish {
 public:
  static constexpr double kTimeLimit = 40.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    if (kSwim) return {{"joint_angles", 7}, {"upright", 0}, {"target", 3}, {"velocity", 13}};
    return {{"joint_angles", 7}, {"upright", 0}, {"velocity", 13}};
  }

  Fish(const Physics& physics, const Config&)
      : torso_(physics.id(mjOBJ_BODY, "torso")),
        target_(physics.id(mjOBJ_GEOM, "target")),
        mouth_(physics.id(mjOBJ_GEOM, "mouth")),
        root_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "root")]) {
    const char* joints[7] = {"tail1",          "tail_twist",   "tail2",        "finright_roll",
                             "finright_pitch", "finleft_roll", "finleft_pitch"};
    for (int i = 0; i < 7; ++i) {
      const int j = physics.id(mjOBJ_JOINT, joints[i]);
      qpos_[i] = physics.model()->jnt_qposadr[j];
    }
    if (physics.model()->nv != 13) throw std::invalid_argument("not the fish model");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    double quat[4] = {random.standard_normal(), random.standard_normal(), random.standard_normal(),
                      random.standard_normal()};
    const double norm = np_norm(quat, 4);
    double* qpos = physics.data()->qpos;
    for (int i = 0; i < 4; ++i) qpos[root_ + 3 + i] = quat[i] / norm;
    for (int i = 0; i < 7; ++i) qpos[qpos_[i]] = random.uniform(-.2, .2);
    mjModel* m = physics.model();
    if (kSwim) {
      m->geom_pos[3 * target_] = random.uniform(-.4, .4);
      m->geom_pos[3 * target_ + 1] = random.uniform(-.4, .4);
      m->geom_pos[3 * target_ + 2] = random.uniform(.1, .3);
    } else {
      m->geom_rgba[4 * target_ + 3] = 0;
    }
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    for (int i = 0; i < 7; ++i) out[i] = d->qpos[qpos_[i]];
    out[7] = d->xmat[9 * torso_ + 8];
    double* velocity = out + 8;
    if (kSwim) {
      mouth_to_target(physics, out + 8);
      velocity += 3;
    }
    std::memcpy(velocity, d->qvel, 13 * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const double upright = physics.data()->xmat[9 * torso_ + 8];
    if (!kSwim) return tolerance(upright, 1.0, 1.0, 1.0);
    const double* size = physics.model()->geom_size;
    const double radii = size[3 * mouth_] + size[3 * target_];  // .sum() of two
    double to_target[3];
    mouth_to_target(physics, to_target);
    const double in_target = tolerance(np_norm(to_target, 3), 0.0, radii, 2 * radii);
    const double is_upright = 0.5 * (upright + 1);
    return (7 * in_target + is_upright) / 8;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  // (geom_xpos target - mouth).dot(geom_xmat mouth as 3x3)
  void mouth_to_target(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    double v[3];
    for (int i = 0; i < 3; ++i) v[i] = d->geom_xpos[3 * target_ + i] - d->geom_xpos[3 * mouth_ + i];
    np_vecmat(v, d->geom_xmat + 9 * mouth_, 3, 3, out);
  }

  int torso_, target_, mouth_, root_;
  int qpos_[7] = {};
};

using FishUpright = Dmc<Fish<false>>;
using FishSwim = Dmc<Fish<true>>;
AIOPOOL_REGISTER_ENV("dmc/fish-upright", FishUpright, 0);
AIOPOOL_REGISTER_ENV("dmc/fish-swim", FishSwim, 0);

}  // namespace aiopool::dmc
