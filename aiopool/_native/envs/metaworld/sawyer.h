// What Meta-World 3.1.1 does for every v3 task (metaworld/sawyer_xyz_env.py: SawyerMocapBase,
// SawyerXYZEnv; metaworld/__init__.py: the MT1 benchmark's tasks; metaworld/wrappers.py:
// RandomTaskSelectWrapper), on the MuJoCo aiopool pins (3.17.0). A task header (reach.h, ...)
// adds its model file, its task-vector space, its reset and its reward.
//
// The model: the task's MJCF from the installed metaworld package (`assets_dir`, filled at make()
// by aiopool/_native/families.py; nothing of Meta-World's is copied here), loaded once per file
// and shared read-only by every env built from it, with its mocap welds reset as
// SawyerMocapBase.reset_mocap_welds resets them. MuJoCo 3.17.0's weld has 12 eq_data numbers where
// 3.3.0's (Meta-World's pin) had 11, and the reference's own line fails to broadcast; the
// parity tests patch it to write the first 11, `eq_data[i][:11] = ...`, and so does this loader.
//
// Episodes, as `gym.make("Meta-World/MT1", env_name=<task>, seed=s)` runs them:
// - The 50 task vectors are MT1(task, seed=s)'s: legacy np.random seeded s (RandomState),
//   each of 50 env.reset() calls running the task's reset_model twice (SawyerXYZEnv.reset, then
//   MujocoEnv.reset), each drawing `uniform(low, high)` until the task's predicate holds; a task
//   is the second vector. No physics is involved, so they are computed directly, at the first
//   reset after a seed.
// - Each reset first picks a task, `np_random.choice(50)` from the env's own PCG64 (env.seed(s):
//   the pool's Rng), then mj_resetData, the task's reset_model (the hand's 50 x 5 mj_steps with
//   the mocap held at hand_init_pos, then the task's object placement) and the unclipped first
//   observation, whose previous-frame part is its own first 18 numbers. (The reference runs
//   reset_model once more before mj_resetData; mj_resetData wipes its physics.)
// - A step moves the mocap by clip(a[:3], -1, 1) * 0.01 (float32 arithmetic, as numpy's NEP 50
//   gives), clipped to the mocap bounds, sets the gripper's ctrl to (a[3], -a[3]), runs 5 mj_steps
//   and mj_rnePostConstraint, then mj_forward; the 39 numbers are clipped to the observation
//   space and the task scores them. Truncation at 500 is the registry's time limit.
// - A re-seed (`reset(seed=k)`) is a fresh `gym.make(..., seed=k)`: new task vectors and a new
//   choice stream (the reference ignores reset's seed; its make takes it). Without any integer
//   seed (seed=None) the vectors come from RandomState seeded with a draw of the env's stream.
//
// Errors: MuJoCo errors are trapped as the MuJoCo family traps them (../mujoco/errors.h): the
// episode ends there (truncated, reward 0) and the message is the env's error.
#pragma once

#include <mujoco/mujoco.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../numpy_math.h"
#include "../../random_state.h"
#include "../../registry.h"
#include "../mujoco/errors.h"

