// What gymnasium's MujocoEnv (gymnasium/envs/mujoco/mujoco_env.py, 1.4) does for every v5 env,
// plus the numpy arithmetic the v5 envs' rewards and observations rely on.
//
// Physics: one mjModel per MJCF file and modification time, shared read-only by every env built
// from it (a process-wide cache of weak references); one mjData per env. A step is gymnasium's
// `_step_mujoco_simulation`: ctrl = the float32 action widened to double, mj_step frame_skip
// times, then mj_rnePostConstraint (which fills cfrc_ext). A reset is mj_resetData, the env's
// draws, then set_state (qpos, qvel, mj_forward). The same libmujoco binary as gymnasium's
// (mujoco==3.17.0) gives the same bits; the rest is numpy's arithmetic, reproduced below
// (built with -ffp-contract=off) where numpy's code is the same on every CPU, and called in
// numpy itself where it is CPU-dispatched (np.linalg.norm, np.sin, np.cos: numpy_math.h).
//
// Bad actions: gymnasium hands NaN, inf and out-of-range actions to MuJoCo unchanged, and so do
// we. MuJoCo clamps out-of-range controls of ctrl-limited actuators, zeroes a non-finite ctrl
// vector, and when the state diverges it resets mjData itself and warns (printed once per
// episode by MuJoCo's log handler). The step still returns; `mujoco_warning` in the info says
// it happened. Nothing here throws on a worker thread.
//
// Errors: mju_error (a stack overflow in a model with too little <size memory>, ...) ends the
// process under MuJoCo's default handler. Every MuJoCo call that can raise runs in `trapped`:
// a thread-local log handler (MuJoCo's hook for this, which its Python bindings use) jumps back
// to the call with the message. A step that raised resets mjData, ends the episode (the runner
// reports it truncated, reward 0, `mujoco_error` set; gymnasium raises mujoco.FatalError at the
// same step) and keeps the message for Pool.env_error; the other envs never notice. At make()
// an error is a C++ exception, so a Python one naming the file.
#pragma once

#include <mujoco/mujoco.h>
#include <sys/stat.h>

#include <array>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "../../env.h"
#include "../../numpy_math.h"
#include "../../registry.h"
#include "../../rng_normal.h"
#include "errors.h"
#include "offscreen.h"

namespace aiopool::mujoco {

// ---- numpy's arithmetic ---------------------------------------------------------------------

// np.sum(np.square(a)).
template <class T>
T sum_of_squares(const T* a, std::size_t n) {
  thread_local std::vector<T> sq;
  sq.resize(n);
  for (std::size_t i = 0; i < n; ++i) sq[i] = a[i] * a[i];
  return pairwise_sum(sq.data(), n);
}

// np.clip(x, lo, hi): NaN passes through.
inline double clip(double x, double lo, double hi) {
  if (std::isnan(x)) return x;
  const double m = x > lo ? x : lo;
  return m < hi ? m : hi;
}

// ---- the model cache ------------------------------------------------------------------------

inline std::shared_ptr<const mjModel> load_model(const std::string& path) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, int64_t, int64_t>, std::weak_ptr<const mjModel>> cache;
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw std::invalid_argument("File " + path + " does not exist");
  const auto key =
      std::make_tuple(path, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                      static_cast<int64_t>(st.st_size));
  std::lock_guard<std::mutex> lock(mu);
  if (auto m = cache[key].lock()) return m;
  // MuJoCo prints compile warnings (a deprecated attribute, ...) at each load; a file loaded
  // before (the spec's model may expire before the envs load theirs) loads quietly.
  static std::set<std::tuple<std::string, int64_t, int64_t>> loaded;
  const bool quiet = !loaded.insert(key).second;
  if (quiet) _mjPRIVATE_setTlsLogHandler(&drop_warnings);
  char error[1024] = "";
  mjModel* raw = mj_loadXML(path.c_str(), nullptr, error, sizeof error);
  if (quiet) _mjPRIVATE_setTlsLogHandler(nullptr);
  if (raw == nullptr) throw std::invalid_argument("MuJoCo could not load " + path + ": " + error);
  std::shared_ptr<const mjModel> m(raw, [](const mjModel* p) { mj_deleteModel(const_cast<mjModel*>(p)); });
  cache[key] = m;
  return m;
}

// ---- spec helpers ---------------------------------------------------------------------------

