// Drawing MuJoCo frames in C++ on any thread, as gymnasium's OffScreenViewer draws them.
//
// Each thread that draws (a worker rendering pixel observations, a pool's render thread) gets
// its own headless EGL context the first time it draws, made the way mujoco.egl makes one
// (libEGL loaded at run time with RTLD_GLOBAL, so that MuJoCo's GL loader finds
// eglGetProcAddress; the device display MUJOCO_EGL_DEVICE_ID names, or the first that
// initialises; the same config attributes), and in it one mjrContext and one mjvScene per
// (model, offscreen size, max_geom). Nothing is shared between threads, so workers draw in
// parallel and never wait on each other or on the GIL.
//
// A frame is gymnasium's: mjv_updateScene(model, data, option, perturb, camera, mjCAT_ALL,
// scene), mjr_render into the offscreen buffer (grown to the frame as gymnasium's MujocoEnv
// grows model.vis.global_.offwidth/offheight), mjr_readPixels, rows flipped. The camera is
// the env's own (Camera below): aimed at the env's first frame as gymnasium's viewer aims it
// when it is made, then `default_camera_config` applied, kept from frame to frame.
//
// dm_control's physics.render draws the same way with its own choices (draw_dm_control below):
// the model's offscreen buffer as it is, the free camera mjv_defaultFreeCamera's, a scene of
// max(1000, its estimate) geoms, no rangefinder rays, heightfields uploaded each frame where a
// task changes them.
// PixelStacks holds what both families' pixel observations share: frames (and states) stacked
// as gymnasium's FrameStackObservation stacks them.
#pragma once

#include <dlfcn.h>
#include <mujoco/mujoco.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "../../env.h"

namespace aiopool::mujoco {

// What gymnasium's rendering kwargs decide, resolved against the model.
struct RenderSettings {
  int width = 480, height = 480;
  int camera_id = -1;   // -1: the free camera; else a fixed camera (gymnasium's camera_id)
  int max_geom = 1000;  // the scene's geom capacity
  // default_camera_config: mjvCamera fields set after the camera is aimed (NaN: left as is),
  // in aiopool/_render.py's CAMERA_FIELDS order, lookat as three numbers.
  std::array<double, 10> camera_config{};
  mjvOption option{};           // mjv_defaultOption, then visual_options' flags
  bool grow_buffer = true;      // gymnasium's: the offscreen buffer grows to the frame
  bool upload_hfields = false;  // each frame's model's heightfields, uploaded before it draws
};

// ---- EGL, loaded at run time ----------------------------------------------------------------

class Egl {
 public:
  using Display = void*;
  using Config = void*;
  using Context = void*;
  using Int = int32_t;