namespace aiopool::metaworld {

using mujoco::trapped;
using Vec3 = std::array<double, 3>;

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr int kObsSize = 39;
inline constexpr int kFrameSkip = 5;
inline constexpr int kNumTasks = 50;  // metaworld's _N_GOALS

// np.clip(x, lo, hi) on float64: NaN passes through.
inline double clip(double x, double lo, double hi) {
  if (std::isnan(x)) return x;
  const double m = x > lo ? x : lo;
  return m < hi ? m : hi;
}

// np.linalg.norm(a - b) of 3-vectors.
inline double dist3(const double* a, const double* b) {
  const double v[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
  return np_norm(v, 3);
}

// scipy's Rotation.from_matrix(m).as_quat() (scalar last) for a row-major rotation matrix that
// passes scipy's orthogonality check (MuJoCo's xmat does): Shepperd's choice, then normalized.
inline std::array<double, 4> quat_from_matrix(const double* m) {
  const auto at = [m](int i, int j) { return m[3 * i + j]; };
  const double trace = at(0, 0) + at(1, 1) + at(2, 2);
  const double decision[4] = {at(0, 0), at(1, 1), at(2, 2), trace};
  int choice = 0;
  for (int i = 1; i < 4; ++i)
    if (decision[i] > decision[choice]) choice = i;
  std::array<double, 4> q{};
  if (choice != 3) {
    const int i = choice, j = (i + 1) % 3, k = (j + 1) % 3;
    q[static_cast<std::size_t>(i)] = 1 - trace + 2 * at(i, i);
    q[static_cast<std::size_t>(j)] = at(j, i) + at(i, j);
    q[static_cast<std::size_t>(k)] = at(k, i) + at(i, k);
    q[3] = at(k, j) - at(j, k);
  } else {
    q[0] = at(2, 1) - at(1, 2);
    q[1] = at(0, 2) - at(2, 0);
    q[2] = at(1, 0) - at(0, 1);
    q[3] = 1 + trace;
  }
  const double norm = std::sqrt((q[0] * q[0] + q[1] * q[1] + q[2] * q[2]) + q[3] * q[3]);
  for (double& x : q) x /= norm;
  return q;
}

// ---- metaworld.utils.reward_utils -------------------------------------------------------------

// `s ** 2` on a np.float64 scalar: numpy's scalar power calls libm's pow, which rounds some
// squares otherwise than s * s does (and than np.square); the exponent is read at run time so
// that the compiler cannot fold the call into s * s.
inline double scalar_square(double s) {
  static volatile double two = 2.0;
  return std::pow(s, two);
}

// tolerance(x, bounds=(lower, upper), margin, sigmoid="long_tail") at value_at_margin 0.1; its
// distance is a np.float64 scalar, squared with `**`.
inline double tolerance_long_tail(double x, double lower, double upper, double margin) {
  const bool in_bounds = lower <= x && x <= upper;
  if (margin == 0) return in_bounds ? 1.0 : 0.0;
  const double d = (x < lower ? lower - x : x - upper) / margin;
  const double scale = std::sqrt(1 / 0.1 - 1);
  return in_bounds ? 1.0 : 1 / (scalar_square(d * scale) + 1);
}

// ---- the model --------------------------------------------------------------------------------

// The task's MJCF, loaded once per path, its mocap welds reset (see the top of this file).
inline std::shared_ptr<const mjModel> load_sawyer_model(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const mjModel>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = cache[path].lock()) return m;
  char error[1024] = "";
  mjModel* raw = mj_loadXML(path.c_str(), nullptr, error, sizeof error);
  if (raw == nullptr) throw std::invalid_argument("MuJoCo could not load " + path + ": " + error);
  if (raw->nmocap > 0) {
    static constexpr double kWeld[11] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0};
    for (int i = 0; i < raw->neq; ++i)
      if (raw->eq_type[i] == mjEQ_WELD) std::memcpy(raw->eq_data + i * mjNEQDATA, kWeld, sizeof kWeld);
  }
  std::shared_ptr<const mjModel> m(raw, [](const mjModel* p) { mj_deleteModel(const_cast<mjModel*>(p)); });
  cache[path] = m;
  return m;
}

// ---- the task's constants -----------------------------------------------------------------------

// What a task class sets in its __init__ (the parts the base reads).
struct TaskConfig {
  const char* xml;                          // the MJCF under assets/, as the class's model_name names it
  Vec3 hand_low, hand_high;                 // the mocap's bounds (mocap_low/high default to these)
  Vec3 hand_init_pos;                       // init_config["hand_init_pos"]
  Vec3 goal_low, goal_high;                 // goal_space: the goal's observation bounds in MT1
  std::vector<double> rand_low, rand_high;  // _random_reset_space
};

// The seven info keys every v3 task gives, in the reference's order.
struct TaskInfo {
  double success = 0, near_object = 0, grasp_success = 0, grasp_reward = 0, in_place_reward = 0,
         obj_to_target = 0, unscaled_reward = 0;
};

inline std::vector<Field> info_fields() {
  std::vector<Field> f;
  for (const char* name : {"success", "near_object", "grasp_success", "grasp_reward", "in_place_reward",
                           "obj_to_target", "unscaled_reward"})
    f.push_back({name, DType::kFloat64, {}});
  return f;
}

