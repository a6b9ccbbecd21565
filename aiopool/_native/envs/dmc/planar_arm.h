// The planar arm dm_control's manipulator and stacker domains share (suite/manipulator.py and
// suite/stacker.py have the same Physics): its eight joints, their random angles at a reset, and
// the observation helpers bounded_joint_pos, joint_vel, body_2d_pose and site_distance.
#pragma once

#include <array>
#include <initializer_list>
#include <numbers>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

class PlanarArm {
 public:
  // The tasks' kwarg `fully_observable` (default true), and their observation parts: arm_pos,
  // arm_vel, touch, then the task's `full` parts when fully observable.
  static std::vector<ConfigKey> task_keys() { return {{"fully_observable", ConfigKey::Kind::kBool, 1.0}}; }
  static std::vector<Part> parts(const Config& config, std::initializer_list<Part> full) {
    std::vector<Part> parts = {{"arm_pos", 8, 2}, {"arm_vel", 8}, {"touch", 5}};
    if (config.get_bool("fully_observable")) parts.insert(parts.end(), full);
    return parts;
  }

  static constexpr std::array<const char*, 8> kJoints = {"arm_root", "arm_shoulder", "arm_elbow", "arm_wrist",
                                                         "finger",   "fingertip",    "thumb",     "thumbtip"};

  explicit PlanarArm(const Physics& physics) {
    for (std::size_t j = 0; j < kJoints.size(); ++j) joints_[j] = physics.id(mjOBJ_JOINT, kJoints[j]);
    finger_ = physics.model()->jnt_qposadr[joints_[4]];
    thumb_ = physics.model()->jnt_qposadr[joints_[6]];
  }

  // angles = uniform(lower_limits, upper_limits) (a limited joint's range, else [-pi, pi]),
  // joint after joint; then the finger copies the thumb (a symmetric hand).
  void randomize(Physics& physics, RandomState& random) const {
    const mjModel* m = physics.model();
    double* qpos = physics.data()->qpos;
    for (int j : joints_) {
      const bool limited = m->jnt_limited[j] != 0;
      qpos[m->jnt_qposadr[j]] = random.uniform(limited ? m->jnt_range[2 * j] : -std::numbers::pi,
                                               limited ? m->jnt_range[2 * j + 1] : std::numbers::pi);
    }
    qpos[finger_] = qpos[thumb_];
  }

  // arm_pos (bounded_joint_pos: a (sin, cos) row per joint), then arm_vel.
  double* observe(const Physics& physics, double* out) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    for (int j : joints_) {
      *out++ = np_sin(d->qpos[m->jnt_qposadr[j]]);
      *out++ = np_cos(d->qpos[m->jnt_qposadr[j]]);
    }
    for (int j : joints_) *out++ = d->qvel[m->jnt_dofadr[j]];
    return out;
  }

 private:
  std::array<int, 8> joints_{};
  int finger_ = 0, thumb_ = 0;
};

// body_2d_pose(body): x and z of its position, then (with orientation) qw and qy of its quaternion.
inline double* body_2d_pose(const Physics& physics, int body, double* out, bool orientation = true) {
  const mjData* d = physics.data();
  *out++ = d->xpos[3 * body];
  *out++ = d->xpos[3 * body + 2];
  if (orientation) {
    *out++ = d->xquat[4 * body];
    *out++ = d->xquat[4 * body + 2];
  }
  return out;
}

// site_distance(a, b): np.linalg.norm(np.diff(site_xpos[[b, a]], axis=0)), the norm of a - b.
inline double site_distance(const Physics& physics, int a, int b) {
  const double* x = physics.data()->site_xpos;
  const double diff[3] = {x[3 * a] - x[3 * b], x[3 * a + 1] - x[3 * b + 1], x[3 * a + 2] - x[3 * b + 2]};
  return np_norm(diff, 3);
}

}  // namespace aiopool::dmc
