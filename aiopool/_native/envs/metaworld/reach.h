// reach-v3: Meta-World 3.1.1's SawyerReachEnvV3 (metaworld/envs/sawyer_reach_v3.py), reward
// version "v2" (the benchmarks' default), bit for bit.
//
// The task vector is the puck's position, then the goal's, drawn again while their xy lie within
// 0.15 of each other. A reset holds the hand at (0, 0.6, 0.2), puts the puck at the vector's
// first three numbers and the goal at its last three. The reward is 10 x tolerance(|tcp - goal|,
// (0, 0.05), margin |hand_init_pos - goal|, "long_tail"); success is |tcp - goal| <= 0.05.
#pragma once

#include "sawyer.h"

namespace aiopool::metaworld {

class Reach : public Sawyer {
 public:
  static TaskConfig config() {
    return {"sawyer_xyz/sawyer_reach_v3.xml",
            {-0.5, 0.40, 0.05},
            {0.5, 1, 0.5},
            {0.0, 0.6, 0.2},
            {-0.1, 0.8, 0.05},
            {0.1, 0.9, 0.3},
            {-0.1, 0.6, 0.02, -0.1, 0.8, 0.05},
            {0.1, 0.7, 0.02, 0.1, 0.9, 0.3}};
  }
  static std::vector<ConfigKey> config_keys() { return Sawyer::config_keys(); }
  static EnvSpec spec(const Config&) { return make_spec(config()); }

  explicit Reach(const Config& c) : Sawyer(c, config()), obj_(body("obj")), obj_geom_(geom("objGeom")) {
    redraw_ = &xy_within_015;
  }

  void reset(Rng& rng) {
    const double* v = begin_reset(rng);
    reset_hand();
    std::copy(v + 3, v + 6, target_pos.begin());
    set_obj_xyz(v);
    end_reset([this](double* out) { put_objects(out); });
  }

  StepResult step(const Action* action, Rng&) {
    if (!step_physics(action, [this](double* out) { put_objects(out); })) return {0.0, false, true};
    const Vec3 tcp = tcp_center();
    const double tcp_to_target = dist3(tcp.data(), target_pos.data());
    const double margin = dist3(task.hand_init_pos.data(), target_pos.data());
    const double in_place = tolerance_long_tail(tcp_to_target, 0, 0.05, margin);
    const double reward = 10 * in_place;
    info_ = {tcp_to_target <= 0.05 ? 1.0 : 0.0,
             tcp_to_target,
             1.0,
             tcp_to_target,
             in_place,
             tcp_to_target,
             reward};
    return {reward, false, false};
  }

 private:
  int obj_, obj_geom_;

  // The puck: its body's position, its geom's orientation (scipy's quaternion).
  void put_objects(double* out) const {
    std::memcpy(out, d->xpos + 3 * obj_, 3 * sizeof(double));
    const std::array<double, 4> q = quat_from_matrix(d->geom_xmat + 9 * obj_geom_);
    std::copy(q.begin(), q.end(), out + 3);
  }
};

AIOPOOL_REGISTER_ENV("Meta-World/reach-v3", Reach, 500);

}  // namespace aiopool::metaworld
