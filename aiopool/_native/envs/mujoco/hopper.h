// Hopper-v5: gymnasium 1.4's HopperEnv (mujoco/hopper_v5.py), bit for bit.
//
// Exact: ctrl_cost is float32 (see ant.h); is_healthy is strict on all three ranges: the state
// vector past qpos[0:2], z = qpos[1] and angle = qpos[2]; the observation clips qvel to
// [-10, 10]; the reset draws uniform noise for qpos, then qvel. Also Walker2d-v5's base.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

class Hopper : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys("hopper.xml", 4,
                {float_key("forward_reward_weight", 1.0), float_key("ctrl_cost_weight", 1e-3),
                 float_key("healthy_reward", 1.0), bool_key("terminate_when_unhealthy", true),
                 range_key("healthy_state_range", -100.0, 100.0), range_key("healthy_z_range", 0.7, kInf),
                 range_key("healthy_angle_range", -0.2, 0.2), float_key("reset_noise_scale", 5e-3),
                 bool_key("exclude_current_positions_from_observation", true)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    return make_spec(c, m, m->nq + m->nv - c.get_bool("exclude_current_positions_from_observation"),
                     {f64("x_position"), f64("z_distance_from_origin"), f64("x_velocity"),
                      f64("reward_forward"), f32("reward_ctrl"), f64("reward_survive")});
  }

  explicit Hopper(const Config& c, bool check_state = true)
      : MujocoEnv(c),
        forward_w_(c.get("forward_reward_weight")),
        ctrl_w_(static_cast<float>(c.get("ctrl_cost_weight"))),
        healthy_reward_(c.get("healthy_reward")),
        terminate_(c.get_bool("terminate_when_unhealthy")),
        check_state_(check_state),
        state_range_(check_state ? c.get_range("healthy_state_range") : std::array<double, 2>{}),
        z_range_(c.get_range("healthy_z_range")),
        angle_range_(c.get_range("healthy_angle_range")),
        noise_(c.get("reset_noise_scale")),
        exclude_(c.get_bool("exclude_current_positions_from_observation")) {}

  void reset(Rng& rng) {
    reset_uniform(rng, noise_);
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    const double x0 = d->qpos[0];
    do_simulation(action);
    const double vx = (d->qpos[0] - x0) / dt;
    const bool healthy = is_healthy();
    const double forward = forward_w_ * vx;
    const double survive = static_cast<double>(healthy) * healthy_reward_;
    const float ctrl_cost = ctrl_w_ * sum_of_squares(action, static_cast<std::size_t>(m->nu));
    step_ = {vx, forward, -ctrl_cost, survive};
    return {(forward + survive) - static_cast<double>(ctrl_cost), !healthy && terminate_, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    o = put(o, d->qpos + (exclude_ ? 1 : 0), m->nq - (exclude_ ? 1 : 0));
    put_clipped(o, d->qvel, m->nv, -10, 10);
    write_info(row, d->qpos[0], d->qpos[1] - init_qpos[1], step_.vx, step_.forward, step_.ctrl,
               step_.survive);
  }

 private:
  bool is_healthy() const {
    const double z = d->qpos[1], angle = d->qpos[2];
    bool healthy_state = true;
    if (check_state_) {
      // state_vector()[2:]: qpos[2:] then qvel.
      auto in = [&](double s) { return state_range_[0] < s && s < state_range_[1]; };
      for (int i = 2; i < m->nq; ++i) healthy_state = healthy_state && in(d->qpos[i]);
      for (int i = 0; i < m->nv; ++i) healthy_state = healthy_state && in(d->qvel[i]);
    }
    const bool healthy_z = z_range_[0] < z && z < z_range_[1];
    const bool healthy_angle = angle_range_[0] < angle && angle < angle_range_[1];
    return healthy_state && healthy_z && healthy_angle;
  }

  struct StepInfo {  // step-only info: zero after a reset
    double vx = 0, forward = 0;
    float ctrl = 0;
    double survive = 0;
  };

  double forward_w_;
  float ctrl_w_;
  double healthy_reward_;
  bool terminate_, check_state_;
  std::array<double, 2> state_range_, z_range_, angle_range_;
  double noise_;
  bool exclude_;
  StepInfo step_;
};

// Walker2d-v5 (mujoco/walker2d_v5.py) is Hopper-v5 without the state range, with its own
// model and defaults.
class Walker2d : public Hopper {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys(
        "walker2d_v5.xml", 4,
        {float_key("forward_reward_weight", 1.0), float_key("ctrl_cost_weight", 1e-3),
         float_key("healthy_reward", 1.0), bool_key("terminate_when_unhealthy", true),
         range_key("healthy_z_range", 0.8, 2.0), range_key("healthy_angle_range", -1.0, 1.0),
         float_key("reset_noise_scale", 5e-3), bool_key("exclude_current_positions_from_observation", true)});
  }
  explicit Walker2d(const Config& c) : Hopper(c, false) {}
};

AIOPOOL_REGISTER_ENV("Hopper-v5", Hopper, 1000);
AIOPOOL_REGISTER_ENV("Walker2d-v5", Walker2d, 1000);

}  // namespace aiopool::mujoco
