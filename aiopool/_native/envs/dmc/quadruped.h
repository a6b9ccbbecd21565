// dmc/quadruped-{walk, run, escape, fetch}: dm_control's quadruped domain (suite/quadruped.py),
// bit for bit; dm_control builds the model (walk, run: a floor sized for the task; escape: a
// heightfield terrain and rangefinders; fetch: walls and a ball). A walk / run reset draws an orientation
// (randn(4) normalised) and raises the body from inside the floor in 1 cm steps until nothing touches (each
// try a reset_context); the observation is the hinges' positions and velocities with the actuators'
// activations, the torso's velocity and uprightness, the IMU and the feet's force/torque sensors
// (np.arcsinh); the reward is upright times moving faster than 0.5 (walk) or 5 (run). Escape draws a new
// terrain at each reset (a bowl times random bumps smoothed by scipy's ndimage.zoom,
// spline_zoom.h) into the env's own model, observes the origin in the torso's frame and the
// rangefinders (np.tanh), and rewards being upright (within 20 degrees) and far from the origin. Fetch spawns
// the body at a random azimuth and place and throws the ball in; it observes the ball's state and the target
// in the torso's frame (numpy's BLAS products) and rewards reaching the ball, then bringing it to the target.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "dmc.h"
#include "spline_zoom.h"

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
        root_dof_(physics.model()->jnt_dofadr[physics.id(mjOBJ_JOINT, "root")]),
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
    find_non_contacting_height(physics, orientation, 0.0, 0.0);
  }

  // _find_non_contacting_height: up from inside the floor in 1 cm steps until nothing touches.
  void find_non_contacting_height(Physics& physics, const double (&orientation)[4], double x,
                                  double y) const {
    double z = 0.0;
    int contacts = 1, attempts = 0;
    while (contacts > 0) {
      physics.reset();
      double* qpos = physics.data()->qpos + root_;
      qpos[0] = x;
      qpos[1] = y;
      qpos[2] = z;
      for (int i = 0; i < 4; ++i) qpos[3 + i] = orientation[i];
      physics.forward_without_actuation();  // a PhysicsError here is caught there
      contacts = physics.data()->ncon;
      z += 0.01;
      if (++attempts > 10000) throw std::runtime_error("Failed to find a non-contacting configuration.");
    }
  }

  // _common_observations; returns the end of what it wrote.
  double* observe(const Physics& physics, double* out) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    for (int j : hinges_) *out++ = d->qpos[m->jnt_qposadr[j]];
    for (int j : hinges_) *out++ = d->qvel[m->jnt_dofadr[j]];
    for (int a = 0; a < m->na; ++a) *out++ = d->act[a];
    for (int i = 0; i < 3; ++i) *out++ = d->sensordata[velocimeter_ + i];
    *out++ = d->xmat[9 * torso_ + 8];
    for (int i : imu_) *out++ = d->sensordata[i];
    for (int i : force_torque_) *out++ = np_arcsinh(d->sensordata[i]);
    return out;
  }

  // _upright_reward(physics, deviation_angle): `deviation` is np.cos(np.deg2rad(angle)), 1 for
  // the default 0 degrees.
  double upright(const Physics& physics, double deviation = 1.0) const {
    const double inf = std::numeric_limits<double>::infinity();
    return tolerance(physics.data()->xmat[9 * torso_ + 8], deviation, inf, 1 + deviation, Sigmoid::kLinear,
                     0.0);
  }

  double reward(const Physics& physics) const {
    const mjData* d = physics.data();
    const double inf = std::numeric_limits<double>::infinity();
    const double upright = this->upright(physics);
    const double speed = kTenthsSpeed / 10.0;
    const double move = tolerance(d->sensordata[velocimeter_], speed, inf, speed, Sigmoid::kLinear, 0.5);
    return upright * move;
  }

  bool terminated(const Physics&) const { return false; }

 protected:
  int torso_, root_dof_, root_, velocimeter_;
  std::vector<int> hinges_, imu_, force_torque_;
};

// Fetch: bring the ball to the target at the arena's centre.
class QuadrupedFetchTask : public Quadruped<0> {
 public:
  static std::vector<Part> parts(const Config& config) {
    auto parts = Quadruped<0>::parts(config);
    parts.push_back({"ball_state", 9});
    parts.push_back({"target_position", 3});
    return parts;
  }

