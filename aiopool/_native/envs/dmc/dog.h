// dmc/dog-{stand, walk, trot, run, fetch}: dm_control's dog domain (suite/dog.py), bit for bit:
// a 38-muscle dog (activation actuators) on a floor sized to the task's speed (fetch: with a
// ball, a target and walls). A reset is physics.reset(), then the task keeps 0.9 of the
// torso's and pelvis's heights and the body's weight, turns the dog to a random heading, draws
// its root's x, y and yaw velocities (2 randn each) and each actuator's activation uniformly in
// its control range; fetch then throws the ball from 0.75 of the floor's half-size towards the
// dog. The reward is the product of factors: torso and pelvis heights, the skull's, torso's and
// pelvis's uprightness, the feet's touch against the body's weight, and a forward speed between
// 1 (walk), 3 (trot) or 9 (run) and twice that, or for fetch the ball near the mouth and the
// ball near the target (reciprocal sigmoids).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kSpeed, bool kFetch = false>  // kSpeed 0: stand (or fetch)
class Dog {
 public:
  static constexpr double kTimeLimit = 15.0;
  static constexpr int kHinges = 73, kNa = 38;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    std::vector<Part> parts = {
        {"joint_angles", kHinges}, {"joint_velocites", kHinges}, {"torso_pelvis_height", 2},
        {"z_projection", 9},       {"torso_com_velocity", 3},    {"inertial_sensors", 9},
        {"foot_forces", 12},       {"touch_sensors", 4},         {"actuator_state", kNa}};
    if (kFetch) parts.insert(parts.end(), {{"ball_state", 6}, {"target_position", 3}});
    return parts;
  }

  Dog(const Physics& physics, const Config&)
      : torso_(physics.id(mjOBJ_BODY, "torso")),
        pelvis_(physics.id(mjOBJ_BODY, "pelvis")),
        skull_(physics.id(mjOBJ_BODY, "skull")),
        root_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "root")]),
        torso_linvel_(physics.sensor("torso_linvel")),
        inertial_{physics.sensor("accelerometer"), physics.sensor("velocimeter"), physics.sensor("gyro")},
        feet_{physics.sensor("foot_L"), physics.sensor("foot_R"), physics.sensor("hand_L"),
              physics.sensor("hand_R")},
        touch_{physics.sensor("palm_L"), physics.sensor("palm_R"), physics.sensor("sole_L"),
               physics.sensor("sole_R")},
        floor_(physics.id(mjOBJ_GEOM, "floor")),
        min_upright_(np_cos(30 * (std::numbers::pi / 180))) {  // np.cos(np.deg2rad(30))
    const mjModel* m = physics.model();
    for (int j = 0; j < m->njnt; ++j) {
      if (m->jnt_type[j] != mjJNT_HINGE) continue;
      hinge_qpos_.push_back(m->jnt_qposadr[j]);
      hinge_dof_.push_back(m->jnt_dofadr[j]);
    }
    if (hinge_qpos_.size() != kHinges || m->na != kNa || m->nu != kNa)
      throw std::invalid_argument("not the dog model");
    if constexpr (kFetch) {
      head_ = physics.id(mjOBJ_SITE, "head");
      ball_ = physics.id(mjOBJ_GEOM, "ball");
      target_ = physics.id(mjOBJ_GEOM, "target");
      upper_bite_ = physics.id(mjOBJ_SITE, "upper_bite");
      lower_bite_ = physics.id(mjOBJ_SITE, "lower_bite");
      ball_root_ = physics.id(mjOBJ_JOINT, "ball_root");
    }
  }

  void initialize_episode(Physics& physics, RandomState& random) {
    const mjModel* m = physics.model();
    mjData* d = physics.data();
    physics.reset();
    stand_height_[0] = d->xpos[3 * torso_ + 2] * 0.9;
    stand_height_[1] = d->xpos[3 * pelvis_ + 2] * 0.9;
    body_weight_ = -m->opt.gravity[2] * m->body_subtreemass[torso_];
    const double azimuth = random.uniform(0, 2 * std::numbers::pi);
    d->qpos[root_ + 3] = np_cos(azimuth / 2);
    d->qpos[root_ + 4] = 0;
    d->qpos[root_ + 5] = 0;
    d->qpos[root_ + 6] = np_sin(azimuth / 2);
    for (int v : {0, 1, 5}) d->qvel[v] = 2 * random.standard_normal();
    for (int a = 0; a < m->nu; ++a)
      d->act[a] = random.uniform(m->actuator_ctrlrange[2 * a], m->actuator_ctrlrange[2 * a + 1]);
    if constexpr (kFetch) {
      const double radius = 0.75 * m->geom_size[3 * floor_];
      const double ball_azimuth = random.uniform(0, 2 * std::numbers::pi);
      double* ball_qpos = d->qpos + m->jnt_qposadr[ball_root_];
      ball_qpos[0] = radius * np_sin(ball_azimuth);
      ball_qpos[1] = radius * np_cos(ball_azimuth);
      ball_qpos[2] = 0.05;
      const double vertical_height = random.uniform(0, 3);
      const double gravity = -m->opt.gravity[2];
      const double vertical_velocity = std::sqrt(2 * gravity * vertical_height);
      const double horizontal_speed = random.uniform(0, 5);
      const double dx = -np_sin(ball_azimuth) + 0.05 * random.standard_normal();
      const double dy = -np_cos(ball_azimuth) + 0.05 * random.standard_normal();
      double* ball_qvel = d->qvel + m->jnt_dofadr[ball_root_];
      ball_qvel[0] = horizontal_speed * dx;
      ball_qvel[1] = horizontal_speed * dy;
      ball_qvel[2] = vertical_velocity;
    }
  }

  void observe(const Physics& physics, double* out) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    const double* s = d->sensordata;
    for (int q : hinge_qpos_) *out++ = d->qpos[q];
    for (int v : hinge_dof_) *out++ = d->qvel[v];
    *out++ = d->xpos[3 * torso_ + 2];
    *out++ = d->xpos[3 * pelvis_ + 2];
    for (int body : {skull_, torso_, pelvis_})
      for (int k = 6; k < 9; ++k) *out++ = d->xmat[9 * body + k];  // zx, zy, zz
    torso_com_velocity(physics, out);
    out += 3;
    for (int adr : inertial_) out = std::copy_n(s + adr, 3, out);
    for (int adr : feet_) out = std::copy_n(s + adr, 3, out);
    for (int adr : touch_) *out++ = s[adr];
    out = std::copy_n(d->act, m->na, out);
    if constexpr (kFetch) {
      const double* head_frame = d->site_xmat + 9 * head_;
      const double* head_pos = d->site_xpos + 3 * head_;
      const double* ball_pos = d->geom_xpos + 3 * ball_;
      const double head_to_ball[3] = {ball_pos[0] - head_pos[0], ball_pos[1] - head_pos[1],
                                      ball_pos[2] - head_pos[2]};
      double head_vel[6], ball_vel[6];  // (angular, linear), in the world's frame
      mj_objectVelocity(m, d, mjOBJ_SITE, head_, head_vel, 0);
      mj_objectVelocity(m, d, mjOBJ_GEOM, ball_, ball_vel, 0);
      const double relative_vel[3] = {ball_vel[3] - head_vel[3], ball_vel[4] - head_vel[4],
                                      ball_vel[5] - head_vel[5]};
      np_vecmat(head_to_ball, head_frame, 3, 3, out);
      np_vecmat(relative_vel, head_frame, 3, 3, out + 3);
      const double* target_pos = d->geom_xpos + 3 * target_;
      const double head_to_target[3] = {target_pos[0] - head_pos[0], target_pos[1] - head_pos[1],
                                        target_pos[2] - head_pos[2]};
      np_vecmat(head_to_target, head_frame, 3, 3, out + 6);
    }
  }

  // np.prod of the reward factors: a product from the first factor on.
  double reward(const Physics& physics) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    const double inf = std::numeric_limits<double>::infinity();
    double r = 1.0;
    r *= tolerance(d->xpos[3 * torso_ + 2], stand_height_[0], inf, stand_height_[0]);
    r *= tolerance(d->xpos[3 * pelvis_ + 2], stand_height_[1], inf, stand_height_[1]);
    for (int body : {skull_, torso_, pelvis_})
      r *= tolerance(d->xmat[9 * body + 8], min_upright_, inf, min_upright_ + 1, Sigmoid::kLinear, 0, true);
    double touch[4];
    for (int i = 0; i < 4; ++i) touch[i] = d->sensordata[touch_[i]];
    r *= tolerance(pairwise_sum(touch, 4), body_weight_, inf, body_weight_, Sigmoid::kLinear, 0.9);
    if constexpr (kSpeed > 0) {
      double velocity[3];
      torso_com_velocity(physics, velocity);
      const double forward = tolerance(velocity[0], kSpeed, 2 * kSpeed,
                                       std::max(1.0, static_cast<double>(kSpeed)), Sigmoid::kLinear, 0);
      r *= (4 * forward + 1) / 5;
    }
    if constexpr (kFetch) {
      const double* ball = d->geom_xpos + 3 * ball_;
      auto distance = [ball](const double* p) {
        const double v[3] = {ball[0] - p[0], ball[1] - p[1], ball[2] - p[2]};
        return np_norm(v, 3);
      };
      const double to_mouth =
          0.5 * (distance(d->site_xpos + 3 * upper_bite_) + distance(d->site_xpos + 3 * lower_bite_));
      double reach_ball = tolerance(to_mouth, 0, m->site_size[3 * upper_bite_], 2, Sigmoid::kReciprocal);
      reach_ball = (6 * reach_ball + 1) / 7;
      const double target_radius = m->geom_size[3 * target_];
      const double to_target = distance(d->geom_xpos + 3 * target_);
      const double near =
          tolerance(to_target, 0, target_radius, m->geom_size[3 * floor_], Sigmoid::kReciprocal);
      if (to_target < 2 * target_radius) reach_ball = 1;
      r *= reach_ball;
      r *= (near + 1) / 2;
    }
    return r;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  // sensordata['torso_linvel'].dot(xmat['torso'].reshape(3, 3)): numpy's vector-matrix product.
  void torso_com_velocity(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    np_vecmat(d->sensordata + torso_linvel_, d->xmat + 9 * torso_, 3, 3, out);
  }

  int torso_, pelvis_, skull_, root_, torso_linvel_;
  std::array<int, 3> inertial_;
  std::array<int, 4> feet_, touch_;
  int floor_;
  double min_upright_;  // _MIN_UPRIGHT_COSINE
  int head_ = 0, ball_ = 0, target_ = 0, upper_bite_ = 0, lower_bite_ = 0, ball_root_ = 0;
  std::vector<int> hinge_qpos_, hinge_dof_;
  std::array<double, 2> stand_height_{};
  double body_weight_ = 0;
};

using DogStand = Dmc<Dog<0>>;
using DogWalk = Dmc<Dog<1>>;
using DogTrot = Dmc<Dog<3>>;
using DogRun = Dmc<Dog<9>>;
using DogFetch = Dmc<Dog<0, true>>;
AIOPOOL_REGISTER_ENV("dmc/dog-stand", DogStand, 0);
AIOPOOL_REGISTER_ENV("dmc/dog-walk", DogWalk, 0);
AIOPOOL_REGISTER_ENV("dmc/dog-trot", DogTrot, 0);
AIOPOOL_REGISTER_ENV("dmc/dog-run", DogRun, 0);
AIOPOOL_REGISTER_ENV("dmc/dog-fetch", DogFetch, 0);

}  // namespace aiopool::dmc