  // The process's EGL and its display, made on first use; throws if this machine has none.
  static Egl& get() {
    static std::mutex mu;
    static std::unique_ptr<Egl> egl;
    static std::string failure;
    std::lock_guard<std::mutex> lock(mu);
    if (!egl && failure.empty()) {
      try {
        egl.reset(new Egl());
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    if (!egl) throw std::runtime_error(failure);
    return *egl;
  }

  Context make_context() {
    static constexpr std::array<Int, 19> kAttributes = {
        0x3024, 8,       // EGL_RED_SIZE
        0x3023, 8,       // EGL_GREEN_SIZE
        0x3022, 8,       // EGL_BLUE_SIZE
        0x3021, 8,       // EGL_ALPHA_SIZE
        0x3025, 24,      // EGL_DEPTH_SIZE
        0x3026, 8,       // EGL_STENCIL_SIZE
        0x303F, 0x308E,  // EGL_COLOR_BUFFER_TYPE, EGL_RGB_BUFFER
        0x3033, 0x0001,  // EGL_SURFACE_TYPE, EGL_PBUFFER_BIT
        0x3040, 0x0008,  // EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT
        0x3038};         // EGL_NONE
    Config config = nullptr;
    Int found = 0;
    if (!choose_config_(display_, kAttributes.data(), &config, 1, &found) || found < 1)
      throw std::runtime_error("EGL has no framebuffer configuration for MuJoCo's renderer");
    bind_api_(0x30A2);  // EGL_OPENGL_API
    Context c = create_context_(display_, config, nullptr, nullptr);
    if (c == nullptr) throw std::runtime_error("EGL could not create an OpenGL context");
    return c;
  }
  bool try_make_current(Context c) {
    return get_current_context_() == c || make_current_(display_, nullptr, nullptr, c);
  }

  // What is current on the calling thread (eglGetCurrent*), to be put back with `restore`.
  struct Current {
    Display display = nullptr;
    void* draw = nullptr;
    void* read = nullptr;
    Context context = nullptr;
  };
  Current current() const {
    return {get_current_display_(), get_current_surface_(0x3059), get_current_surface_(0x305A),  // DRAW, READ
            get_current_context_()};
  }
  void restore(const Current& c) {
    if (get_current_context_() == c.context) return;
    if (c.context == nullptr) {
      make_current_(display_, nullptr, nullptr, nullptr);
    } else {
      make_current_(c.display, c.draw, c.read, c.context);
    }
  }
  void make_current(Context c) {
    if (!try_make_current(c)) throw std::runtime_error("EGL could not make its OpenGL context current");
  }
  void destroy(Context c) {
    make_current_(display_, nullptr, nullptr, nullptr);
    destroy_context_(display_, c);
    release_thread_();
  }

 private:
  template <class F>
  F proc(const char* name) {
    void* p = dlsym(lib_, name);
    if (p == nullptr && get_proc_ != nullptr) p = get_proc_(name);
    if (p == nullptr) throw std::runtime_error(std::string("libEGL.so.1 has no ") + name);
    return reinterpret_cast<F>(p);
  }

  Egl() {
    // RTLD_GLOBAL: MuJoCo's GL loader looks eglGetProcAddress up among the loaded libraries.
    lib_ = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib_ == nullptr)
      throw std::runtime_error(
          "MuJoCo frames render headless through EGL, and libEGL.so.1 could not be loaded (" +
          std::string(dlerror()) + "); install Mesa's EGL (Debian/Ubuntu: libegl1 libgl1-mesa-dri)");
    get_proc_ = reinterpret_cast<void* (*)(const char*)>(dlsym(lib_, "eglGetProcAddress"));
    choose_config_ = proc<decltype(choose_config_)>("eglChooseConfig");
    bind_api_ = proc<decltype(bind_api_)>("eglBindAPI");
    create_context_ = proc<decltype(create_context_)>("eglCreateContext");
    make_current_ = proc<decltype(make_current_)>("eglMakeCurrent");
    get_current_context_ = proc<decltype(get_current_context_)>("eglGetCurrentContext");
    get_current_display_ = proc<decltype(get_current_display_)>("eglGetCurrentDisplay");
    get_current_surface_ = proc<decltype(get_current_surface_)>("eglGetCurrentSurface");
    destroy_context_ = proc<decltype(destroy_context_)>("eglDestroyContext");
    release_thread_ = proc<decltype(release_thread_)>("eglReleaseThread");
    auto initialize = proc<unsigned (*)(Display, Int*, Int*)>("eglInitialize");
    auto query_devices = proc<unsigned (*)(Int, void**, Int*)>("eglQueryDevicesEXT");
    auto platform_display = proc<Display (*)(unsigned, void*, const Int*)>("eglGetPlatformDisplayEXT");
    auto get_error = proc<Int (*)()>("eglGetError");
    // As mujoco.egl: the devices, or the one MUJOCO_EGL_DEVICE_ID names; the first that works.
    std::array<void*, 32> devices{};
    Int count = 0;
    if (!query_devices(static_cast<Int>(devices.size()), devices.data(), &count) || count < 1)
      throw std::runtime_error("EGL lists no devices to render MuJoCo frames on");
    Int first = 0, last = count;
    if (const char* chosen = std::getenv("MUJOCO_EGL_DEVICE_ID")) {
      first = std::atoi(chosen);
      if (first < 0 || first >= count)
        throw std::runtime_error("MUJOCO_EGL_DEVICE_ID must be an integer between 0 and " +
                                 std::to_string(count - 1) + ", got " + chosen);
      last = first + 1;
    }
    for (Int i = first; i < last && display_ == nullptr; ++i) {
      Display d = platform_display(0x313F, devices[static_cast<std::size_t>(i)], nullptr);  // DEVICE_EXT
      if (d != nullptr && get_error() == 0x3000 && initialize(d, nullptr, nullptr) && get_error() == 0x3000)
        display_ = d;
    }
    if (display_ == nullptr)
      throw std::runtime_error("EGL could not initialise a device display for MuJoCo's renderer");
  }

  void* lib_ = nullptr;
  Display display_ = nullptr;
  void* (*get_proc_)(const char*) = nullptr;
  unsigned (*choose_config_)(Display, const Int*, Config*, Int, Int*) = nullptr;
  unsigned (*bind_api_)(unsigned) = nullptr;
  Context (*create_context_)(Display, Config, Context, const Int*) = nullptr;
  unsigned (*make_current_)(Display, void*, void*, Context) = nullptr;
  Context (*get_current_context_)() = nullptr;
  Display (*get_current_display_)() = nullptr;
  void* (*get_current_surface_)(Int) = nullptr;
  unsigned (*destroy_context_)(Display, Context) = nullptr;
  unsigned (*release_thread_)() = nullptr;
};

// ---- one thread's GL state ------------------------------------------------------------------

class ThreadRenderer {
 public:
  static ThreadRenderer& get() {
    thread_local ThreadRenderer r;
    return r;
  }

