// dmc/stacker-{stack_2, stack_4}: dm_control's planar stacker domain (suite/stacker.py), bit for
// bit: an 8-joint arm with a two-finger hand and 2 (or 4) boxes; dm_control removes the unused
// boxes from the model, so each task has its own. A reset draws the arm's angles (each joint
// uniform in its range, [-pi, pi] if unlimited; the finger copies the thumb), the target's
// height (2 randint(n) + 1 box sizes) and x, each box's x, z and angle, and draws again until
// nothing touches. The target moves in the env's own model. The reward is
// tolerance(the nearest box's distance to the target, margin 2 box sizes) times
// tolerance(the hand's distance to the target, bounds (.1, inf), margin .01). `fully_observable`
// (default true) adds the hand's, boxes' and target's poses and the boxes' velocities to the arm's
// joints and touch sensors.
#pragma once

#include <algorithm>
#include <array>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "dmc.h"
#include "planar_arm.h"

namespace aiopool::dmc {

template <int kBoxes>
class Stacker {
 public:
  static constexpr double kTimeLimit = 10.0;
  static std::vector<ConfigKey> task_keys() { return PlanarArm::task_keys(); }
  static std::vector<Part> parts(const Config& config) {
    return PlanarArm::parts(
        config, {{"hand_pos", 4}, {"box_pos", kBoxes, 4}, {"box_vel", 3 * kBoxes}, {"target_pos", 2}});
  }

  Stacker(const Physics& physics, const Config& config)
      : arm_(physics),
        fully_observable_(config.get_bool("fully_observable")),
        hand_(physics.id(mjOBJ_BODY, "hand")),
        target_(physics.id(mjOBJ_BODY, "target")),
        target_geom_(physics.id(mjOBJ_GEOM, "target")),
        target_site_(physics.id(mjOBJ_SITE, "target")),
        grasp_(physics.id(mjOBJ_SITE, "grasp")) {
    if (physics.model()->nsensordata != 5) throw std::invalid_argument("not the stacker model");
    for (int b = 0; b < kBoxes; ++b) {
      const std::string name = "box" + std::to_string(b);
      boxes_[b] = physics.id(mjOBJ_BODY, name.c_str());
      box_sites_[b] = physics.id(mjOBJ_SITE, name.c_str());
      for (int k = 0; k < 3; ++k)  // box<b>_x, _y, _z
        box_joints_[3 * b + k] = physics.id(mjOBJ_JOINT, (name + "_" + "xyz"[k]).c_str());
    }
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    mjModel* m = physics.model();
    double* qpos = physics.data()->qpos;
    do {
      arm_.randomize(physics, random);
      const double target_height = static_cast<double>(2 * random.randint(kBoxes) + 1);
      const double box_size = m->geom_size[3 * target_geom_];
      m->body_pos[3 * target_ + 2] = box_size * target_height;
      m->body_pos[3 * target_] = random.uniform(-.37, .37);
      for (int b = 0; b < kBoxes; ++b) {  // x, then z, then the angle (y)
        qpos[m->jnt_qposadr[box_joints_[3 * b]]] = random.uniform(.1, .3);
        qpos[m->jnt_qposadr[box_joints_[3 * b + 2]]] = random.uniform(0, .7);
        qpos[m->jnt_qposadr[box_joints_[3 * b + 1]]] = random.uniform(0, 2 * std::numbers::pi);
      }
      physics.forward_without_actuation();
    } while (physics.data()->ncon > 0);
  }

  void observe(const Physics& physics, double* out) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    out = arm_.observe(physics, out);
    for (int i = 0; i < m->nsensordata; ++i) *out++ = np_log1p(d->sensordata[i]);  // touch
    if (!fully_observable_) return;
    out = body_2d_pose(physics, hand_, out);
    for (int body : boxes_) out = body_2d_pose(physics, body, out);
    for (int j : box_joints_) *out++ = d->qvel[m->jnt_dofadr[j]];
    body_2d_pose(physics, target_, out, false);
  }

  double reward(const Physics& physics) const {
    const double box_size = physics.model()->geom_size[3 * target_geom_];
    double nearest = std::numeric_limits<double>::infinity();
    for (int site : box_sites_) nearest = std::min(nearest, site_distance(physics, site, target_site_));
    const double box_is_close = tolerance(nearest, 0, 0, 2 * box_size);
    const double hand_is_far = tolerance(site_distance(physics, grasp_, target_site_), .1,
                                         std::numeric_limits<double>::infinity(), .01);
    return box_is_close * hand_is_far;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  PlanarArm arm_;
  bool fully_observable_;
  int hand_, target_, target_geom_, target_site_, grasp_;
  std::array<int, kBoxes> boxes_{}, box_sites_{};
  std::array<int, 3 * kBoxes> box_joints_{};
};

using StackerStack2 = Dmc<Stacker<2>>;
using StackerStack4 = Dmc<Stacker<4>>;
AIOPOOL_REGISTER_ENV("dmc/stacker-stack_2", StackerStack2, 0);
AIOPOOL_REGISTER_ENV("dmc/stacker-stack_4", StackerStack4, 0);

}  // namespace aiopool::dmc
