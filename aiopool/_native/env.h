// ③ The interface an environment author implements, and nothing else.
//
// An environment is one class with a static `spec()` and three methods. Workers call them on
// the env they popped from the action queue; one env is only ever touched by one worker at a
// time (at most one action is in flight per env), so env state needs no locking. Env code never
// sees queues, blocks, the doorbell or Python.
//
//   struct MyEnv {
//     using Action = int64_t;                          // element type of one action
//     static std::vector<ConfigKey> config_keys();     // gymnasium's constructor kwargs
//     static EnvSpec spec(const Config& config);       // spaces, info fields, chunk
//     explicit MyEnv(const Config& config);
//     void reset(Rng& rng);                            // draw from rng exactly as the reference
//     StepResult step(const Action* action, Rng& rng); // advance the state
//     void write(Row& row) const;                      // obs + info extras of the current state
//   };
//
// Rendering (render_mode="rgb_array") is optional, in one of two ways:
//   void render(uint8_t* rgb) const;          // the current frame, EnvSpec::render_shape bytes
//   std::vector<double> render_state() const; // what a Python renderer draws the frame from
//   void export_data(void* dest) const;       // the simulator's state, into the renderer's
//   void export_model(void* dest) const;      // with export_data, where the env's model changes
//   bool pixel_obs() const;                   // the observation is the rendered frame:
//   void write_pixels(uint8_t* obs, std::span<const std::byte> state);  // write() fills a
//                                             // scratch row (`state`), this the obs row
// The first renders in C++ (Atari: the screen ale-py's env.render() gives); the others hand
// the state the reference's own drawing code reads (classic control's `state`, toy text's `s`,
// MuJoCo's whole mjData; the Control Suite's mjModel too, whose tasks move targets in it) to
// the family's Python renderer (aiopool/_render.py), so frames are
// the reference's own. render_state() may be non-const where the reference's render() changes
// the env (LunarLander's decorative particles age and die as they are drawn).
//
// Registering it is one line (see registry.h), naming gymnasium's time limit:
//   AIOPOOL_REGISTER_ENV("MyEnv-v0", MyEnv, 500);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "rng.h"

namespace aiopool {

enum class DType : uint8_t { kBool, kUInt8, kInt8, kInt32, kInt64, kFloat32, kFloat64 };

inline std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

// A gymnasium Box or Discrete space. Box bounds are flattened in C order. kText is a string
// (minigrid's mission) of up to shape[0] characters, held as that many int32 code points,
// zero-padded: Python sees a numpy `<U{shape[0]}` string per row (spec.text_dtype).
struct Space {
  enum class Kind : uint8_t { kBox, kDiscrete, kText };
  Kind kind = Kind::kBox;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // () for Discrete
  std::vector<double> low, high;
  int64_t n = 0;  // Discrete only