  // Draws `d`, a state of model `m`, into `rgb` (height x width x 3, rows top first), with the
  // GL resources made from `assets` (`m` itself, or the model `m` was copied from: the same
  // meshes, textures and heightfields; its owner keeps it alive).
  void draw(const std::shared_ptr<const mjModel>& assets, const mjModel* m, const mjData* d,
            mjvCamera& camera, const RenderSettings& s, uint8_t* rgb) {
    Egl& egl = Egl::get();
    if (context_ == nullptr) context_ = egl.make_context();
    // Ours is current only while it draws; then what was current before is again. On the
    // caller's thread (pool.render) other GL code may run: dm_control without a GL backend of
    // its own draws into whatever context is current, and must not change ours.
    struct Restore {
      Egl& egl;
      Egl::Current before;
      ~Restore() { egl.restore(before); }
    } restore{egl, egl.current()};
    egl.make_current(context_);
    Target& t = target(assets, s);
    if (s.upload_hfields)
      for (int i = 0; i < m->nhfield; ++i) mjr_uploadHField(m, &t.context, i);
    mjvPerturb perturb;
    mjv_defaultPerturb(&perturb);
    camera.type = s.camera_id == -1 ? mjCAMERA_FREE : mjCAMERA_FIXED;
    camera.fixedcamid = s.camera_id;
    mjv_updateScene(m, const_cast<mjData*>(d), &s.option, &perturb, &camera, mjCAT_ALL, &t.scene);
    const mjrRect viewport{0, 0, s.width, s.height};
    mjr_render(viewport, &t.scene, &t.context);
    const std::size_t row = 3 * static_cast<std::size_t>(s.width);
    flipped_.resize(row * static_cast<std::size_t>(s.height));
    mjr_readPixels(flipped_.data(), nullptr, viewport, &t.context);
    for (int y = 0; y < s.height; ++y)  // GL's rows run bottom up
      std::memcpy(rgb + row * static_cast<std::size_t>(y),
                  flipped_.data() + row * static_cast<std::size_t>(s.height - 1 - y), row);
  }

  // At thread exit. Where EGL is gone already (its display terminated at interpreter exit),
  // the process is ending and the driver frees what is left.
  ~ThreadRenderer() {
    if (context_ == nullptr) return;
    Egl& egl = Egl::get();
    if (!egl.try_make_current(context_)) return;
    for (auto& [key, t] : targets_) free(t);
    egl.destroy(context_);
  }

 private:
  struct Target {
    std::weak_ptr<const mjModel> model;  // expired: the address may be another model's now
    mjrContext context;
    mjvScene scene;
  };

  static void free(Target& t) {
    mjr_freeContext(&t.context);
    mjv_freeScene(&t.scene);
  }

