// dmc/manipulator-{bring_ball, bring_peg, insert_ball, insert_peg}: dm_control's planar
// manipulator domain (suite/manipulator.py), bit for bit: the planar arm (planar_arm.h) brings a
// ball or a peg to a target, or into a cup or a slot; dm_control removes the other props from the
// model, so each task has its own. A reset draws the arm's angles, the target's x, z and angle
// (the receptacle's pose too, for insert), then where the object starts: in the hand (p .1, at
// the grasp site, along the hand), in the target (p .1) or anywhere (p .8, with a random x
// velocity), as RandomState.choice draws it; and draws again until nothing touches. The target
// moves in the env's own model. The reward: the ball near its target (tolerance, bounds
// (0, .01), margin .02), or for the peg max(bringing, grasping / 3), each the mean of two such
// closeness terms. `fully_observable` (default true) adds the hand's, object's and target's poses
// and the object's velocities to the arm's joints and touch sensors.
#pragma once

#include <algorithm>
#include <array>
#include <numbers>
#include <string>
#include <vector>

#include "dmc.h"
#include "planar_arm.h"

namespace aiopool::dmc {

template <bool kPeg, bool kInsert>
class Manipulator {
 public:
  static constexpr double kTimeLimit = 10.0;
  static std::vector<ConfigKey> task_keys() { return PlanarArm::task_keys(); }
  static std::vector<Part> parts(const Config& config) {
    return PlanarArm::parts(config,
                            {{"hand_pos", 4}, {"object_pos", 4}, {"object_vel", 3}, {"target_pos", 4}});
  }

  Manipulator(const Physics& physics, const Config& config)
      : arm_(physics),
        fully_observable_(config.get_bool("fully_observable")),
        hand_(physics.id(mjOBJ_BODY, "hand")),
        object_(physics.id(mjOBJ_BODY, kPeg ? "peg" : "ball")),
        target_(physics.id(mjOBJ_BODY, kPeg ? "target_peg" : "target_ball")),
        receptacle_(kInsert ? physics.id(mjOBJ_BODY, kPeg ? "slot" : "cup") : -1),
        grasp_(physics.id(mjOBJ_SITE, "grasp")) {
    const char* object = kPeg ? "peg" : "ball";
    for (int k = 0; k < 3; ++k)  // _object_joints: x, z, y
      object_joints_[k] = physics.id(mjOBJ_JOINT, (std::string(object) + "_" + "xzy"[k]).c_str());
    int i = 0;
    for (const char* name :
         {"palm_touch", "finger_touch", "thumb_touch", "fingertip_touch", "thumbtip_touch"})
      touch_[i++] = physics.sensor(name);
    if constexpr (kPeg) {
      for (int s = 0; const char* name : {"peg_grasp", "grasp", "peg_pinch", "pinch", "peg", "target_peg",
                                          "target_peg_tip", "peg_tip"})
        peg_sites_[s++] = physics.id(mjOBJ_SITE, name);
    } else {
      peg_sites_[0] = physics.id(mjOBJ_SITE, "ball");
      peg_sites_[1] = physics.id(mjOBJ_SITE, "target_ball");
    }
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    mjModel* m = physics.model();
    mjData* d = physics.data();
    const double pi = std::numbers::pi;
    auto place = [m](int body, double x, double z, double angle) {
      m->body_pos[3 * body] = x;
      m->body_pos[3 * body + 2] = z;
      m->body_quat[4 * body] = np_cos(angle / 2);
      m->body_quat[4 * body + 2] = np_sin(angle / 2);
    };
    do {
      arm_.randomize(physics, random);
      const double target_x = random.uniform(-.4, .4);
      const double target_z = random.uniform(.1, .4);
      double target_angle;
      if constexpr (kInsert) {
        target_angle = random.uniform(-pi / 3, pi / 3);
        place(receptacle_, target_x, target_z, target_angle);
      } else {
        target_angle = random.uniform(-pi, pi);
      }
      place(target_, target_x, target_z, target_angle);
      double x, z, angle;
      switch (choose_init(random)) {
        case 1:  // in_target
          x = target_x, z = target_z, angle = target_angle;
          break;
        case 0: {  // in_hand
          physics.forward_without_actuation();
          x = d->site_xpos[3 * grasp_];
          z = d->site_xpos[3 * grasp_ + 2];
          const double* xmat = d->site_xmat + 9 * grasp_;  // ['xx', 'zx']
          angle = pi - np_arctan2(xmat[6], xmat[0]);
          break;
        }
        default:  // uniform
          x = random.uniform(-.5, .5);
          z = random.uniform(0, .7);
          angle = random.uniform(0, 2 * pi);
          d->qvel[m->jnt_dofadr[object_joints_[0]]] = random.uniform(-5, 5);
      }
      d->qpos[m->jnt_qposadr[object_joints_[0]]] = x;
      d->qpos[m->jnt_qposadr[object_joints_[1]]] = z;
      d->qpos[m->jnt_qposadr[object_joints_[2]]] = angle;
      physics.forward_without_actuation();
    } while (d->ncon > 0);
  }