// reach's, push's and pick-place's reset_model loop: the object's xy (v[0:2]) within 0.15 of the
// goal's (v[3:5]) draws again.
inline bool xy_within_015(const double* v) {
  const double gap[2] = {v[0] - v[3], v[1] - v[4]};
  return np_norm(gap, 2) < 0.15;
}

// ---- the env base -----------------------------------------------------------------------------

class Sawyer {
 public:
  using Action = float;

  // `assets_dir` is prepared at make() (families.py); users never set it.
  static std::vector<ConfigKey> config_keys() { return {{"assets_dir", ConfigKey::Kind::kString, 0.0, ""}}; }

  // SawyerXYZEnv's action space and the observation space it clips to once set_task made the
  // goal observable (MT1): the hand within _HAND_SPACE, the gripper within [-1, 1], the objects
  // unbounded, twice (this frame, the previous), then the goal within goal_space.
  static EnvSpec make_spec(const TaskConfig& t) {
    EnvSpec s;
    std::vector<double> low, high;
    for (int frame = 0; frame < 2; ++frame) {
      low.insert(low.end(), {-0.525, 0.348, -0.0525, -1.0});
      high.insert(high.end(), {0.525, 1.025, 0.7, 1.0});
      low.insert(low.end(), 14, -kInf);
      high.insert(high.end(), 14, kInf);
    }
    low.insert(low.end(), t.goal_low.begin(), t.goal_low.end());
    high.insert(high.end(), t.goal_high.begin(), t.goal_high.end());
    s.observation_space = {Space::Kind::kBox, DType::kFloat64, {kObsSize}, low, high, 0};
    s.action_space = {Space::Kind::kBox,
                      DType::kFloat32,
                      {4},
                      std::vector<double>(4, -1.0),
                      std::vector<double>(4, 1.0),
                      0};
    s.info = info_fields();
    s.rejects_nan_actions = false;                      // NaN goes to MuJoCo, as the reference passes it
    s.max_seed = std::numeric_limits<uint32_t>::max();  // np.random.seed's range
    return s;
  }

  static std::string model_path(const Config& c, const TaskConfig& t) {
    const std::string& dir = c.get_string("assets_dir");
    if (dir.empty())
      throw std::invalid_argument("assets_dir is empty: make() fills it with metaworld's assets");
    return dir + "/" + t.xml;
  }

  Sawyer(const Config& c, const TaskConfig& t)
      : task(t),
        model_(load_sawyer_model(model_path(c, t))),
        data_(mj_makeData(model_.get()), &mj_deleteData),
        m(model_.get()),
        d(data_.get()) {
    if (d == nullptr) throw std::invalid_argument("MuJoCo could not allocate data for " + model_path(c, t));
    mocap_id_ = m->body_mocapid[body("mocap")];
    hand_ = body("hand");
    right_claw_ = body("rightclaw");
    left_claw_ = body("leftclaw");
    right_tip_ = site("rightEndEffector");
    left_tip_ = site("leftEndEffector");
    const EnvSpec s = make_spec(t);
    std::copy(s.observation_space.low.begin(), s.observation_space.low.end(), obs_low_.begin());
    std::copy(s.observation_space.high.begin(), s.observation_space.high.end(), obs_high_.begin());
    if (mocap_id_ < 0)
      throw std::invalid_argument(std::string(t.xml) + ": the body 'mocap' is not a mocap body");
  }

  std::string error() const {
    std::lock_guard<std::mutex> lock(*error_mu_);
    return error_;
  }
  bool failed() const { return failed_; }

  void write(Row& row) const {
    std::memcpy(row.obs_as<double>(), obs_.data(), sizeof obs_);
    const double values[7] = {info_.success,        info_.near_object,     info_.grasp_success,
                              info_.grasp_reward,   info_.in_place_reward, info_.obj_to_target,
                              info_.unscaled_reward};
    for (std::size_t k = 0; k < 7; ++k) *row.info_as<double>(k) = values[k];
  }

