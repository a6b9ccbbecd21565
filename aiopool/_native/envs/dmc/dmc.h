// What dm_control's Control Suite (1.0.50) does for every task: control.Environment's episode
// loop, mujoco.Physics's step and reset, base.Task's action handling, numpy's legacy RandomState
// and dm_control.utils.rewards.tolerance. A domain header (cheetah.h, ...) adds its task's
// initialize_episode, observation and reward; `Dmc<Task>` makes it an aiopool env.
//
// The model: dm_control builds each task's model in Python (some in code: swimmer's links,
// cartpole's poles), so the registry asks dm_control itself at make() for the task's compiled
// model and saves it as MuJoCo's binary model (aiopool/_native/families.py, `_prepare_dmc`):
// `model_file` (the .mjb), `control_steps` (control.Environment's n_sub_steps) and `step_limit`
// (time_limit / control timestep) are config keys the registry fills and users never set. The
// same libmujoco as dm_control's (mujoco==3.17.0) then gives the same bits. Each env holds its
// own copy of the model: a reset switches actuation off in it (dm_control's
// `model.disable('actuation')`), and some tasks change it per episode.
//
// Episodes: a reset is physics.reset_context() (mj_resetData, mj_forward without actuation,
// the task's initialize_episode, mj_forward without actuation) and the first observation; a step
// sets ctrl to the action (float64, as np.copyto), steps the physics n_sub_steps times in
// dm_control's legacy way (mj_step2, mj_step n-1 times, mj_step1), and returns the task's reward
// and observation. control.Environment's step limit (`step_count >= step_limit`) is the pool's
// time limit, ceil(step_limit), so it ends episodes as truncated (dm_env: LAST, discount 1); a
// task's termination (discount 0) is `terminated`.
//
// Errors: dm_control raises PhysicsError when a MuJoCo warning (divergence, a bad control) comes
// during a step; here the episode ends there (truncated, reward 0) and the warning's name is the
// env's error (pool.env_error). A mju_error (mujoco.FatalError in Python) is trapped as the
// MuJoCo family traps it (../mujoco/errors.h) and ends the episode the same way; one during a
// reset (cheetah's 200 settling substeps, say) gives the model's reset state (mj_resetData) as
// the episode's first observation and ends the episode at its first step.
//
// Frames: physics.render(height, width, camera_id), drawn in C++ (../mujoco/offscreen.h's
// draw_dm_control) on the thread that asks, from each env's own model and data. Pixel
// observations (obs_type): "pixels" is dm_control's pixels.Wrapper (an OrderedDict of the frame
// under "pixels"), "state+pixels" its pixels_only=False (the task's observations, then
// "pixels"); frame_stack > 1 stacks each part as gymnasium's FrameStackObservation stacks a Dict.
#pragma once

#include <mujoco/mujoco.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../env.h"
#include "../../numpy_math.h"
#include "../../random_state.h"
#include "../../registry.h"
#include "../mujoco/errors.h"
#include "../mujoco/offscreen.h"

