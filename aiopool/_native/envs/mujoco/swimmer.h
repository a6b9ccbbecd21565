// Swimmer-v5: gymnasium 1.4's SwimmerEnv (mujoco/swimmer_v5.py), bit for bit.
//
// Exact: ctrl_cost is float32 (see ant.h); the velocity is qpos[0:2]'s difference over dt; the
// reset draws uniform noise for qpos, then qvel. Never terminates.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

class Swimmer : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys(
        "swimmer.xml", 4,
        {float_key("forward_reward_weight", 1.0), float_key("ctrl_cost_weight", 1e-4),
         float_key("reset_noise_scale", 0.1), bool_key("exclude_current_positions_from_observation", true)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    return make_spec(c, m, m->nq + m->nv - 2 * c.get_bool("exclude_current_positions_from_observation"),
                     {f64("x_position"), f64("y_position"), f64("distance_from_origin"), f64("x_velocity"),
                      f64("y_velocity"), f64("reward_forward"), f32("reward_ctrl")});
  }

  explicit Swimmer(const Config& c)
      : MujocoEnv(c),
        forward_w_(c.get("forward_reward_weight")),
        ctrl_w_(static_cast<float>(c.get("ctrl_cost_weight"))),
        noise_(c.get("reset_noise_scale")),
        exclude_(c.get_bool("exclude_current_positions_from_observation")) {}

  void reset(Rng& rng) {
    reset_uniform(rng, noise_);
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    const double x0 = d->qpos[0], y0 = d->qpos[1];
    do_simulation(action);
    const double vx = (d->qpos[0] - x0) / dt, vy = (d->qpos[1] - y0) / dt;
    const double forward = forward_w_ * vx;
    const float ctrl_cost = ctrl_w_ * sum_of_squares(action, static_cast<std::size_t>(m->nu));
    step_ = {vx, vy, forward, -ctrl_cost};
    return {forward - static_cast<double>(ctrl_cost), false, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    o = put(o, d->qpos + (exclude_ ? 2 : 0), m->nq - (exclude_ ? 2 : 0));
    put(o, d->qvel, m->nv);
    write_info(row, d->qpos[0], d->qpos[1], np_norm(d->qpos, 2), step_.vx, step_.vy, step_.forward,
               step_.ctrl);
  }

 private:
  struct StepInfo {  // step-only info: zero after a reset
    double vx = 0, vy = 0, forward = 0;
    float ctrl = 0;
  };

  double forward_w_;
  float ctrl_w_;
  double noise_;
  bool exclude_;
  StepInfo step_;
};

AIOPOOL_REGISTER_ENV("Swimmer-v5", Swimmer, 1000);

}  // namespace aiopool::mujoco
