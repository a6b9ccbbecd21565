// Reacher-v5 and Pusher-v5: gymnasium 1.4's ReacherEnv and PusherEnv (mujoco/reacher_v5.py,
// pusher_v5.py), bit for bit.
//
// Exact: reward_ctrl = -np.square(action).sum() * weight stays float32 (NEP 50); the distances
// are np.linalg.norm of body xpos differences; `get_body_com` is data.body(name).xpos. Resets
// redraw the goal (Reacher) or cylinder (Pusher) until it is far enough, drawing exactly what
// gymnasium's rejection loops draw.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

class Reacher : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys("reacher.xml", 2,
                {float_key("reward_dist_weight", 1), float_key("reward_control_weight", 1)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    if (m->nq != 4 || m->nv != 4) throw std::invalid_argument("Reacher-v5's model must have nq == nv == 4");
    return make_spec(c, m, 10, {f64("reward_dist"), f32("reward_ctrl")});
  }

  explicit Reacher(const Config& c)
      : MujocoEnv(c),
        dist_w_(c.get("reward_dist_weight")),
        ctrl_w_(static_cast<float>(c.get("reward_control_weight"))),
        fingertip_(body_id("fingertip")),
        target_(body_id("target")) {}

  void reset(Rng& rng) {
    reset_data();
    std::vector<double> qpos(init_qpos);
    for (double& q : qpos) q = rng.uniform(-0.1, 0.1) + q;
    double goal[2];
    do {
      goal[0] = rng.uniform(-0.2, 0.2);
      goal[1] = rng.uniform(-0.2, 0.2);
    } while (!(np_norm(goal, 2) < 0.2));
    qpos[2] = goal[0];
    qpos[3] = goal[1];
    std::vector<double> qvel = noisy_qvel_uniform(rng, 0.005);
    qvel[2] = qvel[3] = 0;
    set_state(qpos.data(), qvel.data());
    dist_ = 0;
    ctrl_ = 0;
  }

  StepResult step(const Action* action, Rng&) {
    do_simulation(action);
    double vec[3];
    for (int j = 0; j < 3; ++j) vec[j] = xpos(fingertip_)[j] - xpos(target_)[j];
    dist_ = -np_norm(vec, 3) * dist_w_;
    ctrl_ = -sum_of_squares(action, static_cast<std::size_t>(m->nu)) * ctrl_w_;
    return {dist_ + static_cast<double>(ctrl_), false, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    for (int i = 0; i < 2; ++i) *o++ = np_cos(d->qpos[i]);
    for (int i = 0; i < 2; ++i) *o++ = np_sin(d->qpos[i]);
    o = put(o, d->qpos + 2, 2);
    o = put(o, d->qvel, 2);
    for (int j = 0; j < 2; ++j) *o++ = xpos(fingertip_)[j] - xpos(target_)[j];
    write_info(row, dist_, ctrl_);
  }

 private:
  double dist_w_;
  float ctrl_w_;
  int fingertip_, target_;
  double dist_ = 0;  // step-only info: zero after a reset
  float ctrl_ = 0;
};

class Pusher : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys("pusher_v5.xml", 5,
                {float_key("reward_near_weight", 0.5), float_key("reward_dist_weight", 1),
                 float_key("reward_control_weight", 0.1)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    if (m->nq != 11 || m->nv != 11) throw std::invalid_argument("Pusher-v5's model must have nq == nv == 11");
    return make_spec(c, m, 23, {f64("reward_dist"), f32("reward_ctrl"), f64("reward_near")});
  }

  explicit Pusher(const Config& c)
      : MujocoEnv(c),
        near_w_(c.get("reward_near_weight")),
        dist_w_(c.get("reward_dist_weight")),
        ctrl_w_(static_cast<float>(c.get("reward_control_weight"))),
        tips_arm_(body_id("tips_arm")),
        object_(body_id("object")),
        goal_(body_id("goal")) {}

  void reset(Rng& rng) {
    reset_data();
    std::vector<double> qpos(init_qpos);
    double cylinder[2];
    do {
      cylinder[0] = rng.uniform(-0.3, 0);
      cylinder[1] = rng.uniform(-0.2, 0.2);
    } while (!(np_norm(cylinder, 2) > 0.17));  // goal_pos is (0, 0)
    qpos[7] = cylinder[0];
    qpos[8] = cylinder[1];
    qpos[9] = qpos[10] = 0;
    std::vector<double> qvel = noisy_qvel_uniform(rng, 0.005);
    for (int i = 7; i < 11; ++i) qvel[static_cast<std::size_t>(i)] = 0;
    set_state(qpos.data(), qvel.data());
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    do_simulation(action);
    double v1[3], v2[3];
    for (int j = 0; j < 3; ++j) {
      v1[j] = xpos(object_)[j] - xpos(tips_arm_)[j];
      v2[j] = xpos(object_)[j] - xpos(goal_)[j];
    }
    const double near = -np_norm(v1, 3) * near_w_;
    const double dist = -np_norm(v2, 3) * dist_w_;
    const float ctrl = -sum_of_squares(action, static_cast<std::size_t>(m->nu)) * ctrl_w_;
    step_ = {dist, ctrl, near};
    return {(dist + static_cast<double>(ctrl)) + near, false, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    o = put(o, d->qpos, 7);
    o = put(o, d->qvel, 7);
    o = put(o, xpos(tips_arm_), 3);
    o = put(o, xpos(object_), 3);
    put(o, xpos(goal_), 3);
    write_info(row, step_.dist, step_.ctrl, step_.near);
  }

 private:
  struct StepInfo {  // step-only info: zero after a reset
    double dist = 0;
    float ctrl = 0;
    double near = 0;
  };

  double near_w_, dist_w_;
  float ctrl_w_;
  int tips_arm_, object_, goal_;
  StepInfo step_;
};

AIOPOOL_REGISTER_ENV("Reacher-v5", Reacher, 50);
AIOPOOL_REGISTER_ENV("Pusher-v5", Pusher, 100);

}  // namespace aiopool::mujoco
