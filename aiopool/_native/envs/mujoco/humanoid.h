// Humanoid-v5 and HumanoidStandup-v5: gymnasium 1.4's HumanoidEnv and HumanoidStandupEnv
// (mujoco/humanoid_v5.py, humanoidstandup_v5.py), bit for bit.
//
// Exact: both cost the control from data.ctrl (float64, not the float32 action) and the contact
// forces over all of cfrc_ext, with numpy's pairwise sums, then np.clip the contact cost.
// Humanoid's velocity is the mass centre's: einsum("b,bj->j", body_mass, xipos), which sums
// bodies in order, over body_mass.sum() (pairwise). The observation is qpos (minus x, y), qvel,
// then optionally cinert[1:], cvel[1:], qfrc_actuator[6:] and cfrc_ext[1:]. The tendon info
// arrays have the model's ntendon entries. HumanoidStandup's `uph_cost_weight` is accepted and,
// as in gymnasium, unused.
#pragma once

#include "mujoco_env.h"

namespace aiopool::mujoco {

// What the two share: the observation and its switches.
class HumanoidBase : public MujocoEnv {
 public:
  static std::vector<ConfigKey> observation_keys() {
    return {bool_key("exclude_current_positions_from_observation", true),
            bool_key("include_cinert_in_observation", true), bool_key("include_cvel_in_observation", true),
            bool_key("include_qfrc_actuator_in_observation", true),
            bool_key("include_cfrc_ext_in_observation", true)};
  }

  static int64_t obs_size(const mjModel* m, const Config& c) {
    int64_t n = m->nq + m->nv - 2 * c.get_bool("exclude_current_positions_from_observation");
    n += 10 * (m->nbody - 1) * c.get_bool("include_cinert_in_observation");
    n += 6 * (m->nbody - 1) * c.get_bool("include_cvel_in_observation");
    n += (m->nv - 6) * c.get_bool("include_qfrc_actuator_in_observation");
    n += 6 * (m->nbody - 1) * c.get_bool("include_cfrc_ext_in_observation");
    return n;
  }

  static Field tendon(const char* name, const mjModel* m) { return {name, DType::kFloat64, {m->ntendon}}; }

  explicit HumanoidBase(const Config& c)
      : MujocoEnv(c),
        noise_(c.get("reset_noise_scale")),
        exclude_(c.get_bool("exclude_current_positions_from_observation")),
        cinert_(c.get_bool("include_cinert_in_observation")),
        cvel_(c.get_bool("include_cvel_in_observation")),
        qfrc_(c.get_bool("include_qfrc_actuator_in_observation")),
        cfrc_(c.get_bool("include_cfrc_ext_in_observation")) {}

  void reset(Rng& rng) { reset_uniform(rng, noise_); }

 protected:
  void write_obs(Row& row) const {
    double* o = row.obs_as<double>();
    o = put(o, d->qpos + (exclude_ ? 2 : 0), m->nq - (exclude_ ? 2 : 0));
    o = put(o, d->qvel, m->nv);
    if (cinert_) o = put(o, d->cinert + 10, 10 * (m->nbody - 1));
    if (cvel_) o = put(o, d->cvel + 6, 6 * (m->nbody - 1));
    if (qfrc_) o = put(o, d->qfrc_actuator + 6, m->nv - 6);
    if (cfrc_) put(o, d->cfrc_ext + 6, 6 * (m->nbody - 1));
  }
  Array tendon_length() const { return {d->ten_length, m->ntendon}; }
  Array tendon_velocity() const { return {d->ten_velocity, m->ntendon}; }
  double ctrl_squares() const { return sum_of_squares(d->ctrl, static_cast<std::size_t>(m->nu)); }
  double cfrc_squares() const { return sum_of_squares(d->cfrc_ext, 6 * static_cast<std::size_t>(m->nbody)); }

 private:
  double noise_;
  bool exclude_, cinert_, cvel_, qfrc_, cfrc_;
};

class Humanoid : public HumanoidBase {
 public:
  static std::vector<ConfigKey> config_keys() {
    std::vector<ConfigKey> k{
        float_key("forward_reward_weight", 1.25), float_key("ctrl_cost_weight", 0.1),
        float_key("contact_cost_weight", 5e-7),   range_key("contact_cost_range", -kInf, 10.0),
        float_key("healthy_reward", 5.0),         bool_key("terminate_when_unhealthy", true),
        range_key("healthy_z_range", 1.0, 2.0),   float_key("reset_noise_scale", 1e-2)};
    for (const ConfigKey& o : observation_keys()) k.push_back(o);
    return keys("humanoid.xml", 5, k);
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    return make_spec(
        c, m, obs_size(m, c),
        {f64("x_position"), f64("y_position"), tendon("tendon_length", m), tendon("tendon_velocity", m),
         f64("distance_from_origin"), f64("x_velocity"), f64("y_velocity"), f64("reward_survive"),
         f64("reward_forward"), f64("reward_ctrl"), f64("reward_contact")});
  }