namespace aiopool::dmc {

using aiopool::RandomState;  // numpy's legacy RandomState (../../random_state.h)

// ---- dm_control.utils.rewards.tolerance, on a float64 scalar --------------------------------

enum class Sigmoid : uint8_t { kGaussian, kLinear, kQuadratic, kLongTail, kReciprocal };

inline double sigmoid(double x, double value_at_1, Sigmoid kind, bool element) {
  auto square = [element](double v) { return element ? v * v : pow2(v); };
  switch (kind) {
    case Sigmoid::kGaussian: {
      const double scale = std::sqrt(-2.0 * np_log(value_at_1));
      return np_exp(-0.5 * square(x * scale));
    }
    case Sigmoid::kLinear: {
      const double scaled = x * (1.0 - value_at_1);
      return std::fabs(scaled) < 1.0 ? 1.0 - scaled : 0.0;
    }
    case Sigmoid::kLongTail: {
      const double scale = std::sqrt(1 / value_at_1 - 1);
      return 1 / (square(x * scale) + 1);
    }
    case Sigmoid::kReciprocal: {
      const double scale = 1 / value_at_1 - 1;
      return 1 / (std::fabs(x) * scale + 1);
    }
    case Sigmoid::kQuadratic: {
      const double scaled = x * std::sqrt(1.0 - value_at_1);
      return std::fabs(scaled) < 1.0 ? 1.0 - square(scaled) : 0.0;
    }
  }
  return 0.0;
}

// tolerance(x, bounds=(lower, upper), margin, sigmoid, value_at_margin) for a scalar x, or
// with `element` for one element of an array x: numpy squares array elements (`a ** 2` is
// np.square, x * x) where a float64 scalar's `** 2` is libm's pow.
inline double tolerance(double x, double lower, double upper, double margin = 0.0,
                        Sigmoid kind = Sigmoid::kGaussian, double value_at_margin = 0.1,
                        bool element = false) {
  const bool in_bounds = lower <= x && x <= upper;
  if (margin == 0.0) return in_bounds ? 1.0 : 0.0;
  const double d = (x < lower ? lower - x : x - upper) / margin;
  return in_bounds ? 1.0 : sigmoid(d, value_at_margin, kind, element);
}

// ---- mujoco.Physics --------------------------------------------------------------------------

struct ModelDeleter {
  void operator()(mjModel* m) const { mj_deleteModel(m); }
};
struct DataDeleter {
  void operator()(mjData* d) const { mj_deleteData(d); }
};

// The task's compiled model, loaded once per file and shared read-only (envs copy it).
inline std::shared_ptr<const mjModel> load_model(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const mjModel>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<const mjModel>& slot = cache[path];
  std::shared_ptr<const mjModel> model = slot.lock();
  if (!model) {
    mjModel* m = mj_loadModel(path.c_str(), nullptr);
    if (m == nullptr) throw std::runtime_error("could not load the Control Suite model " + path);
    model = std::shared_ptr<const mjModel>(m, ModelDeleter());
    slot = model;
  }
  return model;
}

// A MuJoCo error (mju_error; mujoco.FatalError in Python) during a reset.
struct FatalError : std::runtime_error {
  explicit FatalError(const std::string& message) : std::runtime_error("mujoco.FatalError: " + message) {}
};

class Physics {
 public:
  // mj_copyModel and mj_makeData raise mju_error when memory runs out ("Could not allocate
  // memory"): trapped, as in a step, so the process lives on and make raises.
  explicit Physics(const mjModel* shared) {
    mjModel* m = nullptr;
    mjData* d = nullptr;
    const bool ok = mujoco::trapped([&] {
      m = mj_copyModel(nullptr, shared);
      if (m != nullptr) d = mj_makeData(m);
    });
    model_.reset(m);
    data_.reset(d);
    if (!ok) throw std::runtime_error(std::string("MuJoCo: ") + mujoco::t_trap.message);
    if (!model_ || !data_) throw std::runtime_error("MuJoCo: mj_copyModel / mj_makeData failed");
  }

  mjModel* model() { return model_.get(); }
  const mjModel* model() const { return model_.get(); }
  mjData* data() { return data_.get(); }
  const mjData* data() const { return data_.get(); }

  // reset(), forward_without_actuation() and step(n) are what a task's initialize_episode calls:
  // their MuJoCo calls run trapped (../mujoco/errors.h), and a MuJoCo error is thrown as a
  // FatalError once the trap has returned, so the task's own frames unwind as C++ frames do (a
  // longjmp through them would skip their destructors). An env step's physics runs in the env's
  // own trap instead (step_untrapped).

  // Physics.reset(): mj_resetData, then forward() without actuation.
  void reset() {
    mj_resetData(model_.get(), data_.get());
    forward_without_actuation();
  }
  // Physics.after_reset() / the actuation-free forward of a reset.
  void forward_without_actuation() {
    int& flags = model_->opt.disableflags;
    const int before = flags;
    flags |= mjDSBL_ACTUATION;
    const bool ok = mujoco::trapped([m = model_.get(), d = data_.get()] { mj_forward(m, d); });
    flags = before;
    if (!ok) throw FatalError(mujoco::t_trap.message);
  }
  // Physics.step(nstep) with legacy_step (dm_control's default).
  void step(int nstep) {
    if (!mujoco::trapped([this, nstep] { step_untrapped(nstep); })) throw FatalError(mujoco::t_trap.message);
  }
  // The same, for a caller that traps MuJoCo's errors itself.
  void step_untrapped(int nstep) {
    if (model_->opt.integrator != mjINT_RK4) {
      mj_step2(model_.get(), data_.get());
      for (int i = 1; i < nstep; ++i) mj_step(model_.get(), data_.get());
    } else {
      for (int i = 0; i < nstep; ++i) mj_step(model_.get(), data_.get());
    }
    mj_step1(model_.get(), data_.get());
  }

