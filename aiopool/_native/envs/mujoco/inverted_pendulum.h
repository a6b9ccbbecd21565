// InvertedPendulum-v5 and InvertedDoublePendulum-v5: gymnasium 1.4's InvertedPendulumEnv and
// InvertedDoublePendulumEnv (mujoco/inverted_pendulum_v5.py, inverted_double_pendulum_v5.py),
// bit for bit.
//
// InvertedPendulum: obs = [qpos, qvel]; it terminates when the obs is not finite or |qpos[1]| >
// 0.2; the reward (and info `reward_survive`, an int as in gymnasium) is 1 while alive.
// InvertedDoublePendulum: obs = [qpos[0], sin qpos[1:], cos qpos[1:], clip(qvel), clip(
// qfrc_constraint)[0]] (numpy's own sin/cos loops, numpy_math.h); the tip is site_xpos[0]; `x ** 2`
// on numpy scalars is libm pow; its reset draws standard_normal qvel noise.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

class InvertedPendulum : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys("inverted_pendulum.xml", 2, {float_key("reset_noise_scale", 0.01)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    if (m->nq + m->nv != 4) throw std::invalid_argument("InvertedPendulum-v5's model must have nq + nv == 4");
    return make_spec(c, m, 4, {{"reward_survive", DType::kInt64, {}}});
  }

  explicit InvertedPendulum(const Config& c) : MujocoEnv(c), noise_(c.get("reset_noise_scale")) {}

  void reset(Rng& rng) {
    reset_uniform(rng, noise_);
    survive_ = 0;
  }

  StepResult step(const Action* action, Rng&) {
    do_simulation(action);
    bool finite = true;
    for (int i = 0; i < m->nq; ++i) finite = finite && std::isfinite(d->qpos[i]);
    for (int i = 0; i < m->nv; ++i) finite = finite && std::isfinite(d->qvel[i]);
    const bool terminated = !finite || std::fabs(d->qpos[1]) > 0.2;
    survive_ = terminated ? 0 : 1;
    return {static_cast<double>(survive_), terminated, false};
  }

  void write(Row& row) const {
    put(put(row.obs_as<double>(), d->qpos, m->nq), d->qvel, m->nv);
    write_info(row, survive_);
  }

 private:
  double noise_;
  int64_t survive_ = 0;
};

class InvertedDoublePendulum : public MujocoEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return keys("inverted_double_pendulum.xml", 5,
                {float_key("healthy_reward", 10.0), float_key("reset_noise_scale", 0.1)});
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    if (m->nq != 3 || m->nv != 3 || m->nsite < 1)
      throw std::invalid_argument("InvertedDoublePendulum-v5's model must have nq == nv == 3 and a site");
    return make_spec(c, m, 9, {f64("reward_survive"), f64("distance_penalty"), f64("velocity_penalty")});
  }

  explicit InvertedDoublePendulum(const Config& c)
      : MujocoEnv(c), healthy_reward_(c.get("healthy_reward")), noise_(c.get("reset_noise_scale")) {}

  void reset(Rng& rng) {
    reset_normal(rng, noise_);
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    do_simulation(action);
    const double x = d->site_xpos[0], y = d->site_xpos[2];
    const bool terminated = y <= 1;
    const double v1 = d->qvel[1], v2 = d->qvel[2];
    const double dist_penalty = 0.01 * pow2(x) + pow2(y - 2);
    const double vel_penalty = 0.001 * pow2(v1) + 0.005 * pow2(v2);
    const double alive_bonus = healthy_reward_ * static_cast<double>(!terminated);
    step_ = {alive_bonus, -dist_penalty, -vel_penalty};
    return {alive_bonus - dist_penalty - vel_penalty, terminated, false};
  }

  void write(Row& row) const {
    double* o = row.obs_as<double>();
    *o++ = d->qpos[0];
    for (int i = 1; i < 3; ++i) *o++ = np_sin(d->qpos[i]);
    for (int i = 1; i < 3; ++i) *o++ = np_cos(d->qpos[i]);
    o = put_clipped(o, d->qvel, 3, -10, 10);
    *o = clip(d->qfrc_constraint[0], -10, 10);
    write_info(row, step_.survive, step_.distance, step_.velocity);
  }

 private:
  struct StepInfo {  // step-only info: zero after a reset
    double survive = 0, distance = 0, velocity = 0;
  };

  double healthy_reward_, noise_;
  StepInfo step_;
};

AIOPOOL_REGISTER_ENV("InvertedPendulum-v5", InvertedPendulum, 1000);
AIOPOOL_REGISTER_ENV("InvertedDoublePendulum-v5", InvertedDoublePendulum, 1000);

}  // namespace aiopool::mujoco