inline ConfigKey str_key(const char* name, const char* def) {
  return {name, ConfigKey::Kind::kString, 0.0, def};
}
inline ConfigKey int_key(const char* name, double def) { return {name, ConfigKey::Kind::kInt, def}; }
inline ConfigKey float_key(const char* name, double def) { return {name, ConfigKey::Kind::kFloat, def}; }
inline ConfigKey bool_key(const char* name, bool def) {
  return {name, ConfigKey::Kind::kBool, def ? 1.0 : 0.0};
}
inline ConfigKey range_key(const char* name, double lo, double hi) {
  return {name, ConfigKey::Kind::kRange, 0.0, "", {lo, hi}};
}

// ---- rendering and pixel observations --------------------------------------------------------

inline constexpr int kNoCameraId = -2;  // render_camera_id when gymnasium's camera_id is None

// aiopool's observation kwargs, then the rendering kwargs of gymnasium's MujocoEnv (width,
// height, camera_id, camera_name, default_camera_config, max_geom, visual_options), which
// aiopool/_native/families.py turns into the render_* keys (users never set those directly).
inline std::vector<ConfigKey> render_keys() {
  const double nan = std::nan("");
  return {
      str_key("obs_type", "state"),
      int_key("frame_stack", 1),
      int_key("render_width", 480),
      int_key("render_height", 480),
      int_key("render_camera_id", kNoCameraId),
      {"render_camera_name", ConfigKey::Kind::kOptionalString},
      int_key("render_max_geom", 1000),
      {"render_camera_config", ConfigKey::Kind::kNumbers, 0.0, "", {}, std::vector<double>(10, nan)},
      {"render_visual_flags", ConfigKey::Kind::kNumbers, 0.0, "", {}, std::vector<double>(mjNVISFLAG, -1.0)}};
}

// What the rendering kwargs say, resolved against the model as gymnasium's MujocoRenderer
// resolves them: no camera named is the free camera (even where the model has a "track"
// camera); a camera_name the model lacks is the free camera too.
inline RenderSettings render_settings(const Config& c, const mjModel* m) {
  RenderSettings s;
  s.width = static_cast<int>(c.get_int("render_width"));
  s.height = static_cast<int>(c.get_int("render_height"));
  s.max_geom = static_cast<int>(c.get_int("render_max_geom"));
  if (s.width < 1 || s.height < 1)
    throw std::invalid_argument("width and height must be >= 1, got " + std::to_string(s.width) + " x " +
                                std::to_string(s.height));
  if (s.max_geom < 1) throw std::invalid_argument("max_geom must be >= 1");
  const int id = static_cast<int>(c.get_int("render_camera_id"));
  const std::string* name = c.find_string("render_camera_name");
  if (id != kNoCameraId && name != nullptr)
    throw std::invalid_argument("Both `camera_id` and `camera_name` cannot be specified at the same time.");
  if (id != kNoCameraId) {
    if (id < -1 || id >= m->ncam)
      throw std::invalid_argument("camera_id=" + std::to_string(id) + ": the model has " +
                                  std::to_string(m->ncam) + " cameras (-1 is the free camera)");
    s.camera_id = id;
  } else if (name != nullptr) {
    s.camera_id = mj_name2id(m, mjOBJ_CAMERA, name->c_str());
  }
  const std::vector<double>& cam = c.get_numbers("render_camera_config");
  std::copy(cam.begin(), cam.end(), s.camera_config.begin());
  mjv_defaultOption(&s.option);
  const std::vector<double>& flags = c.get_numbers("render_visual_flags");
  for (int f = 0; f < mjNVISFLAG; ++f)
    if (flags[static_cast<std::size_t>(f)] >= 0)
      s.option.flags[f] = static_cast<mjtByte>(flags[static_cast<std::size_t>(f)]);
  return s;
}

// obs_type: "state" (gymnasium's observation), "pixels" (the frame gymnasium's
// AddRenderObservation gives) or "state+pixels" (AddRenderObservation(render_only=False): a Dict
// of both), stacked as FrameStackObservation stacks them when frame_stack > 1.
inline ObsType obs_type(const Config& c) {
  return parse_obs_type(c.get_string("obs_type"), c.get_int("frame_stack"));
}

inline bool wants_pixels(const Config& c) { return obs_type(c) != ObsType::kState; }

