// push-v3: Meta-World 3.1.1's SawyerPushEnvV3 (metaworld/envs/sawyer_push_v3.py), reward
// version "v2", bit for bit.
//
// The task vector is the puck's xy (its z is where the hand's reset left it), then the goal's
// (the goal's z is the puck's), drawn again while their xy lie within 0.15 of each other. The
// reward is SawyerXYZEnv._gripper_caging_reward (high density) and the puck's distance to the
// goal, as the reference computes them: where the gripper's effort a[3] lies in (0, 1] and the
// hand cages the puck, numpy's NEP 50 makes the caging product float32 (a Python float times a
// np.float32), and with it the reward and `grasp_reward`; `CagingValue` follows that.
#pragma once

#include "sawyer.h"

namespace aiopool::metaworld {

// A value of the reward's arithmetic: a Python float (double) or a np.float32, which a Python
// float meeting it does not widen (NEP 50).
struct CagingValue {
  double value = 0;
  bool f32 = false;
};

// reward_utils.hamacher_product(a, b), `b` possibly float32.
inline CagingValue hamacher(double a, CagingValue b) {
  if (!b.f32) {
    const double den = a + b.value - (a * b.value);
    return {den > 0 ? (a * b.value) / den : 0.0, false};
  }
  const float af = static_cast<float>(a), bf = static_cast<float>(b.value);
  const float prod = af * bf;
  const float den = (af + bf) - prod;
  return {den > 0 ? static_cast<double>(prod / den) : 0.0, den > 0};
}

inline double hamacher(double a, double b) {
  const double den = a + b - (a * b);
  return den > 0 ? (a * b) / den : 0.0;
}

class Push : public Sawyer {
 public:
  static TaskConfig config() {
    return {"sawyer_xyz/sawyer_push_v3.xml",
            {-0.5, 0.40, 0.05},
            {0.5, 1, 0.5},
            {0.0, 0.6, 0.2},
            {-0.1, 0.8, 0.01},
            {0.1, 0.9, 0.02},
            {-0.1, 0.6, 0.02, -0.1, 0.8, 0.01},
            {0.1, 0.7, 0.02, 0.1, 0.9, 0.02}};
  }
  static std::vector<ConfigKey> config_keys() { return Sawyer::config_keys(); }
  static EnvSpec spec(const Config&) { return make_spec(config()); }

  explicit Push(const Config& c)
      : Sawyer(c, config()),
        obj_(body("obj")),
        obj_geom_(geom("objGeom")),
        left_pad_(body("leftpad")),
        right_pad_(body("rightpad")),
        left_pad_geom_(geom("leftpad_geom")),
        right_pad_geom_(geom("rightpad_geom")) {
    redraw_ = &xy_within_015;
  }

  void reset(Rng& rng) {
    const double* v = begin_reset(rng);
    reset_hand();
    const double z = d->xpos[3 * obj_ + 2];  // fix_extreme_obj_pos: the puck's z after the hand's reset
    target_pos = {v[3], v[4], z};
    obj_init_pos_ = {v[0], v[1], z};
    set_obj_xyz(obj_init_pos_.data());
    end_reset([this](double* out) { put_objects(out); });
  }

  StepResult step(const Action* action, Rng&) {
    if (!step_physics(action, [this](double* out) { put_objects(out); })) return {0.0, false, true};
    const double* obj = obs_.data() + 4;
    const double tcp_opened = obs_[3];
    const Vec3 tcp = tcp_center();
    const double tcp_to_obj = dist3(obj, tcp.data());
    const double target_to_obj = dist3(obj, target_pos.data());
    const double target_to_obj_init = dist3(obj_init_pos_.data(), target_pos.data());
    const double in_place = tolerance_long_tail(target_to_obj, 0, 0.05, target_to_obj_init);
    const CagingValue grasped = caging_reward(action[3], obj, tcp);
    CagingValue reward = grasped;
    if (reward.f32) {
      float r = 2 * static_cast<float>(reward.value);
      if (tcp_to_obj < 0.02 && tcp_opened > 0) r += (1.0f + r) + static_cast<float>(5.0 * in_place);
      reward.value = r;
    } else {
      reward.value = 2 * reward.value;
      if (tcp_to_obj < 0.02 && tcp_opened > 0) reward.value += (1.0 + reward.value) + 5.0 * in_place;
    }
    if (target_to_obj < 0.05) reward = {10.0, false};
    const bool grasp = touching() && tcp_opened > 0 && obj[2] - 0.02 > obj_init_pos_[2];
    info_ = {target_to_obj <= 0.05 ? 1.0 : 0.0,
             tcp_to_obj <= 0.03 ? 1.0 : 0.0,
             grasp ? 1.0 : 0.0,
             grasped.value,
             in_place,
             target_to_obj,
             reward.value};
    return {reward.value, false, false};
  }