  // The warning counts, to tell whether MuJoCo warned during a call (check_invalid_state).
  std::array<int, mjNWARNING> warnings() const {
    std::array<int, mjNWARNING> w{};
    for (int i = 0; i < mjNWARNING; ++i) w[i] = data_->warning[i].number;
    return w;
  }

  // Where the sensor `name`'s values start in sensordata.
  int sensor(const char* name) const { return model_->sensor_adr[id(mjOBJ_SENSOR, name)]; }

  int id(mjtObj type, const char* name) const {
    const int i = mj_name2id(model_.get(), type, name);
    if (i < 0) throw std::invalid_argument(std::string("the model has no object named '") + name + "'");
    return i;
  }

 private:
  std::unique_ptr<mjModel, ModelDeleter> model_;
  std::unique_ptr<mjData, DataDeleter> data_;
};

inline const char* warning_name(int i) {
  switch (i) {
    case mjWARN_INERTIA:
      return "mjWARN_INERTIA";
    case mjWARN_CONTACTFULL:
      return "mjWARN_CONTACTFULL";
    case mjWARN_CNSTRFULL:
      return "mjWARN_CNSTRFULL";
    case mjWARN_BADQPOS:
      return "mjWARN_BADQPOS";
    case mjWARN_BADQVEL:
      return "mjWARN_BADQVEL";
    case mjWARN_BADQACC:
      return "mjWARN_BADQACC";
    case mjWARN_BADCTRL:
      return "mjWARN_BADCTRL";
    default:
      return "mjWARN_?";
  }
}

// suite.utils.randomizers.randomize_limited_and_rotational_joints: each joint in order; a
// limited hinge or slide uniformly in its range, an unlimited hinge in [-pi, pi), an unlimited
// ball's quaternion randn(4) normalised, an unlimited free joint's rand(4) normalised (its
// position kept), a limited ball's an axis randn(3) normalised and an angle rand() * limit.
inline void randomize_limited_and_rotational_joints(Physics& physics, RandomState& random) {
  const mjModel* m = physics.model();
  double* qpos = physics.data()->qpos;
  for (int j = 0; j < m->njnt; ++j) {
    double* q = qpos + m->jnt_qposadr[j];
    const int type = m->jnt_type[j];
    const double lo = m->jnt_range[2 * j], hi = m->jnt_range[2 * j + 1];
    auto normalized = [](double* v, int n) {  // v /= np.linalg.norm(v)
      const double norm = np_norm(v, static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) v[i] /= norm;
    };
    if (m->jnt_limited[j]) {
      if (type == mjJNT_HINGE || type == mjJNT_SLIDE) {
        q[0] = random.uniform(lo, hi);
      } else if (type == mjJNT_BALL) {
        double axis[3] = {random.standard_normal(), random.standard_normal(), random.standard_normal()};
        normalized(axis, 3);
        const double angle = random.random_sample() * hi;
        double quat[4] = {0, 0, 0, 0};
        mju_axisAngle2Quat(quat, axis, angle);
        std::memcpy(q, quat, sizeof quat);
      }
    } else if (type == mjJNT_HINGE) {
      q[0] = random.uniform(-std::numbers::pi, std::numbers::pi);
    } else if (type == mjJNT_BALL) {
      double quat[4] = {random.standard_normal(), random.standard_normal(), random.standard_normal(),
                        random.standard_normal()};
      normalized(quat, 4);
      std::memcpy(q, quat, sizeof quat);
    } else if (type == mjJNT_FREE) {
      double quat[4] = {random.random_sample(), random.random_sample(), random.random_sample(),
                        random.random_sample()};
      normalized(quat, 4);
      std::memcpy(q + 3, quat, sizeof quat);
    }
  }
}

// ---- the env ---------------------------------------------------------------------------------

// A task: its task kwargs (`task_keys()`: suite.load's task_kwargs beyond time_limit and
// random), its observation parts for a config (`parts(config)`: dm_control's OrderedDict, names
// and sizes), and
//   void initialize_episode(Physics&, RandomState&);
//   void observe(const Physics&, double* out);   // the parts, one after another
//   double reward(const Physics&) const;
//   bool terminated(const Physics&) const;       // get_termination() == 0.0 (most: never)
// built from (const Physics&, const Config&).
struct Part {
  std::string name;
  int64_t size;      // 0: a scalar (shape ())
  int64_t cols = 0;  // other than 0: a matrix (size, cols), row after row (stacker's arm_pos)
  int64_t count() const { return size == 0 ? 1 : cols == 0 ? size : size * cols; }
};

template <class Task>
class Dmc {
 public:
  using Action = double;