// xml_file and frame_skip, which every v5 env takes, then the env's own keys, then the
// observation and rendering keys.
inline std::vector<ConfigKey> keys(const char* xml_file, int frame_skip, std::vector<ConfigKey> own) {
  std::vector<ConfigKey> k{str_key("xml_file", xml_file), int_key("frame_skip", frame_skip)};
  k.insert(k.end(), own.begin(), own.end());
  const std::vector<ConfigKey> r = render_keys();
  k.insert(k.end(), r.begin(), r.end());
  return k;
}

inline Field f64(const char* name) { return {name, DType::kFloat64, {}}; }
inline Field f32(const char* name) { return {name, DType::kFloat32, {}}; }

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// A float64 Box of n unbounded elements (every v5 observation space).
inline Space unbounded(int64_t n) {
  return {Space::Kind::kBox,
          DType::kFloat64,
          {n},
          std::vector<double>(static_cast<std::size_t>(n), -kInf),
          std::vector<double>(static_cast<std::size_t>(n), kInf),
          0};
}

// gymnasium: actuator_ctrlrange as float32 (float32 rounding of the bounds included).
inline Space action_space(const mjModel* m) {
  Space s{Space::Kind::kBox, DType::kFloat32, {m->nu}, {}, {}, 0};
  for (int j = 0; j < m->nu; ++j) {
    s.low.push_back(static_cast<float>(m->actuator_ctrlrange[2 * j]));
    s.high.push_back(static_cast<float>(m->actuator_ctrlrange[2 * j + 1]));
  }
  return s;
}

// The spec every v5 env shares: the model's action space, `obs_size` float64s, the env's info
// fields, then `mujoco_warning` and `mujoco_error`. chunk 1: a step takes tens of microseconds.
// With obs_type="pixels" the observation is the frame (uint8 height x width x 3), or
// frame_stack of them; with "state+pixels" a Dict of the state ("state", float64) and the frames
// ("pixels"), each stacked, held in one byte row: the state first (8-byte aligned), then the
// frames, padded to 8 bytes. Frames are (height, width, 3) at gymnasium's metadata["render_fps"].
inline EnvSpec make_spec(const Config& c, const mjModel* m, int64_t obs_size, std::vector<Field> info) {
  EnvSpec s;
  const RenderSettings r = render_settings(c, m);
  s.render_shape = {r.height, r.width, 3};
  s.render_fps = std::nearbyint(1.0 / (m->opt.timestep * static_cast<double>(c.get_int("frame_skip"))));
  const ObsType type = obs_type(c);
  if (type == ObsType::kState) {
    s.observation_space = unbounded(obs_size);
  } else {
    const int64_t k = c.get_int("frame_stack");
    Space pixels = frames_space(k, r);
    s.state_obs_bytes = static_cast<std::size_t>(obs_size) * sizeof(double);
    if (type == ObsType::kPixels) {
      s.observation_space = std::move(pixels);
    } else {
      Space state = unbounded(obs_size * k);
      if (k > 1) state.shape = {k, obs_size};
      s.observation_space = byte_row(state.size() * 8 + pixels.size());
      s.obs_parts = {{"state", std::move(state)}, {"pixels", std::move(pixels)}};
      s.obs_dict = true;
    }
  }
  s.action_space = action_space(m);
  s.info = std::move(info);
  s.info.push_back({"mujoco_warning", DType::kBool, {}});
  s.info.push_back({"mujoco_error", DType::kBool, {}});
  s.rejects_nan_actions = false;  // NaN and inf go to MuJoCo, as in gymnasium
  return s;
}

// ---- the env base ---------------------------------------------------------------------------

class MujocoEnv {
 public:
  using Action = float;

  explicit MujocoEnv(const Config& config)
      : model_(load_model(config.get_string("xml_file"))),
        data_(make_data(model_.get(), config.get_string("xml_file")), &mj_deleteData),
        m(model_.get()),
        d(data_.get()),
        frame_skip(static_cast<int>(config.get_int("frame_skip"))),
        dt(m->opt.timestep * frame_skip),
        init_qpos(d->qpos, d->qpos + m->nq),
        init_qvel(d->qvel, d->qvel + m->nv),
        render_(render_settings(config, m)),
        pixels_(wants_pixels(config) ? static_cast<std::size_t>(config.get_int("frame_stack")) : 0, render_),
        with_state_(obs_type(config) == ObsType::kStatePixels) {
    if (frame_skip < 1) throw std::invalid_argument("frame_skip must be >= 1");
    if (pixels_.active()) Egl::get();  // no EGL: an error at make(), not on a worker
  }