  int64_t size() const {
    int64_t s = 1;
    for (int64_t d : shape) s *= d;
    return s;
  }
  std::size_t nbytes() const { return static_cast<std::size_t>(size()) * dtype_size(dtype); }
};

// One per-row array the env fills besides the observation (family extras such as `lives`).
struct Field {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // per row
  std::size_t nbytes() const {
    std::size_t s = dtype_size(dtype);
    for (int64_t d : shape) s *= static_cast<std::size_t>(d);
    return s;
  }
};

// A constructor keyword argument, as gymnasium's env takes it. kRange is a (low, high) pair
// such as MuJoCo's `healthy_z_range`; kString a path such as `xml_file`. The kinds that may be
// None (gymnasium's default or the user's): kOptionalString (FrozenLake's `map_name`) and kLines,
// rows of text (FrozenLake's `desc`), whose default_string "" means None and whose value, when
// not None, arrives as one string of rows joined by '\n'; Config::find_string gives nullptr for
// None. kNumbers is a tuple of numbers as long as default_numbers (`reward_schedule`).
// kOptionalInt is None or an int (minigrid's `max_steps`), kOptionalPos None or an (x, y) pair
// of ints (`agent_start_pos`): their default is None where default_none is set, else
// default_value / default_numbers; Config::find_number / find_numbers give nullptr for None.
struct ConfigKey {
  enum class Kind : uint8_t {
    kBool,
    kInt,
    kFloat,
    kString,
    kRange,
    kOptionalString,
    kLines,
    kNumbers,
    kOptionalInt,
    kOptionalPos
  };
  std::string name;
  Kind kind;
  double default_value = 0.0;
  std::string default_string = {};
  std::array<double, 2> default_range = {0.0, 0.0};
  std::vector<double> default_numbers = {};
  bool default_none = false;
};

// Keyword arguments, already validated against the env's ConfigKeys by the registry.
class Config {
 public:
  Config() = default;
  explicit Config(std::map<std::string, double> values, std::map<std::string, std::string> strings = {},
                  std::map<std::string, std::vector<double>> ranges = {})
      : values_(std::move(values)), strings_(std::move(strings)), ranges_(std::move(ranges)) {}
  double get(const std::string& key) const { return lookup(values_, key); }
  bool get_bool(const std::string& key) const { return get(key) != 0.0; }
  int64_t get_int(const std::string& key) const { return static_cast<int64_t>(get(key)); }
  const std::string& get_string(const std::string& key) const { return lookup(strings_, key); }
  // A kOptionalString / kLines value, or nullptr where it is None.
  const std::string* find_string(const std::string& key) const {
    auto it = strings_.find(key);
    return it == strings_.end() ? nullptr : &it->second;
  }
  const std::vector<double>& get_numbers(const std::string& key) const { return lookup(ranges_, key); }
  // A kOptionalInt / kOptionalPos value, or nullptr where it is None.
  const double* find_number(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  const std::vector<double>* find_numbers(const std::string& key) const {
    auto it = ranges_.find(key);
    return it == ranges_.end() ? nullptr : &it->second;
  }
  std::array<double, 2> get_range(const std::string& key) const {
    const std::vector<double>& r = lookup(ranges_, key);
    if (r.size() != 2) throw std::invalid_argument("config key '" + key + "' must be a (low, high) pair");
    return {r[0], r[1]};
  }
  const std::map<std::string, double>& values() const { return values_; }

 private:
  template <class M>
  static const typename M::mapped_type& lookup(const M& m, const std::string& key) {
    auto it = m.find(key);
    if (it == m.end()) throw std::invalid_argument("config has no key '" + key + "'");
    return it->second;
  }

  std::map<std::string, double> values_;
  std::map<std::string, std::string> strings_;
  std::map<std::string, std::vector<double>> ranges_;
};

// One part of a Tuple or Dict observation (gymnasium's Blackjack): `space.size()` elements of
// the part's dtype, after the parts before it. Where the parts' dtypes differ, the row is a
// uint8 Box of their bytes and each part starts at a multiple of its item size.
struct ObsPart {
  std::string key;  // the Dict key; a Tuple's parts are keyed by position ("0", "1", ...)
  Space space;
};

struct EnvSpec {
  // The observation as the row holds it. With `obs_parts`, a flat Box of their elements (one
  // dtype for all, or their bytes), which Python presents as gymnasium's Tuple / Dict of views
  // of its parts.
  Space observation_space;
  std::vector<ObsPart> obs_parts;  // empty: the observation is observation_space itself
  bool obs_dict = false;           // the parts make a Dict (by key), else a Tuple (in order)
  Space action_space;
  std::vector<Field> info;    // extras the env writes in write(), in this order
  int max_episode_steps = 0;  // gymnasium's TimeLimit; set by the registry; 0 = none
  // How many env-steps a worker takes from the queue at once. 1 suits envs that take
  // microseconds; envs that step in tens of nanoseconds (classic control) raise it so a
  // queue operation does not cost more than the step itself.
  int chunk = 1;
  // Whether send() rejects NaN in continuous actions. Classic control and Box2D clip actions
  // (±inf included, as gymnasium's envs clip them); a NaN would silently poison the state of
  // most of them (LunarLander alone reads it as engines off), so the family rejects it. MuJoCo
  // envs take it as gymnasium does (MuJoCo zeroes a NaN ctrl and warns).
  bool rejects_nan_actions = true;
  // The largest `seed + i` the env accepts, or -1 for any (the reference may take C ints).
  int64_t max_seed = -1;
  // (height, width, 3) of the frames `render(uint8_t*)` writes; empty where the env has none.
  std::vector<int64_t> render_shape;
  // The frame rate of the reference's videos (gymnasium's metadata["render_fps"]); 0: unknown.
  double render_fps = 0.0;
  // Where the observation is the env's rendered frames (pixel_obs() below): the bytes of the
  // state observation write() writes, which the runner sends to scratch.
  std::size_t state_obs_bytes = 0;
};

// What one step did. The runner adds the time limit to `truncated` and keeps the statistics.
struct StepResult {
  double reward = 0.0;
  bool terminated = false;
  bool truncated = false;
  // `terminated` is a signal only and the episode goes on without a reset, as ALE's
  // `life_loss_info` reports a lost life. Otherwise terminated or truncated ends the episode.
  bool continues = false;
};

// The row a worker claimed in a batch block, handed to Env::write.
struct Row {
  void* obs;          // observation_space.shape elements of observation_space.dtype
  void* const* info;  // one pointer per EnvSpec::info field, in order

  template <class T>
  T* obs_as() const {
    return static_cast<T*>(obs);
  }
  template <class T>
  T* info_as(std::size_t i) const {
    return static_cast<T*>(info[i]);
  }
};

}  // namespace aiopool