  static std::vector<ConfigKey> config_keys() {
    std::vector<ConfigKey> keys = {{"time_limit", ConfigKey::Kind::kFloat, Task::kTimeLimit},
                                   {"n_sub_steps", ConfigKey::Kind::kInt, 0.0},
                                   {"flat_observation", ConfigKey::Kind::kBool, 0.0},
                                   {"model_file", ConfigKey::Kind::kString, 0.0, ""},
                                   {"control_steps", ConfigKey::Kind::kInt, 1.0},
                                   {"step_limit", ConfigKey::Kind::kFloat, 0.0},
                                   {"obs_type", ConfigKey::Kind::kString, 0.0, "state"},
                                   {"frame_stack", ConfigKey::Kind::kInt, 1.0},
                                   {"render_width", ConfigKey::Kind::kInt, 320.0},
                                   {"render_height", ConfigKey::Kind::kInt, 240.0},
                                   {"render_camera_id", ConfigKey::Kind::kInt, -1.0}};
    for (const ConfigKey& k : Task::task_keys()) keys.push_back(k);
    return keys;
  }

  static EnvSpec spec(const Config& config) {
    EnvSpec s;
    const std::vector<Part> parts = state_parts(config);
    int64_t total = 0;
    for (const Part& p : parts) total += p.count();
    const double inf = std::numeric_limits<double>::infinity();
    const std::string& path = config.get_string("model_file");
    if (path.empty()) throw std::invalid_argument("the Control Suite envs are made through aiopool.make");
    const std::shared_ptr<const mjModel> m = load_model(path);
    const mujoco::RenderSettings r = render_settings(config, m.get());
    s.render_shape = {r.height, r.width, 3};
    s.render_fps = 1.0 / (m->opt.timestep * static_cast<double>(config.get_int("control_steps")));
    const ObsType type = obs_type(config);
    const int64_t k = type == ObsType::kState ? 1 : config.get_int("frame_stack");
    s.observation_space = {Space::Kind::kBox,
                           DType::kFloat64,
                           {total},
                           std::vector<double>(total, -inf),
                           std::vector<double>(total, inf)};
    if (type != ObsType::kState || !config.get_bool("flat_observation")) {
      s.obs_dict = true;
      for (const Part& p : type == ObsType::kPixels ? std::vector<Part>{} : parts) {
        const int64_t n = p.count() * k;
        std::vector<int64_t> shape;
        if (k > 1) shape.push_back(k);
        if (p.size != 0) shape.push_back(p.size);
        if (p.cols != 0) shape.push_back(p.cols);
        s.obs_parts.push_back({p.name,
                               {Space::Kind::kBox, DType::kFloat64, shape, std::vector<double>(n, -inf),
                                std::vector<double>(n, inf)}});
      }
    }
    if (type != ObsType::kState) {  // the frames after the state parts, in one byte row
      Space frames = mujoco::frames_space(k, r);
      s.observation_space = mujoco::byte_row((type == ObsType::kPixels ? 0 : total * k * 8) + frames.size());
      s.obs_parts.push_back({"pixels", std::move(frames)});
      s.state_obs_bytes = static_cast<std::size_t>(total) * sizeof(double);
    }
    std::vector<double> low(static_cast<std::size_t>(m->nu)), high(low.size());
    for (int i = 0; i < m->nu; ++i) {
      const bool limited = m->actuator_ctrllimited[i] != 0;
      low[i] = limited ? m->actuator_ctrlrange[2 * i] : -mjMAXVAL;  // dm_control's action_spec
      high[i] = limited ? m->actuator_ctrlrange[2 * i + 1] : mjMAXVAL;
    }
    s.action_space = {Space::Kind::kBox, DType::kFloat64, {m->nu}, low, high};
    const double limit = config.get("step_limit");
    s.max_episode_steps = std::isfinite(limit) && limit > 0 ? static_cast<int>(std::ceil(limit)) : 0;
    s.rejects_nan_actions = false;
    s.max_seed = std::numeric_limits<uint32_t>::max();  // RandomState's seeds
    return s;
  }