  static std::shared_ptr<const mjModel> model(const Config& config) {
    return load_model(config.get_string("xml_file"));
  }

  // The last MuJoCo error of this env (empty if none); any thread.
  std::string error() const {
    std::lock_guard<std::mutex> lock(*error_mu_);
    return error_;
  }
  // The last step or reset raised a MuJoCo error (the runner ends the episode).
  bool failed() const { return failed_; }

  // Rendering: the env's mjData copied into `dest`, an mjData of the same model (gymnasium's
  // env of the same MJCF, whose own renderer then draws the frame; see aiopool/_render.py).
  void export_data(void* dest) const { mj_copyData(static_cast<mjData*>(dest), m, d); }

  // The current frame (EnvSpec::render_shape), drawn with this thread's GL context. Const for
  // the runner, which calls it only while nothing steps the env; the camera is the env's own.
  void render(uint8_t* rgb) const {
    const bool ok = trapped([&] { camera_.draw(model_, d, render_, rgb); });
    if (!ok) throw std::runtime_error(std::string("MuJoCo could not render: ") + t_trap.message);
  }

  // Pixel observations (obs_type="pixels" or "state+pixels"): the runner writes the state
  // observation to scratch (`state`, EnvSpec::state_obs_bytes) and calls this with the row,
  // which holds the state stack (state+pixels only), then the frame stack (PixelStacks).
  bool pixel_obs() const { return pixels_.active(); }
  void write_pixels(uint8_t* obs, std::span<const std::byte> state) {
    const std::size_t unit = state.size();
    const std::span<const std::size_t> units(&unit, with_state_ ? 1 : 0);
    pixels_.write(obs, state.data(), units, [&](uint8_t* frame) {
      if (trapped([&] { camera_.draw(model_, d, render_, frame); })) return true;
      record_error();  // a GL failure: a black frame and the env's error, never a worker's crash
      return false;
    });
  }

 private:
  std::shared_ptr<const mjModel> model_;
  std::unique_ptr<mjData, void (*)(mjData*)> data_;
  std::unique_ptr<std::mutex> error_mu_ = std::make_unique<std::mutex>();
  std::string error_;

  // mj_makeData, then an mj_forward of the initial state: errors here are the model's.
  static mjData* make_data(const mjModel* m, const std::string& path) {
    mjData* d = nullptr;
    const bool ok = trapped([&] {
      d = mj_makeData(m);
      if (d != nullptr) mj_forward(m, d);
    });
    if (!ok || d == nullptr) {
      if (d != nullptr) mj_deleteData(d);
      throw std::invalid_argument("MuJoCo could not simulate " + path + ": " +
                                  (ok ? std::string("mj_makeData failed") : std::string(t_trap.message)));
    }
    return d;
  }

  void record_error() {
    failed_ = true;
    std::lock_guard<std::mutex> lock(*error_mu_);
    error_ = t_trap.message;
  }

 protected:
  // An array-valued info field (Humanoid's tendon_length, tendon_velocity).
  struct Array {
    const double* data;
    int size;
  };

  static void write_field(Row& row, std::size_t k, double v) { *row.info_as<double>(k) = v; }
  static void write_field(Row& row, std::size_t k, float v) { *row.info_as<float>(k) = v; }
  static void write_field(Row& row, std::size_t k, int64_t v) { *row.info_as<int64_t>(k) = v; }
  static void write_field(Row& row, std::size_t k, Array a) {
    std::memcpy(row.info[k], a.data, sizeof(double) * static_cast<std::size_t>(a.size));
  }

  // gymnasium's _step_mujoco_simulation, watching MuJoCo's divergence warnings: each records the
  // index it found bad in `lastinfo` (also after MuJoCo resets the state), so marking them -1
  // first tells whether this step raised one without touching MuJoCo's print-once counters.
  void do_simulation(const Action* action) {
    static constexpr std::array kBad = {mjWARN_BADQPOS, mjWARN_BADQVEL, mjWARN_BADQACC, mjWARN_BADCTRL};
    for (int w : kBad) d->warning[w].lastinfo = -1;
    for (int j = 0; j < m->nu; ++j) d->ctrl[j] = static_cast<double>(action[j]);
    const mjModel* mm = m;
    mjData* dd = d;
    const int skip = frame_skip;
    failed_ = !trapped([mm, dd, skip] {
      for (int k = 0; k < skip; ++k) mj_step(mm, dd);
      mj_rnePostConstraint(mm, dd);
    });
    if (failed_) {
      record_error();
      mj_resetData(m, d);  // the state after an error is undefined: start the next one clean
    }
    warned = false;
    for (int w : kBad) warned = warned || d->warning[w].lastinfo != -1;
  }

