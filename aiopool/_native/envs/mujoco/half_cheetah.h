// HalfCheetah-v5: gymnasium 1.4's HalfCheetahEnv (mujoco/half_cheetah_v5.py), bit for bit.
//
// Exact: ctrl_cost is float32 (see ant.h); the velocity is qpos[0]'s difference over dt; the
// reset draws uniform qpos noise, then standard_normal qvel noise. Never terminates.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

class HalfCheetah : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys(
        "half_cheetah.xml", 5,
        {float_key("forward_reward_weight", 1.0), float_key("ctrl_cost_weight", 0.1),
         float_key("reset_noise_scale", 0.1), bool_key("exclude_current_positions_from_observation", true)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    return make_spec(c, m, m->nq + m->nv - c.get_bool("exclude_current_positions_from_observation"),
                     {f64("x_position"), f64("x_velocity"), f64("reward_forward"), f32("reward_ctrl")});
  }

  explicit HalfCheetah(const Config& c)
      : MujocoEnv(c),
        forward_w_(c.get("forward_reward_weight")),
        ctrl_w_(static_cast<float>(c.get("ctrl_cost_weight"))),
        noise_(c.get("reset_noise_scale")),
        exclude_(c.get_bool("exclude_current_positions_from_observation")) {}

  void reset(Rng& rng) {
    reset_normal(rng, noise_);
    vx_ = forward_ = 0;
    ctrl_ = 0;
  }

  StepResult step(const Action* action, Rng&) {
    const double x0 = d->qpos[0];
    do_simulation(action);
    vx_ = (d->qpos[0] - x0) / dt;
    forward_ = forward_w_ * vx_;
    const float ctrl_cost = ctrl_w_ * sum_of_squares(action, static_cast<std::size_t>(m->nu));
    ctrl_ = -ctrl_cost;
    return {forward_ - static_cast<double>(ctrl_cost), false, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    o = put(o, d->qpos + (exclude_ ? 1 : 0), m->nq - (exclude_ ? 1 : 0));
    put(o, d->qvel, m->nv);
    write_info(row, d->qpos[0], vx_, forward_, ctrl_);
  }

 private:
  double forward_w_;
  float ctrl_w_;
  double noise_;
  bool exclude_;
  double vx_ = 0, forward_ = 0;  // step-only info: zero after a reset
  float ctrl_ = 0;
};

AIOPOOL_REGISTER_ENV("HalfCheetah-v5", HalfCheetah, 1000);

}  // namespace aiopool::mujoco