  explicit Humanoid(const Config& c)
      : HumanoidBase(c),
        forward_w_(c.get("forward_reward_weight")),
        ctrl_w_(c.get("ctrl_cost_weight")),
        contact_w_(c.get("contact_cost_weight")),
        contact_range_(c.get_range("contact_cost_range")),
        healthy_reward_(c.get("healthy_reward")),
        terminate_(c.get_bool("terminate_when_unhealthy")),
        z_range_(c.get_range("healthy_z_range")),
        total_mass_(pairwise_sum(m->body_mass, static_cast<std::size_t>(m->nbody))) {}

  void reset(Rng& rng) {
    HumanoidBase::reset(rng);
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    const std::array<double, 2> before = mass_center();
    do_simulation(action);
    const std::array<double, 2> after = mass_center();
    const double vx = (after[0] - before[0]) / dt, vy = (after[1] - before[1]) / dt;
    const bool healthy = z_range_[0] < d->qpos[2] && d->qpos[2] < z_range_[1];
    const double forward = forward_w_ * vx;
    const double survive = static_cast<double>(healthy) * healthy_reward_;
    const double ctrl_cost = ctrl_w_ * ctrl_squares();
    const double contact_cost = clip(contact_w_ * cfrc_squares(), contact_range_[0], contact_range_[1]);
    step_ = {vx, vy, survive, forward, -ctrl_cost, -contact_cost};
    return {(forward + survive) - (ctrl_cost + contact_cost), !healthy && terminate_, false};
  }

  void write(Row& row) const {
    write_obs(row);
    write_info(row, d->qpos[0], d->qpos[1], tendon_length(), tendon_velocity(), np_norm(d->qpos, 2), step_.vx,
               step_.vy, step_.survive, step_.forward, step_.ctrl, step_.contact);
  }

 private:
  // (sum_b body_mass[b] * xipos[b]) / body_mass.sum(), x and y.
  std::array<double, 2> mass_center() const {
    double num[3] = {0, 0, 0};
    for (int b = 0; b < m->nbody; ++b)
      for (int j = 0; j < 3; ++j) num[j] = num[j] + m->body_mass[b] * d->xipos[3 * b + j];
    return {num[0] / total_mass_, num[1] / total_mass_};
  }

  struct StepInfo {  // step-only info: zero after a reset
    double vx = 0, vy = 0, survive = 0, forward = 0, ctrl = 0, contact = 0;
  };

  double forward_w_, ctrl_w_, contact_w_;
  std::array<double, 2> contact_range_;
  double healthy_reward_;
  bool terminate_;
  std::array<double, 2> z_range_;
  double total_mass_;
  StepInfo step_;
};

class HumanoidStandup : public HumanoidBase {
 public:
  static std::vector<ConfigKey> config_keys() {
    std::vector<ConfigKey> k{float_key("uph_cost_weight", 1), float_key("ctrl_cost_weight", 0.1),
                             float_key("impact_cost_weight", 0.5e-6),
                             range_key("impact_cost_range", -kInf, 10.0),
                             float_key("reset_noise_scale", 1e-2)};
    for (const ConfigKey& o : observation_keys()) k.push_back(o);
    return keys("humanoidstandup.xml", 5, k);
  }

  static EnvSpec spec(const Config& c) {
    const auto model = MujocoEnv::model(c);
    const mjModel* m = model.get();
    return make_spec(
        c, m, obs_size(m, c),
        {f64("x_position"), f64("y_position"), f64("z_distance_from_origin"), tendon("tendon_length", m),
         tendon("tendon_velocity", m), f64("reward_linup"), f64("reward_quadctrl"), f64("reward_impact")});
  }

  explicit HumanoidStandup(const Config& c)
      : HumanoidBase(c),
        ctrl_w_(c.get("ctrl_cost_weight")),
        impact_w_(c.get("impact_cost_weight")),
        impact_range_(c.get_range("impact_cost_range")) {}

  void reset(Rng& rng) {
    HumanoidBase::reset(rng);
    step_ = {};
  }

  StepResult step(const Action* action, Rng&) {
    do_simulation(action);
    const double uph_cost = (d->qpos[2] - 0) / m->opt.timestep;
    const double ctrl_cost = ctrl_w_ * ctrl_squares();
    const double impact_cost = clip(impact_w_ * cfrc_squares(), impact_range_[0], impact_range_[1]);
    step_ = {uph_cost, -ctrl_cost, -impact_cost};
    return {uph_cost - ctrl_cost - impact_cost + 1, false, false};
  }

  void write(Row& row) const {
    write_obs(row);
    write_info(row, d->qpos[0], d->qpos[1], d->qpos[2] - init_qpos[2], tendon_length(), tendon_velocity(),
               step_.linup, step_.quadctrl, step_.impact);
  }

 private:
  struct StepInfo {  // step-only info: zero after a reset
    double linup = 0, quadctrl = 0, impact = 0;
  };

  double ctrl_w_, impact_w_;
  std::array<double, 2> impact_range_;
  StepInfo step_;
};

AIOPOOL_REGISTER_ENV("Humanoid-v5", Humanoid, 1000);
AIOPOOL_REGISTER_ENV("HumanoidStandup-v5", HumanoidStandup, 1000);

}  // namespace aiopool::mujoco
