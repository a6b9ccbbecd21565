// Ant-v5: gymnasium 1.4's AntEnv (mujoco/ant_v5.py), bit for bit.
//
// Exact: ctrl_cost is float32 (np.sum(np.square(action)) of the float32 action, times a Python
// float: NEP 50 keeps float32); contact_cost is float64 over all of cfrc_ext, clipped to
// contact_force_range; both sums are numpy's pairwise ones. The velocity is main_body's xpos
// difference over dt. is_healthy needs a finite state and min_z <= z <= max_z (inclusive here,
// strict in Hopper/Walker2d). The reset draws uniform qpos noise, then standard_normal qvel noise.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

class Ant : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys(
        "ant.xml", 5,
        {float_key("forward_reward_weight", 1), float_key("ctrl_cost_weight", 0.5),
         float_key("contact_cost_weight", 5e-4), float_key("healthy_reward", 1.0), str_key("main_body", "1"),
         bool_key("terminate_when_unhealthy", true), range_key("healthy_z_range", 0.2, 1.0),
         range_key("contact_force_range", -1.0, 1.0), float_key("reset_noise_scale", 0.1),
         bool_key("exclude_current_positions_from_observation", true),
         bool_key("include_cfrc_ext_in_observation", true)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    int64_t n = m->nq + m->nv - 2 * c.get_bool("exclude_current_positions_from_observation");
    if (c.get_bool("include_cfrc_ext_in_observation")) n += 6 * (m->nbody - 1);
    return make_spec(c, m, n,
                     {f64("x_position"), f64("y_position"), f64("distance_from_origin"), f64("x_velocity"),
                      f64("y_velocity"), f64("reward_forward"), f32("reward_ctrl"), f64("reward_contact"),
                      f64("reward_survive")});
  }

  explicit Ant(const Config& c)
      : MujocoEnv(c),
        forward_w_(c.get("forward_reward_weight")),
        ctrl_w_(static_cast<float>(c.get("ctrl_cost_weight"))),
        contact_w_(c.get("contact_cost_weight")),
        healthy_reward_(c.get("healthy_reward")),
        main_body_(body_id(c.get_string("main_body"))),
        terminate_(c.get_bool("terminate_when_unhealthy")),
        z_range_(c.get_range("healthy_z_range")),
        force_range_(c.get_range("contact_force_range")),
        noise_(c.get("reset_noise_scale")),
        exclude_(c.get_bool("exclude_current_positions_from_observation")),
        cfrc_(c.get_bool("include_cfrc_ext_in_observation")) {}

  void reset(Rng& rng) {
    reset_normal(rng, noise_);
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    const double x0 = xpos(main_body_)[0], y0 = xpos(main_body_)[1];
    do_simulation(action);
    const double vx = (xpos(main_body_)[0] - x0) / dt;
    const double vy = (xpos(main_body_)[1] - y0) / dt;

    const bool healthy = is_healthy();
    const double forward = vx * forward_w_;
    const double survive = static_cast<double>(healthy) * healthy_reward_;
    const float ctrl_cost = ctrl_w_ * sum_of_squares(action, static_cast<std::size_t>(m->nu));
    const double contact_cost =
        contact_w_ * sum_of_squares(contact_forces().data(), 6 * static_cast<std::size_t>(m->nbody));
    const double reward = (forward + survive) - (static_cast<double>(ctrl_cost) + contact_cost);
    step_ = {vx, vy, forward, -ctrl_cost, -contact_cost, survive};
    return {reward, !healthy && terminate_, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    o = put(o, d->qpos + (exclude_ ? 2 : 0), m->nq - (exclude_ ? 2 : 0));
    o = put(o, d->qvel, m->nv);
    if (cfrc_) put_clipped(o, d->cfrc_ext + 6, 6 * (m->nbody - 1), force_range_[0], force_range_[1]);
    write_info(row, d->qpos[0], d->qpos[1], np_norm(d->qpos, 2), step_.vx, step_.vy, step_.forward,
               step_.ctrl, step_.contact, step_.survive);
  }

 private:
  bool is_healthy() const {
    for (int i = 0; i < m->nq; ++i)
      if (!std::isfinite(d->qpos[i])) return false;
    for (int i = 0; i < m->nv; ++i)
      if (!std::isfinite(d->qvel[i])) return false;
    return z_range_[0] <= d->qpos[2] && d->qpos[2] <= z_range_[1];
  }

  std::vector<double> contact_forces() const {
    std::vector<double> f(d->cfrc_ext, d->cfrc_ext + 6 * m->nbody);
    for (double& x : f) x = clip(x, force_range_[0], force_range_[1]);
    return f;
  }

  // The step-only info values; zero after a reset (gymnasium's reset info lacks them).
  struct StepInfo {
    double vx = 0, vy = 0, forward = 0;
    float ctrl = 0;
    double contact = 0, survive = 0;
  };

  double forward_w_;
  float ctrl_w_;
  double contact_w_, healthy_reward_;
  int main_body_;
  bool terminate_;
  std::array<double, 2> z_range_, force_range_;
  double noise_;
  bool exclude_, cfrc_;
  StepInfo step_;
};

AIOPOOL_REGISTER_ENV("Ant-v5", Ant, 1000);

}  // namespace aiopool::mujoco
