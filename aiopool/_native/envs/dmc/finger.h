// dmc/finger-{spin, turn_easy, turn_hard}: dm_control's finger domain (suite/finger.py), bit for
// bit. A reset randomizes the joints until nothing touches (an actuation-free forward after each
// try, at most 1,000); spin damps the spinner's hinge, turn places a target on the spinner's
// circle (radius 0.07 easy, 0.03 hard). The observation comes from the model's sensors; the
// reward is 1 while the spinner turns faster than 15 rad/s backwards (spin) or while its tip is
// in the target (turn).
#pragma once

#include <numbers>
#include <stdexcept>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kTask>  // 0 spin, 1 turn_easy, 2 turn_hard
class Finger {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    if (kTask == 0) return {{"position", 4}, {"velocity", 3}, {"touch", 2}};
    return {{"position", 4}, {"velocity", 3}, {"touch", 2}, {"target_position", 2}, {"dist_to_target", 0}};
  }

  Finger(const Physics& physics, const Config&)
      : proximal_(physics.sensor("proximal")),
        distal_(physics.sensor("distal")),
        proximal_velocity_(physics.sensor("proximal_velocity")),
        distal_velocity_(physics.sensor("distal_velocity")),
        hinge_velocity_(physics.sensor("hinge_velocity")),
        tip_(physics.sensor("tip")),
        spinner_(physics.sensor("spinner")),
        target_sensor_(physics.sensor("target")),
        touchtop_(physics.sensor("touchtop")),
        touchbottom_(physics.sensor("touchbottom")),
        hinge_(physics.id(mjOBJ_JOINT, "hinge")),
        target_(physics.id(mjOBJ_SITE, "target")),
        tip_site_(physics.id(mjOBJ_SITE, "tip")),
        cap1_(physics.id(mjOBJ_GEOM, "cap1")) {}

  void initialize_episode(Physics& physics, RandomState& random) const {
    mjModel* m = physics.model();
    if (kTask == 0) {
      m->site_rgba[4 * target_ + 3] = 0;
      m->site_rgba[4 * tip_site_ + 3] = 0;
      m->dof_damping[m->jnt_dofadr[hinge_]] = .03;
    } else {
      const double angle = random.uniform(-std::numbers::pi, std::numbers::pi);
      const double* anchor = physics.data()->xanchor + 3 * hinge_;
      const double* size = m->geom_size + 3 * cap1_;
      const double radius = (size[0] + size[1]) + size[2];  // .sum()
      m->site_pos[3 * target_] = anchor[0] + radius * np_sin(angle);
      m->site_pos[3 * target_ + 2] = anchor[2] + radius * np_cos(angle);
      m->site_size[3 * target_] = kTask == 1 ? 0.07 : 0.03;
    }
    for (int attempt = 0; attempt < 1000; ++attempt) {  // _set_random_joint_angles
      randomize_limited_and_rotational_joints(physics, random);
      physics.forward_without_actuation();
      if (physics.data()->ncon == 0) return;
    }
    throw std::runtime_error("Could not find a collision-free state after 1000 attempts");
  }

  void observe(const Physics& physics, double* out) const {
    const double* s = physics.data()->sensordata;
    out[0] = s[proximal_];
    out[1] = s[distal_];
    out[2] = s[tip_] - s[spinner_];  // tip_position: x, z
    out[3] = s[tip_ + 2] - s[spinner_ + 2];
    out[4] = s[proximal_velocity_];
    out[5] = s[distal_velocity_];
    out[6] = s[hinge_velocity_];
    out[7] = np_log1p(s[touchtop_]);
    out[8] = np_log1p(s[touchbottom_]);
    if (kTask != 0) {
      out[9] = s[target_sensor_] - s[spinner_];  // target_position: x, z
      out[10] = s[target_sensor_ + 2] - s[spinner_ + 2];
      out[11] = dist_to_target(physics);
    }
  }

  double reward(const Physics& physics) const {
    if (kTask == 0) return physics.data()->sensordata[hinge_velocity_] <= -15.0 ? 1.0 : 0.0;
    return dist_to_target(physics) <= 0 ? 1.0 : 0.0;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  // np.linalg.norm(target_position - tip_position) - site_size['target', 0]
  double dist_to_target(const Physics& physics) const {
    const double* s = physics.data()->sensordata;
    const double to_target[2] = {(s[target_sensor_] - s[spinner_]) - (s[tip_] - s[spinner_]),
                                 (s[target_sensor_ + 2] - s[spinner_ + 2]) - (s[tip_ + 2] - s[spinner_ + 2])};
    return np_norm(to_target, 2) - physics.model()->site_size[3 * target_];
  }

  int proximal_, distal_, proximal_velocity_, distal_velocity_, hinge_velocity_, tip_, spinner_,
      target_sensor_;
  int touchtop_, touchbottom_, hinge_, target_, tip_site_, cap1_;
};

using FingerSpin = Dmc<Finger<0>>;
using FingerTurnEasy = Dmc<Finger<1>>;
using FingerTurnHard = Dmc<Finger<2>>;
AIOPOOL_REGISTER_ENV("dmc/finger-spin", FingerSpin, 0);
AIOPOOL_REGISTER_ENV("dmc/finger-turn_easy", FingerTurnEasy, 0);
AIOPOOL_REGISTER_ENV("dmc/finger-turn_hard", FingerTurnHard, 0);

}  // namespace aiopool::dmc