 protected:
  int body(const char* name) const {
    const int id = mj_name2id(m, mjOBJ_BODY, name);
    if (id < 0) throw std::invalid_argument(std::string(task.xml) + " has no body '" + name + "'");
    return id;
  }
  int site(const char* name) const {
    const int id = mj_name2id(m, mjOBJ_SITE, name);
    if (id < 0) throw std::invalid_argument(std::string(task.xml) + " has no site '" + name + "'");
    return id;
  }
  int geom(const char* name) const {
    const int id = mj_name2id(m, mjOBJ_GEOM, name);
    if (id < 0) throw std::invalid_argument(std::string(task.xml) + " has no geom '" + name + "'");
    return id;
  }

  // RandomTaskSelectWrapper's pick, after MT1's tasks for the env's current seed; returns the
  // task vector. Then mj_resetData.
  const double* begin_reset(Rng& rng) {
    const int64_t seed = rng.take_seed();
    if (seed >= 0 || tasks_.empty()) make_tasks(seed >= 0 ? static_cast<uint32_t>(seed) : rng.next_uint32());
    const std::size_t pick = static_cast<std::size_t>(rng.integers(kNumTasks));
    mj_resetData(m, d);
    failed_ = false;
    info_ = {};
    return tasks_.data() + pick * task.rand_low.size();
  }

  // The reset's first observation: unclipped, its previous frame its own first 18 numbers.
  template <class Objects>
  void end_reset(Objects objects) {
    current(objects, obs_.data());
    std::memcpy(obs_.data() + 18, obs_.data(), 18 * sizeof(double));
    std::memcpy(obs_.data() + 36, target_pos.data(), sizeof target_pos);
    std::memcpy(prev_.data(), obs_.data(), sizeof prev_);
  }

  // SawyerXYZEnv._reset_hand: 50 x (mocap held at hand_init_pos, gripper open, 5 mj_steps), then
  // init_tcp.
  void reset_hand() {
    for (int k = 0; k < 50 && !failed_; ++k) {
      for (int j = 0; j < 3; ++j)
        d->mocap_pos[3 * mocap_id_ + j] = task.hand_init_pos[static_cast<std::size_t>(j)];
      set_mocap_quat();
      simulate(-1.0, 1.0);
    }
    init_tcp = tcp_center();
  }

  // SawyerXYZEnv._set_obj_xyz: the free object's position, its velocity zeroed, mj_forward.
  void set_obj_xyz(const double* pos) {
    std::memcpy(d->qpos + 9, pos, 3 * sizeof(double));
    for (int j = 9; j < 15; ++j) d->qvel[j] = 0;
    forward();
  }

  // The step up to the observation: set_xyz_action, do_simulation, mj_forward; then the
  // clipped observation, which the task scores.
  template <class Objects>
  bool step_physics(const Action* a, Objects objects) {
    for (int j = 0; j < 3; ++j) {
      const float clipped = std::isnan(a[j]) ? a[j] : std::fmin(std::fmax(a[j], -1.0f), 1.0f);
      const float delta = clipped * 0.01f;  // float32 * weak Python float: float32
      double pos = d->mocap_pos[3 * mocap_id_ + j] + static_cast<double>(delta);
      pos =
          clip(pos, task.hand_low[static_cast<std::size_t>(j)], task.hand_high[static_cast<std::size_t>(j)]);
      d->mocap_pos[3 * mocap_id_ + j] = pos;
    }
    set_mocap_quat();
    simulate(static_cast<double>(a[3]), static_cast<double>(-a[3]));
    if (!failed_) forward();
    if (failed_) {
      mj_resetData(m, d);  // the state after an error is undefined: start the next one clean
      info_ = {};
      return false;
    }
    double now[18];
    current(objects, now);
    std::memcpy(obs_.data(), now, sizeof now);
    std::memcpy(obs_.data() + 18, prev_.data(), sizeof prev_);
    std::memcpy(obs_.data() + 36, target_pos.data(), sizeof target_pos);
    std::memcpy(prev_.data(), now, sizeof now);
    for (std::size_t i = 0; i < kObsSize; ++i) obs_[i] = clip(obs_[i], obs_low_[i], obs_high_[i]);
    return true;
  }