  Target& target(const std::shared_ptr<const mjModel>& model, const RenderSettings& s) {
    const mjModel* m = model.get();
    // gymnasium's MujocoEnv grows the offscreen buffer to the frame, never shrinks it.
    const int offwidth = s.grow_buffer ? std::max(m->vis.global.offwidth, s.width) : m->vis.global.offwidth;
    const int offheight =
        s.grow_buffer ? std::max(m->vis.global.offheight, s.height) : m->vis.global.offheight;
    // The GL resources of models gone (their pools closed) go first: a thread that draws for
    // one pool after another (the main thread of a loop of evaluations) would otherwise keep
    // each one's for its lifetime (55-85 MB each in software GL: MuJoCo's shadow map).
    for (auto it = targets_.begin(); it != targets_.end();) {
      if (!it->second.model.expired()) {
        ++it;
        continue;
      }
      free(it->second);
      it = targets_.erase(it);
    }
    const auto key = std::make_tuple(m, offwidth, offheight, s.max_geom);
    auto it = targets_.find(key);
    if (it != targets_.end()) return it->second;
    Target& t = targets_[key];
    t.model = model;
    mjModel sized = *m;  // the same arrays; only the offscreen size differs (read, never kept)
    sized.vis.global.offwidth = offwidth;
    sized.vis.global.offheight = offheight;
    mjr_defaultContext(&t.context);
    mjr_makeContext(&sized, &t.context, mjFONTSCALE_150);
    mjr_setBuffer(mjFB_OFFSCREEN, &t.context);
    mjv_defaultScene(&t.scene);
    mjv_makeScene(m, &t.scene, s.max_geom);
    return t;
  }

  Egl::Context context_ = nullptr;
  std::map<std::tuple<const mjModel*, int, int, int>, Target> targets_;
  std::vector<uint8_t> flipped_;
};

// ---- an env's camera ------------------------------------------------------------------------

// np.median of a column of n doubles (NaN if any is NaN).
inline double median(std::vector<double>& v) {
  for (double x : v)
    if (std::isnan(x)) return x;
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2));
  return (lo + hi) / 2;
}

// One env's camera: aimed at its first frame, as gymnasium's viewer aims it when made.
class Camera {
 public:
  void draw(const std::shared_ptr<const mjModel>& model, const mjData* d, const RenderSettings& s,
            uint8_t* rgb) {
    if (!aimed_) aim(model.get(), d, s);
    ThreadRenderer::get().draw(model, model.get(), d, camera_, s, rgb);
  }

 private:
  // OffScreenViewer._init_camera, then MujocoRenderer._set_cam_config.
  void aim(const mjModel* m, const mjData* d, const RenderSettings& s) {
    mjv_defaultCamera(&camera_);
    camera_.type = mjCAMERA_FREE;
    camera_.fixedcamid = -1;
    std::vector<double> column(static_cast<std::size_t>(m->ngeom));
    for (int i = 0; i < 3; ++i) {
      for (int g = 0; g < m->ngeom; ++g) column[static_cast<std::size_t>(g)] = d->geom_xpos[3 * g + i];
      camera_.lookat[i] = m->ngeom > 0 ? median(column) : std::nan("");
    }
    camera_.distance = m->stat.extent;
    const auto& c = s.camera_config;
    if (!std::isnan(c[0])) camera_.type = static_cast<int>(c[0]);
    if (!std::isnan(c[1])) camera_.fixedcamid = static_cast<int>(c[1]);
    if (!std::isnan(c[2])) camera_.trackbodyid = static_cast<int>(c[2]);
    for (int i = 0; i < 3; ++i)
      if (!std::isnan(c[static_cast<std::size_t>(3 + i)]))
        camera_.lookat[i] = c[static_cast<std::size_t>(3 + i)];
    if (!std::isnan(c[6])) camera_.distance = c[6];
    if (!std::isnan(c[7])) camera_.azimuth = c[7];
    if (!std::isnan(c[8])) camera_.elevation = c[8];
    if (!std::isnan(c[9])) camera_.orthographic = static_cast<int>(c[9]);
    aimed_ = true;
  }

  mjvCamera camera_{};
  bool aimed_ = false;
};

// ---- dm_control's physics.render ------------------------------------------------------------

// dm_control's _estimate_max_renderable_geoms; its MjvScene holds max(1000, this).
inline int dm_control_max_geom(const mjModel* m) {
  const int frames = std::max({m->nbody, m->ngeom, m->nsite, m->ncam, m->nlight});
  const int estimate = 3 * frames + 4 * m->ngeom + 3 * m->nbody + m->nsite + m->ntendon + m->njnt + m->nu +
                       m->nskin + m->ncam + m->nlight;
  return std::max(1000, estimate);
}

// physics.render(height, width, camera_id) of a state `d` of model `m` (copied from `assets`):
// a fixed camera, or (-1) the free camera as mjv_defaultFreeCamera sets it from `m`.
inline void draw_dm_control(const std::shared_ptr<const mjModel>& assets, const mjModel* m, const mjData* d,
                            const RenderSettings& s, uint8_t* rgb) {
  mjvCamera camera;
  mjv_defaultCamera(&camera);
  if (s.camera_id == -1) mjv_defaultFreeCamera(m, &camera);
  ThreadRenderer::get().draw(assets, m, d, camera, s, rgb);
}