 private:
  int obj_, obj_geom_, left_pad_, right_pad_, left_pad_geom_, right_pad_geom_;
  Vec3 obj_init_pos_{};

  void put_objects(double* out) const {
    std::memcpy(out, d->xpos + 3 * obj_, 3 * sizeof(double));
    const std::array<double, 4> q = quat_from_matrix(d->geom_xmat + 9 * obj_geom_);
    std::copy(q.begin(), q.end(), out + 3);
  }

  // touching_main_object: both pads press on the puck (sums of their contacts' normal forces,
  // in data.contact's order; an efc_address of -1 reads the last force, as Python's index does).
  bool touching() const {
    double left = 0, right = 0;
    for (int k = 0; k < d->ncon; ++k) {
      const mjContact& c = d->contact[k];
      const bool obj = c.geom1 == obj_geom_ || c.geom2 == obj_geom_;
      if (!obj) continue;
      const int at = c.efc_address >= 0 ? c.efc_address : d->nefc + c.efc_address;
      if (c.geom1 == left_pad_geom_ || c.geom2 == left_pad_geom_) left = left + d->efc_force[at];
      if (c.geom1 == right_pad_geom_ || c.geom2 == right_pad_geom_) right = right + d->efc_force[at];
    }
    return 0 < left && 0 < right;
  }

  // _gripper_caging_reward(action, obj, obj_radius=0.015, pad_success_thresh=0.05,
  // object_reach_radius=0.01, xz_thresh=0.005, high_density=True).
  CagingValue caging_reward(float effort, const double* obj, const Vec3& tcp) const {
    constexpr double kObjRadius = 0.015, kPadThresh = 0.05, kXzThresh = 0.005;
    const double pad_y[2] = {d->xpos[3 * left_pad_ + 1], d->xpos[3 * right_pad_ + 1]};
    double caging_lr[2];
    for (int i = 0; i < 2; ++i) {
      const double to_obj = std::fabs(pad_y[i] - obj[1]);
      const double to_init = std::fabs(pad_y[i] - obj_init_pos_[1]);
      caging_lr[i] = tolerance_long_tail(to_obj, kObjRadius, kPadThresh, std::fabs(to_init - kPadThresh));
    }
    const double caging_y = hamacher(caging_lr[0], caging_lr[1]);
    const double init_xz[2] = {obj_init_pos_[0] - init_tcp[0], obj_init_pos_[2] - init_tcp[2]};
    const double margin = np_norm(init_xz, 2) - kXzThresh;
    const double xz[2] = {tcp[0] - obj[0], tcp[2] - obj[2]};
    const double caging_xz = tolerance_long_tail(np_norm(xz, 2), 0, kXzThresh, margin);
    // min(max(0, a), 1.0) / 1.0: the np.float32 effort where 0 < a <= 1, else a Python float.
    const CagingValue closed = effort > 0 && !(1.0f < effort) ? CagingValue{effort, true}
                                                              : CagingValue{effort > 0 ? 1.0 : 0.0, false};
    const double caging = hamacher(caging_y, caging_xz);
    const CagingValue gripping = caging > 0.97 ? closed : CagingValue{0.0, false};
    const CagingValue both = hamacher(caging, gripping);
    if (both.f32)
      return {static_cast<double>((static_cast<float>(both.value) + static_cast<float>(caging)) / 2), true};
    return {(both.value + caging) / 2, false};
  }
};

AIOPOOL_REGISTER_ENV("Meta-World/push-v3", Push, 500);

}  // namespace aiopool::metaworld
