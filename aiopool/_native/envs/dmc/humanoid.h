// dmc/humanoid-{stand, walk, run, run_pure_state} and dmc/humanoid_CMU-{stand, walk, run}:
// dm_control's humanoid and humanoid_CMU domains (suite/humanoid.py, humanoid_CMU.py), bit for
// bit; the CMU humanoid is the same task on a 56-actuator body whose uprightness is its thorax's
// xmat zy. A reset randomizes the joints until nothing touches (an
// actuation-free forward after each try); the observation is the joint angles, the head's
// height, the hands and feet in the torso's frame (numpy's vector-matrix products), the torso's
// vertical, the centre of mass's velocity and every velocity (run_pure_state: qpos and qvel);
// the reward is standing (head over 1.4) and upright, times small control, times staying put
// (stand) or moving faster than 1 (walk) or 10 (run).
#pragma once

#include <limits>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kMoveSpeed, bool kPureState = false, bool kCMU = false>
class Humanoid {
 public:
  static constexpr double kTimeLimit = kCMU ? 20.0 : 25.0;
  static constexpr int kNu = kCMU ? 56 : 21, kNq = kNu + 7, kNv = kNu + 6;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    if (kPureState) return {{"position", kNq}, {"velocity", kNv}};
    return {{"joint_angles", kNu}, {"head_height", 0},  {"extremities", 12},
            {"torso_vertical", 3}, {"com_velocity", 3}, {"velocity", kNv}};
  }

  Humanoid(const Physics& physics, const Config&)
      : torso_(physics.id(mjOBJ_BODY, kCMU ? "thorax" : "torso")),
        head_(physics.id(mjOBJ_BODY, "head")),
        limbs_{physics.id(mjOBJ_BODY, kCMU ? "lhand" : "left_hand"),
               physics.id(mjOBJ_BODY, kCMU ? "lfoot" : "left_foot"),
               physics.id(mjOBJ_BODY, kCMU ? "rhand" : "right_hand"),
               physics.id(mjOBJ_BODY, kCMU ? "rfoot" : "right_foot")},
        com_velocity_(physics.sensor(kCMU ? "thorax_subtreelinvel" : "torso_subtreelinvel")) {
    if (physics.model()->nq != kNq || physics.model()->nu != kNu)
      throw std::invalid_argument("not the humanoid model");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    do {
      randomize_limited_and_rotational_joints(physics, random);
      physics.forward_without_actuation();
    } while (physics.data()->ncon > 0);
  }

  void observe(const Physics& physics, double* out) const {
    const mjData* d = physics.data();
    if (kPureState) {
      std::memcpy(out, d->qpos, kNq * sizeof(double));
      std::memcpy(out + kNq, d->qvel, kNv * sizeof(double));
      return;
    }
    std::memcpy(out, d->qpos + 7, kNu * sizeof(double));
    out += kNu;
    out[0] = d->xpos[3 * head_ + 2];
    const double* torso_pos = d->xpos + 3 * torso_;
    const double* torso_frame = d->xmat + 9 * torso_;
    for (int k = 0; k < 4; ++k) {  // (xpos limb - torso).dot(torso frame), hands then feet
      double to_limb[3];
      for (int i = 0; i < 3; ++i) to_limb[i] = d->xpos[3 * limbs_[k] + i] - torso_pos[i];
      np_vecmat(to_limb, torso_frame, 3, 3, out + 1 + 3 * k);
    }
    out[13] = torso_frame[6];  // zx, zy, zz
    out[14] = torso_frame[7];
    out[15] = torso_frame[8];
    for (int i = 0; i < 3; ++i) out[16 + i] = d->sensordata[com_velocity_ + i];
    std::memcpy(out + 19, d->qvel, kNv * sizeof(double));
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double inf = std::numeric_limits<double>::infinity();
    const double standing = tolerance(d->xpos[3 * head_ + 2], kStandHeight, inf, kStandHeight / 4);
    const double upright =
        tolerance(d->xmat[9 * torso_ + (kCMU ? 7 : 8)], 0.9, inf, 1.9, Sigmoid::kLinear, 0.0);
    const double stand_reward = standing * upright;
    double controls[kNu];
    for (int i = 0; i < kNu; ++i)
      controls[i] = tolerance(d->ctrl[i], 0.0, 0.0, 1.0, Sigmoid::kQuadratic, 0.0, true);
    const double small_control = (4 + pairwise_sum(controls, kNu) / static_cast<double>(kNu)) / 5;
    const double* com_velocity = d->sensordata + com_velocity_;
    if (kMoveSpeed == 0) {
      double still[2];
      for (int i = 0; i < 2; ++i)
        still[i] = tolerance(com_velocity[i], 0.0, 0.0, 2.0, Sigmoid::kGaussian, .1, true);
      const double dont_move = pairwise_sum(still, 2) / 2.0;
      return small_control * stand_reward * dont_move;
    }
    const double speed = np_norm(com_velocity, 2);
    const double move = (5 * tolerance(speed, kMoveSpeed, inf, kMoveSpeed, Sigmoid::kLinear, 0.0) + 1) / 6;
    return small_control * stand_reward * move;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  static constexpr double kStandHeight = 1.4;
  int torso_, head_;
  int limbs_[4];
  int com_velocity_;
};

using HumanoidStand = Dmc<Humanoid<0>>;
using HumanoidWalk = Dmc<Humanoid<1>>;
using HumanoidRun = Dmc<Humanoid<10>>;
using HumanoidRunPureState = Dmc<Humanoid<10, true>>;
AIOPOOL_REGISTER_ENV("dmc/humanoid-stand", HumanoidStand, 0);
AIOPOOL_REGISTER_ENV("dmc/humanoid-walk", HumanoidWalk, 0);
AIOPOOL_REGISTER_ENV("dmc/humanoid-run", HumanoidRun, 0);
AIOPOOL_REGISTER_ENV("dmc/humanoid-run_pure_state", HumanoidRunPureState, 0);
using HumanoidCMUStand = Dmc<Humanoid<0, false, true>>;
using HumanoidCMUWalk = Dmc<Humanoid<1, false, true>>;
using HumanoidCMURun = Dmc<Humanoid<10, false, true>>;
AIOPOOL_REGISTER_ENV("dmc/humanoid_CMU-stand", HumanoidCMUStand, 0);
AIOPOOL_REGISTER_ENV("dmc/humanoid_CMU-walk", HumanoidCMUWalk, 0);
AIOPOOL_REGISTER_ENV("dmc/humanoid_CMU-run", HumanoidCMURun, 0);

}  // namespace aiopool::dmc