  void observe(const Physics& physics, double* out) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    out = arm_.observe(physics, out);
    for (int adr : touch_) *out++ = np_log1p(d->sensordata[adr]);
    if (!fully_observable_) return;
    out = body_2d_pose(physics, hand_, out);
    out = body_2d_pose(physics, object_, out);
    for (int j : object_joints_) *out++ = d->qvel[m->jnt_dofadr[j]];
    body_2d_pose(physics, target_, out);
  }

  double reward(const Physics& physics) const {
    const auto close = [&](int a, int b) { return tolerance(site_distance(physics, a, b), 0, .01, .02); };
    if constexpr (!kPeg) {
      return close(peg_sites_[0], peg_sites_[1]);
    } else {
      const double grasping = (close(peg_sites_[0], peg_sites_[1]) + close(peg_sites_[2], peg_sites_[3])) / 2;
      const double bringing = (close(peg_sites_[4], peg_sites_[5]) + close(peg_sites_[6], peg_sites_[7])) / 2;
      return std::max(bringing, grasping / 3);
    }
  }

  bool terminated(const Physics&) const { return false; }

 private:
  // choice(['in_hand', 'in_target', 'uniform'], p=[.1, .1, 1 - .1 - .1]): the cdf (cumsum,
  // divided by its last element) searched right of one random_sample().
  static int choose_init(RandomState& random) {
    const double p[3] = {.1, .1, 1 - .1 - .1};
    double cdf[3] = {p[0], p[0] + p[1], p[0] + p[1] + p[2]};
    for (double& c : cdf) c /= p[0] + p[1] + p[2];
    const double u = random.random_sample();
    return static_cast<int>(std::upper_bound(cdf, cdf + 3, u) - cdf);
  }

  PlanarArm arm_;
  bool fully_observable_;
  int hand_, object_, target_, receptacle_, grasp_;
  std::array<int, 3> object_joints_{};
  std::array<int, 5> touch_{};
  std::array<int, 8> peg_sites_{};  // the reward's site pairs
};

using ManipulatorBringBall = Dmc<Manipulator<false, false>>;
using ManipulatorBringPeg = Dmc<Manipulator<true, false>>;
using ManipulatorInsertBall = Dmc<Manipulator<false, true>>;
using ManipulatorInsertPeg = Dmc<Manipulator<true, true>>;
AIOPOOL_REGISTER_ENV("dmc/manipulator-bring_ball", ManipulatorBringBall, 0);
AIOPOOL_REGISTER_ENV("dmc/manipulator-bring_peg", ManipulatorBringPeg, 0);
AIOPOOL_REGISTER_ENV("dmc/manipulator-insert_ball", ManipulatorInsertBall, 0);
AIOPOOL_REGISTER_ENV("dmc/manipulator-insert_peg", ManipulatorInsertPeg, 0);

}  // namespace aiopool::dmc