  // tcp_center: the mean of the two finger tips' sites.
  Vec3 tcp_center() const {
    Vec3 c;
    for (int j = 0; j < 3; ++j)
      c[static_cast<std::size_t>(j)] =
          (d->site_xpos[3 * right_tip_ + j] + d->site_xpos[3 * left_tip_ + j]) / 2.0;
    return c;
  }

 public:
  TaskConfig task;

 private:
  std::shared_ptr<const mjModel> model_;
  std::unique_ptr<mjData, void (*)(mjData*)> data_;

 protected:
  const mjModel* m;
  mjData* d;
  Vec3 target_pos{};  // _target_pos
  Vec3 init_tcp{};
  std::array<double, kObsSize> obs_{};
  TaskInfo info_;

 private:
  std::vector<double> tasks_;  // kNumTasks task vectors of rand_low.size() numbers
  std::array<double, 18> prev_{};
  std::array<double, kObsSize> obs_low_{}, obs_high_{};  // the observation space's bounds
  int mocap_id_ = -1, hand_ = -1, right_claw_ = -1, left_claw_ = -1, right_tip_ = -1, left_tip_ = -1;
  bool failed_ = false;
  std::unique_ptr<std::mutex> error_mu_ = std::make_unique<std::mutex>();
  std::string error_;

  // MT1's _make_tasks: 50 env.reset() calls, each running reset_model twice; a task is the
  // second accepted draw. `redraw_`, set by the task class, is its rejection predicate.
  void make_tasks(uint32_t seed);

  void set_mocap_quat() {
    static constexpr double kQuat[4] = {1, 0, 1, 0};
    std::memcpy(d->mocap_quat + 4 * mocap_id_, kQuat, sizeof kQuat);
  }

  // gymnasium's do_simulation: ctrl, 5 mj_steps, mj_rnePostConstraint.
  void simulate(double right, double left) {
    d->ctrl[0] = right;
    d->ctrl[1] = left;
    const mjModel* mm = m;
    mjData* dd = d;
    if (!trapped([mm, dd] {
          for (int k = 0; k < kFrameSkip; ++k) mj_step(mm, dd);
          mj_rnePostConstraint(mm, dd);
        }))
      record_error();
  }

  void forward() {
    const mjModel* mm = m;
    mjData* dd = d;
    if (!trapped([mm, dd] { mj_forward(mm, dd); })) record_error();
  }

  void record_error() {
    failed_ = true;
    std::lock_guard<std::mutex> lock(*error_mu_);
    error_ = mujoco::t_trap.message;
  }

  // _get_curr_obs_combined_no_goal: the hand, the gripper's opening, the objects' (pos, quat)
  // zero-padded to 14. `objects(out)` writes the task's objects and returns how many numbers.
  template <class Objects>
  void current(Objects objects, double* out) const {
    std::memcpy(out, d->xpos + 3 * hand_, 3 * sizeof(double));
    out[3] = clip(dist3(d->xpos + 3 * right_claw_, d->xpos + 3 * left_claw_) / 0.1, 0.0, 1.0);
    double* obj = out + 4;
    std::fill(obj, obj + 14, 0.0);
    objects(obj);
  }

 protected:
  // Set by the task class: its rejection predicate over a task vector (true: draw again).
  bool (*redraw_)(const double* v) = nullptr;
};

inline void Sawyer::make_tasks(uint32_t seed) {
  const std::size_t n = task.rand_low.size();
  RandomState random;
  random.seed(seed);
  std::vector<double> v(n);
  auto draw = [&] {
    do
      for (std::size_t k = 0; k < n; ++k) v[k] = random.uniform(task.rand_low[k], task.rand_high[k]);
    while (redraw_ != nullptr && redraw_(v.data()));
  };
  tasks_.clear();
  for (int t = 0; t < kNumTasks; ++t) {
    draw();  // SawyerXYZEnv.reset's reset_model
    draw();  // MujocoEnv.reset's reset_model: the task
    tasks_.insert(tasks_.end(), v.begin(), v.end());
  }
}

}  // namespace aiopool::metaworld