// ---- pixel observations ---------------------------------------------------------------------

// What an env observes (the obs_type kwarg): its state, its frames, or a Dict of both.
enum class ObsType { kState, kPixels, kStatePixels };

inline ObsType parse_obs_type(const std::string& t, int64_t frame_stack) {
  if (t != "state" && t != "pixels" && t != "state+pixels")
    throw std::invalid_argument("obs_type is '" + t + "', expected 'state', 'pixels' or 'state+pixels'");
  if (frame_stack < 1) throw std::invalid_argument("frame_stack must be >= 1");
  if (t == "state" && frame_stack != 1)
    throw std::invalid_argument(
        "frame_stack stacks pixel observations: set obs_type='pixels' or 'state+pixels'");
  return t == "state" ? ObsType::kState : t == "pixels" ? ObsType::kPixels : ObsType::kStatePixels;
}

// The frames of a pixel observation: uint8 (height, width, 3), or (k, height, width, 3) stacked.
inline Space frames_space(int64_t k, const RenderSettings& s) {
  Space space{Space::Kind::kBox, DType::kUInt8, {s.height, s.width, 3}, {}, {}, 0};
  if (k > 1) space.shape.insert(space.shape.begin(), k);
  space.low.assign(static_cast<std::size_t>(space.size()), 0.0);
  space.high.assign(static_cast<std::size_t>(space.size()), 255.0);
  return space;
}

// The row of an observation whose parts differ in dtype (state+pixels): `bytes` of them, padded
// to 8 so that each row's float64 parts stay aligned.
inline Space byte_row(int64_t bytes) {
  const int64_t padded = (bytes + 7) / 8 * 8;
  const auto n = static_cast<std::size_t>(padded);
  return {Space::Kind::kBox,
          DType::kUInt8,
          {padded},
          std::vector<double>(n, 0.0),
          std::vector<double>(n, 255.0),
          0};
}

// An env's pixel observations: each row holds, one after another, a stack of each state part
// (the state observations, where the observation has them) and a stack of frames, `k` slots
// each, oldest first. After a reset every slot holds the new observation (FrameStackObservation's
// padding "reset"); after a step each stack moves up by one. k = 0: no pixel observations.
class PixelStacks {
 public:
  PixelStacks(std::size_t k, const RenderSettings& s)
      : k_(k), frame_(3 * static_cast<std::size_t>(s.width) * static_cast<std::size_t>(s.height)) {}

  bool active() const { return k_ > 0; }
  void reset() { fresh_ = true; }

  // Writes the row `obs`: the state parts from `state` (`units`: each part's bytes, one after
  // another there; empty for frames only), then the frame `draw(uint8_t*)` draws in place. A
  // draw that fails (returns false: a GL error, which the env records) leaves a black frame.
  template <class Draw>
  void write(uint8_t* obs, const std::byte* state, std::span<const std::size_t> units, Draw&& draw) {
    std::size_t at = 0;
    for (std::size_t unit : units) {
      stack(obs + at, reinterpret_cast<const uint8_t*>(state), unit, at);
      state += unit;
      at += unit * k_;
    }
    uint8_t* last = obs + at + (k_ - 1) * frame_;
    if (!draw(last)) std::memset(last, 0, frame_);
    stack(obs + at, last, frame_, at);
    if (k_ > 1) last_.assign(obs, obs + at + k_ * frame_);
    fresh_ = false;
  }

 private:
  // One stack at `dest` (offset `at` in the row) whose last slot is to hold `latest` (which may
  // already be there); last_ holds the previous observation.
  void stack(uint8_t* dest, const uint8_t* latest, std::size_t unit, std::size_t at) const {
    uint8_t* last = dest + (k_ - 1) * unit;
    if (!fresh_ && k_ > 1) std::memmove(dest, last_.data() + at + unit, (k_ - 1) * unit);
    if (last != latest) std::memcpy(last, latest, unit);
    if (fresh_)
      for (std::size_t i = 0; i + 1 < k_; ++i) std::memcpy(dest + i * unit, latest, unit);
  }

  std::size_t k_;
  std::size_t frame_;
  bool fresh_ = true;
  std::vector<uint8_t> last_;  // the last observation (k > 1)
};

}  // namespace aiopool::mujoco