  QuadrupedFetchTask(const Physics& physics, const Config& config)
      : Quadruped<0>(physics, config),
        ball_(physics.id(mjOBJ_BODY, "ball")),
        ball_qpos_(physics.model()->jnt_qposadr[physics.id(mjOBJ_JOINT, "ball_root")]),
        ball_dof_(physics.model()->jnt_dofadr[physics.id(mjOBJ_JOINT, "ball_root")]),
        workspace_(physics.id(mjOBJ_SITE, "workspace")),
        target_(physics.id(mjOBJ_SITE, "target")) {
    const mjModel* m = physics.model();
    floor_size_ = m->geom_size[3 * physics.id(mjOBJ_GEOM, "floor")];
    ball_radius_ = m->geom_size[3 * physics.id(mjOBJ_GEOM, "ball")];
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    const double azimuth = random.uniform(0.0, 2 * std::numbers::pi);
    const double orientation[4] = {np_cos(azimuth / 2), 0.0, 0.0, np_sin(azimuth / 2)};
    const double spawn_radius = 0.9 * floor_size_;
    const double x = random.uniform(-spawn_radius, spawn_radius);
    const double y = random.uniform(-spawn_radius, spawn_radius);
    find_non_contacting_height(physics, orientation, x, y);
    mjData* d = physics.data();
    d->qpos[ball_qpos_] = random.uniform(-spawn_radius, spawn_radius);
    d->qpos[ball_qpos_ + 1] = random.uniform(-spawn_radius, spawn_radius);
    d->qpos[ball_qpos_ + 2] = 2;
    d->qvel[ball_dof_] = 5 * random.standard_normal();
    d->qvel[ball_dof_ + 1] = 5 * random.standard_normal();
  }

  void observe(const Physics& physics, double* out) const {
    out = Quadruped<0>::observe(physics, out);
    const mjData* d = physics.data();
    const double* torso_frame = d->xmat + 9 * torso_;
    const double* torso = d->xpos + 3 * torso_;
    double state[9];  // np.vstack((ball_rel_pos, ball_rel_vel, ball_rot_vel)).dot(torso_frame)
    for (int i = 0; i < 3; ++i) {
      state[i] = d->xpos[3 * ball_ + i] - torso[i];
      state[3 + i] = d->qvel[ball_dof_ + i] - d->qvel[root_dof_ + i];
      state[6 + i] = d->qvel[ball_dof_ + 3 + i];
    }
    np_matmul(state, torso_frame, 3, 3, 3, out);
    double to_target[3];
    for (int i = 0; i < 3; ++i) to_target[i] = d->site_xpos[3 * target_ + i] - torso[i];
    np_vecmat(to_target, torso_frame, 3, 3, out + 9);
  }

  double reward(const Physics& physics) const {
    const mjModel* m = physics.model();
    const mjData* d = physics.data();
    const double arena_radius = floor_size_ * std::sqrt(2.0);
    const double workspace_radius = m->site_size[3 * workspace_];
    double to_ball[2], ball_to_target[2];
    for (int i = 0; i < 2; ++i) {
      to_ball[i] = d->site_xpos[3 * workspace_ + i] - d->xpos[3 * ball_ + i];
      ball_to_target[i] = d->site_xpos[3 * target_ + i] - d->xpos[3 * ball_ + i];
    }
    const double reach = tolerance(np_norm(to_ball, 2), 0.0, workspace_radius + ball_radius_, arena_radius,
                                   Sigmoid::kLinear, 0.0);
    const double fetch = tolerance(np_norm(ball_to_target, 2), 0.0, m->site_size[3 * target_], arena_radius,
                                   Sigmoid::kLinear, 0.0);
    return upright(physics) * (reach * (0.5 + 0.5 * fetch));
  }

 private:
  int ball_, ball_qpos_, ball_dof_, workspace_, target_;
  double floor_size_ = 0.0, ball_radius_ = 0.0;
};

// Escape: out of a bowl of random bumps, the terrain drawn at each reset.
class QuadrupedEscapeTask : public Quadruped<0> {
 public:
  static constexpr int kRangefinders = 20;
  static std::vector<Part> parts(const Config& config) {
    auto parts = Quadruped<0>::parts(config);
    parts.push_back({"origin", 3});
    parts.push_back({"rangefinder", kRangefinders});
    return parts;
  }