  explicit Dmc(const Config& config)
      : assets_(load_model(config.get_string("model_file"))),
        physics_(assets_.get()),
        task_(physics_, config),
        control_steps_(static_cast<int>(config.get_int("control_steps"))),
        render_(render_settings(config, assets_.get())),
        pixels_(
            obs_type(config) == ObsType::kState ? 0 : static_cast<std::size_t>(config.get_int("frame_stack")),
            render_) {
    if (obs_type(config) == ObsType::kStatePixels)
      for (const Part& p : state_parts(config))
        units_.push_back(static_cast<std::size_t>(p.count()) * sizeof(double));
    if (pixels_.active()) mujoco::Egl::get();  // no EGL: an error at make(), not on a worker
  }

  void reset(Rng& rng) {
    const mujoco::Untimed untimed;  // as a step's calls (cheetah's reset runs 200 substeps)
    if (const int64_t seed = rng.take_seed(); seed >= 0) {
      random_.seed(static_cast<uint32_t>(seed));
      // A task whose model dm_control builds from the seed (lqr) draws it now, as suite.load.
      if constexpr (requires { task_.seeded(physics_, random_); }) task_.seeded(physics_, random_);
    }
    failed_ = false;
    pixels_.reset();
    try {
      physics_.reset();  // reset_context(): a PhysicsError here is ignored, as dm_control does
      task_.initialize_episode(physics_, random_);
      const auto before = physics_.warnings();
      physics_.forward_without_actuation();
      check(before);
    } catch (const FatalError& e) {  // as in a step; its first step ends the episode
      fail(e);
    }
  }

  StepResult step(const Action* action, Rng&) {
    if (failed_) return {0.0, false, true};  // its reset failed: the reset state stays, as reported
    mjData* d = physics_.data();
    std::memcpy(d->ctrl, action, sizeof(double) * static_cast<std::size_t>(physics_.model()->nu));
    const auto before = physics_.warnings();
    if (!mujoco::trapped([this] { physics_.step_untrapped(control_steps_); })) {
      fail(FatalError(mujoco::t_trap.message));
      return {0.0, false, true};
    }
    if (!check(before)) return {0.0, false, true};
    return {task_.reward(physics_), task_.terminated(physics_), false};
  }

  void write(Row& row) const { task_.observe(physics_, row.obs_as<double>()); }

  // The env's model (its task moves targets in it) and data, into dm_control's Physics that
  // renders them (aiopool/_render.py).
  void export_model(void* dest) const { mj_copyModel(static_cast<mjModel*>(dest), physics_.model()); }
  void export_data(void* dest) const {
    mj_copyData(static_cast<mjData*>(dest), physics_.model(), physics_.data());
  }

  // physics.render(height, width, camera_id) of the current state, drawn on this thread.
  void render(uint8_t* rgb) const {
    if (!mujoco::trapped(
            [&] { mujoco::draw_dm_control(assets_, physics_.model(), physics_.data(), render_, rgb); }))
      throw std::runtime_error(std::string("MuJoCo could not render: ") + mujoco::t_trap.message);
  }

