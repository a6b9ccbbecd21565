// dmc/quadruped-{walk, run}: dm_control's quadruped domain (suite/quadruped.py), bit for bit;
// dm_control builds the model (a floor sized for the task, no terrain, walls or ball). A reset
// draws an orientation (randn(4) normalised) and lowers the body from the floor up in 1 cm steps
// until nothing touches (each try a reset_context); the observation is the hinges' positions
// and velocities with the actuators' activations, the torso's velocity and uprightness, the IMU
// and the feet's force/torque sensors (np.arcsinh); the reward is upright times moving faster
// than 0.5 (walk) or 5 (run).
#pragma once

#include <limits>
#include <vector>

#include "dmc.h"

namespace aiopool::dmc {

template <int kTenthsSpeed>  // desired speed x 10: 5 walk, 50 run
class Quadruped {
 public:
  static constexpr double kTimeLimit = 20.0;
  static std::vector<ConfigKey> task_keys() { return {}; }
  static std::vector<Part> parts(const Config&) {
    return {{"egocentric_state", 44},
            {"torso_velocity", 3},
            {"torso_upright", 0},
            {"imu", 6},
            {"force_torque", 24}};
  }

  Quadruped(const Physics& physics, const Config&)
      : torso_(physics.id(mjOBJ_BODY, "torso")),
        root_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "root")]),
        velocimeter_(physics.sensor("velocimeter")) {
    const mjModel* m = physics.model();
    for (int j = 0; j < m->njnt; ++j)
      if (m->jnt_type[j] == mjJNT_HINGE) hinges_.push_back(j);
    // The sensors of these types, in id order, as dm_control's _get_sensor_names finds them.
    for (int s = 0; s < m->nsensor; ++s) {
      const int type = m->sensor_type[s];
      for (int k = 0; k < m->sensor_dim[s]; ++k) {
        if (type == mjSENS_GYRO || type == mjSENS_ACCELEROMETER) imu_.push_back(m->sensor_adr[s] + k);
        if (type == mjSENS_FORCE || type == mjSENS_TORQUE) force_torque_.push_back(m->sensor_adr[s] + k);
      }
    }
    if (hinges_.size() != 16 || m->na != 12 || imu_.size() != 6 || force_torque_.size() != 24)
      throw std::invalid_argument("not the quadruped model");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    double orientation[4] = {random.standard_normal(), random.standard_normal(), random.standard_normal(),
                             random.standard_normal()};
    const double norm = np_norm(orientation, 4);
    for (double& q : orientation) q /= norm;
    // _find_non_contacting_height(physics, orientation)
    double z = 0.0;
    int contacts = 1, attempts = 0;
    while (contacts > 0) {
      physics.reset();
      double* qpos = physics.data()->qpos + root_;
      qpos[0] = 0.0;
      qpos[1] = 0.0;
      qpos[2] = z;
      for (int i = 0; i < 4; ++i) qpos[3 + i] = orientation[i];
      physics.forward_without_actuation();  // a PhysicsError here is caught there
      contacts = physics.data()->ncon;
      z += 0.01;
      if (++attempts > 10000) throw std::runtime_error("Failed to find a non-contacting configuration.");
    }
  }

  void observe(const Physics& physics, double* out) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    for (int j : hinges_) *out++ = d->qpos[m->jnt_qposadr[j]];
    for (int j : hinges_) *out++ = d->qvel[m->jnt_dofadr[j]];
    for (int a = 0; a < m->na; ++a) *out++ = d->act[a];
    for (int i = 0; i < 3; ++i) *out++ = d->sensordata[velocimeter_ + i];
    *out++ = d->xmat[9 * torso_ + 8];
    for (int i : imu_) *out++ = d->sensordata[i];
    for (int i : force_torque_) *out++ = np_arcsinh(d->sensordata[i]);
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double inf = std::numeric_limits<double>::infinity();
    // _upright_reward: deviation cos(deg2rad(0)) = 1
    const double upright = tolerance(d->xmat[9 * torso_ + 8], 1.0, inf, 2.0, Sigmoid::kLinear, 0.0);
    const double speed = kTenthsSpeed / 10.0;
    const double move = tolerance(d->sensordata[velocimeter_], speed, inf, speed, Sigmoid::kLinear, 0.5);
    return upright * move;
  }

  bool terminated(const Physics&) const { return false; }

 private:
  int torso_, root_, velocimeter_;
  std::vector<int> hinges_, imu_, force_torque_;
};

using QuadrupedWalk = Dmc<Quadruped<5>>;
using QuadrupedRun = Dmc<Quadruped<50>>;
AIOPOOL_REGISTER_ENV("dmc/quadruped-walk", QuadrupedWalk, 0);
AIOPOOL_REGISTER_ENV("dmc/quadruped-run", QuadrupedRun, 0);

}  // namespace aiopool::dmc