  // gymnasium's reset() up to reset_model().
  void reset_data() {
    mj_resetData(m, d);
    warned = false;
    failed_ = false;
    pixels_.reset();
  }

  // gymnasium's set_state (na == 0 in every v5 model, so `act` is empty).
  void set_state(const double* qpos, const double* qvel) {
    std::memcpy(d->qpos, qpos, sizeof(double) * static_cast<std::size_t>(m->nq));
    std::memcpy(d->qvel, qvel, sizeof(double) * static_cast<std::size_t>(m->nv));
    const mjModel* mm = m;
    mjData* dd = d;
    if (!trapped([mm, dd] { mj_forward(mm, dd); })) record_error();
  }

  // The reset most v5 envs do: mj_resetData, then qpos = init_qpos + uniform(-scale, scale, nq)
  // and qvel = init_qvel + uniform(-scale, scale, nv), drawn in that order, then set_state.
  void reset_uniform(Rng& rng, double scale) {
    reset_data();
    const std::vector<double> qpos = noisy_qpos(rng, scale);
    const std::vector<double> qvel = noisy_qvel_uniform(rng, scale);
    set_state(qpos.data(), qvel.data());
  }

  // Ant's, HalfCheetah's and InvertedDoublePendulum's: the same, but qvel = init_qvel + scale *
  // standard_normal(nv).
  void reset_normal(Rng& rng, double scale) {
    reset_data();
    const std::vector<double> qpos = noisy_qpos(rng, scale);
    std::vector<double> qvel(init_qvel);
    for (double& v : qvel) v = v + scale * standard_normal(rng);
    set_state(qpos.data(), qvel.data());
  }

  std::vector<double> noisy_qpos(Rng& rng, double scale) const {
    std::vector<double> q(init_qpos);
    for (double& x : q) x = x + rng.uniform(-scale, scale);
    return q;
  }
  std::vector<double> noisy_qvel_uniform(Rng& rng, double scale) const {
    std::vector<double> v(init_qvel);
    for (double& x : v) x = x + rng.uniform(-scale, scale);
    return v;
  }

  // data.body(id or name).xpos
  int body_id(const std::string& name_or_id) const {
    char* end = nullptr;
    const long id = std::strtol(name_or_id.c_str(), &end, 10);
    if (!name_or_id.empty() && *end == '\0') {
      if (id < 0 || id >= m->nbody) throw std::invalid_argument("body id " + name_or_id + " out of range");
      return static_cast<int>(id);
    }
    const int found = mj_name2id(m, mjOBJ_BODY, name_or_id.c_str());
    if (found < 0) throw std::invalid_argument("the model has no body named '" + name_or_id + "'");
    return found;
  }
  const double* xpos(int body) const { return d->xpos + 3 * body; }

  // Copies n doubles into the observation and returns the next free slot.
  static double* put(double* out, const double* src, int n) {
    std::memcpy(out, src, sizeof(double) * static_cast<std::size_t>(n));
    return out + n;
  }
  static double* put_clipped(double* out, const double* src, int n, double lo, double hi) {
    for (int i = 0; i < n; ++i) *out++ = clip(src[i], lo, hi);
    return out;
  }

  // Writes the info fields in spec order, then `mujoco_warning`. Each value's C++ type is its
  // field's dtype: double float64, float float32, int64_t int64, Array a float64 array.
  template <class... Ts>
  void write_info(Row& row, Ts... values) const {
    std::size_t k = 0;
    (write_field(row, k++, values), ...);
    *row.info_as<bool>(k) = warned;
    *row.info_as<bool>(k + 1) = failed_;
  }

 public:
  const mjModel* m;
  mjData* d;
  int frame_skip;
  double dt;  // gymnasium: model.opt.timestep * frame_skip
  std::vector<double> init_qpos, init_qvel;
  bool warned = false;

 private:
  bool failed_ = false;
  RenderSettings render_;
  mutable Camera camera_;
  PixelStacks pixels_;  // obs_type="pixels" / "state+pixels"; inactive for "state"
  bool with_state_;     // obs_type="state+pixels": the row holds the states too
};

}  // namespace aiopool::mujoco