  QuadrupedEscapeTask(const Physics& physics, const Config& config)
      : Quadruped<0>(physics, config),
        workspace_(physics.id(mjOBJ_SITE, "workspace")),
        deviation_(np_cos(20 * (std::numbers::pi / 180))) {  // np.cos(np.deg2rad(20))
    const mjModel* m = physics.model();
    for (int s = 0; s < m->nsensor; ++s)
      if (m->sensor_type[s] == mjSENS_RANGEFINDER) rangefinders_.push_back(m->sensor_adr[s]);
    if (m->nhfield < 1 || m->hfield_nrow[0] != m->hfield_ncol[0] || rangefinders_.size() != kRangefinders)
      throw std::invalid_argument("not the quadruped escape model");
    // The sinusoidal bowl: np.ogrid[-1:1:res*1j] (i * step + -1), radius clipped to [.04, 1].
    res_ = m->hfield_nrow[0];
    const double step = 2 / static_cast<double>(res_ - 1);
    std::vector<double> grid(res_);
    for (int i = 0; i < res_; ++i) grid[i] = static_cast<double>(i) * step + -1.0;
    bowl_.resize(static_cast<std::size_t>(res_) * res_);
    for (int i = 0; i < res_; ++i)
      for (int j = 0; j < res_; ++j) {
        const double radius = std::clamp(std::sqrt(grid[j] * grid[j] + grid[i] * grid[i]), 0.04, 1.0);
        bowl_[static_cast<std::size_t>(i) * res_ + j] = 0.5 - np_cos(2 * std::numbers::pi * radius) / 2;
      }
    const double terrain_size = 2 * m->hfield_size[0];
    bump_res_ = static_cast<int>(terrain_size / 2);  // _TERRAIN_BUMP_SCALE: 2 m
    if (SplineZoom::output_size(bump_res_, res_ / static_cast<double>(bump_res_)) != res_)
      throw std::invalid_argument("the escape terrain's bumps do not zoom to its heightfield");
  }

  void initialize_episode(Physics& physics, RandomState& random) const {
    std::vector<double> bumps(static_cast<std::size_t>(bump_res_) * bump_res_);
    for (double& b : bumps) b = random.uniform(0.15, 1.0);  // _TERRAIN_SMOOTHNESS
    std::vector<double> smooth(bowl_.size());
    SplineZoom::zoom(bumps.data(), bump_res_, bump_res_, res_ / static_cast<double>(bump_res_),
                     smooth.data());
    mjModel* m = physics.model();
    float* hfield = m->hfield_data + m->hfield_adr[0];
    for (std::size_t i = 0; i < bowl_.size(); ++i) hfield[i] = static_cast<float>(bowl_[i] * smooth[i]);
    Quadruped<0>::initialize_episode(physics, random);
  }

  void observe(const Physics& physics, double* out) const {
    out = Quadruped<0>::observe(physics, out);
    const mjData* d = physics.data();
    np_vecmat(d->xpos + 3 * torso_, d->xmat + 9 * torso_, 3, 3, out);  // -torso_pos.dot(torso_frame)
    for (int i = 0; i < 3; ++i) out[i] = -out[i];
    out += 3;
    for (int adr : rangefinders_) {
      const double r = d->sensordata[adr];
      *out++ = r == -1.0 ? 1.0 : np_tanh(r);  // -1: no intersection
    }
  }

  double reward(const Physics& physics) const {
    const double inf = std::numeric_limits<double>::infinity();
    const double half_size = physics.model()->hfield_size[0];
    const double distance = np_norm(physics.data()->site_xpos + 3 * workspace_, 3);
    const double escape = tolerance(distance, half_size, inf, half_size, Sigmoid::kLinear, 0.0);
    return upright(physics, deviation_) * escape;
  }

 private:
  int workspace_, res_ = 0, bump_res_ = 0;
  double deviation_;
  std::vector<int> rangefinders_;
  std::vector<double> bowl_;
};

using QuadrupedWalk = Dmc<Quadruped<5>>;
using QuadrupedRun = Dmc<Quadruped<50>>;
using QuadrupedEscape = Dmc<QuadrupedEscapeTask>;
using QuadrupedFetch = Dmc<QuadrupedFetchTask>;
AIOPOOL_REGISTER_ENV("dmc/quadruped-walk", QuadrupedWalk, 0);
AIOPOOL_REGISTER_ENV("dmc/quadruped-run", QuadrupedRun, 0);
AIOPOOL_REGISTER_ENV("dmc/quadruped-escape", QuadrupedEscape, 0);
AIOPOOL_REGISTER_ENV("dmc/quadruped-fetch", QuadrupedFetch, 0);

}  // namespace aiopool::dmc