  // Pixel observations: the runner writes the task's observation to scratch (`state`) and calls
  // this with the row: each state part's stack (state+pixels), then the frames' (PixelStacks).
  bool pixel_obs() const { return pixels_.active(); }
  void write_pixels(uint8_t* obs, std::span<const std::byte> state) {
    pixels_.write(obs, state.data(), units_, [&](uint8_t* frame) {
      if (mujoco::trapped(
              [&] { mujoco::draw_dm_control(assets_, physics_.model(), physics_.data(), render_, frame); }))
        return true;
      // a GL failure: a black frame and the env's error, never a worker's crash
      set_error(std::string("MuJoCo could not render: ") + mujoco::t_trap.message);
      return false;
    });
  }

  bool failed() const { return failed_; }
  // The last error (kept through resets); any thread.
  std::string error() const {
    std::lock_guard<std::mutex> lock(*error_mu_);
    return error_;
  }

 private:
  using ObsType = mujoco::ObsType;

  void set_error(std::string e) {
    std::lock_guard<std::mutex> lock(*error_mu_);
    error_ = std::move(e);
  }

  // A MuJoCo error: the env's error; the state after it is undefined, so start clean.
  void fail(const FatalError& e) {
    set_error(e.what());
    failed_ = true;
    mj_resetData(physics_.model(), physics_.data());
  }

  // obs_type: "state" (the task's observations), "pixels" or "state+pixels" (dm_control's
  // pixels.Wrapper, pixels_only True / False); frame_stack stacks pixel observations.
  static ObsType obs_type(const Config& c) {
    return mujoco::parse_obs_type(c.get_string("obs_type"), c.get_int("frame_stack"));
  }

  // The task's observation parts, or with flat_observation one part, "observations" (what
  // dm_control's flatten_observation gives; a state pool presents it as one Box).
  static std::vector<Part> state_parts(const Config& config) {
    std::vector<Part> parts = Task::parts(config);
    if (!config.get_bool("flat_observation")) return parts;
    int64_t total = 0;
    for (const Part& p : parts) total += p.count();
    return {{"observations", total}};
  }

  // physics.render's kwargs (aiopool/_native/families.py checks them against the model first,
  // with dm_control's messages, and turns a camera's name into its index).
  static mujoco::RenderSettings render_settings(const Config& c, const mjModel* m) {
    mujoco::RenderSettings s;
    s.width = static_cast<int>(c.get_int("render_width"));
    s.height = static_cast<int>(c.get_int("render_height"));
    s.camera_id = static_cast<int>(c.get_int("render_camera_id"));
    if (s.width < 1 || s.height < 1 || s.width > m->vis.global.offwidth || s.height > m->vis.global.offheight)
      throw std::invalid_argument("width x height must be within the model's offscreen buffer");
    if (s.camera_id < -1 || s.camera_id >= m->ncam) throw std::invalid_argument("camera_id out of range");
    s.max_geom = mujoco::dm_control_max_geom(m);
    mjv_defaultOption(&s.option);
    s.option.flags[mjVIS_RANGEFINDER] = 0;  // dm_control's MjvOption hides rangefinder rays
    s.grow_buffer = false;
    s.upload_hfields = m->nhfield > 0;
    return s;
  }

  // dm_control's check_invalid_state: warnings that came during the call are a PhysicsError,
  // named as dm_control names them.
  bool check(const std::array<int, mjNWARNING>& before) {
    const auto after = physics_.warnings();
    std::string names;
    for (int i = 0; i < mjNWARNING; ++i)
      if (after[i] > before[i]) names += (names.empty() ? "" : ", ") + std::string(warning_name(i));
    if (names.empty()) return true;
    set_error("PhysicsError: Physics state is invalid. Warning(s) raised: " + names);
    failed_ = true;
    return false;
  }

  std::shared_ptr<const mjModel> assets_;  // the task's model, which each env copies
  Physics physics_;
  Task task_;
  RandomState random_;
  int control_steps_;
  bool failed_ = false;
  std::unique_ptr<std::mutex> error_mu_ = std::make_unique<std::mutex>();  // error_: read by any thread
  std::string error_;
  mujoco::RenderSettings render_;
  mujoco::PixelStacks pixels_;      // inactive for obs_type="state"
  std::vector<std::size_t> units_;  // each state part's bytes (obs_type="state+pixels")
};

}  // namespace aiopool::dmc
