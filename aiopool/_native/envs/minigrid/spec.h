// The MiniGrid family's spec and registration (minigrid 3.2.0): the observation row every env
// writes, minigrid's actions, the kwargs helpers, and AIOPOOL_REGISTER_MINIGRID, which
// registers an id with its registration kwargs (minigrid/__init__.py) as the env's defaults.
//
// The observation is minigrid's Dict(direction, image, mission), one row of bytes (obs_parts):
// direction (int64) at 0, the mission (int32 code points, kMissionWidth, zero-padded) at 8, the
// 7x7x3 uint8 image after it. Python presents the mission as a numpy `<U512` string, as the
// process backend presents minigrid's MissionSpace (spec.TEXT_WIDTH).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../registry.h"

namespace aiopool::minigrid {

inline constexpr int kViewSize = 7;  // agent_view_size
inline constexpr int64_t kMissionWidth = 512;
inline constexpr std::size_t kMissionOffset = 8;
inline constexpr std::size_t kImageOffset = kMissionOffset + kMissionWidth * 4;
inline constexpr std::size_t kImageBytes = kViewSize * kViewSize * 3;

// minigrid's Actions.
enum Action : int64_t { kLeft = 0, kRight, kForward, kPickup, kDrop, kToggle, kDone };

// place_obj's RecursionError: rejection sampling ran past max_tries.
struct RejectionFailed : std::runtime_error {
  RejectionFailed() : std::runtime_error("rejection sampling failed in place_obj") {}
};

// The spec every MiniGrid env has: Discrete(num_actions) actions (7, or 3 for Dynamic-Obstacles).
inline EnvSpec minigrid_spec(int64_t num_actions) {
  EnvSpec s;
  Space direction{Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 4};
  Space mission{Space::Kind::kText, DType::kInt32, {kMissionWidth}, {}, {}, 0};
  Space image{Space::Kind::kBox, DType::kUInt8, {kViewSize, kViewSize, 3}, {}, {}, 0};
  image.low.assign(kImageBytes, 0.0);
  image.high.assign(kImageBytes, 255.0);
  const int64_t bytes = static_cast<int64_t>(kImageOffset + kImageBytes);
  s.observation_space = {Space::Kind::kBox, DType::kUInt8, {bytes}, {}, {}, 0};
  s.observation_space.low.assign(static_cast<std::size_t>(bytes), 0.0);
  s.observation_space.high.assign(static_cast<std::size_t>(bytes), 255.0);
  s.obs_parts = {{"direction", direction}, {"mission", mission}, {"image", image}};
  s.obs_dict = true;
  s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, num_actions};
  s.chunk = 4;
  return s;
}

// `max_steps` (None: the env's formula of its size), as every env takes it.
inline ConfigKey max_steps_key() {
  return {"max_steps", ConfigKey::Kind::kOptionalInt, 0.0, "", {}, {}, true};
}
inline ConfigKey int_key(const char* name, double value) { return {name, ConfigKey::Kind::kInt, value}; }
inline ConfigKey pos_key(const char* name, int x, int y) {
  return {name, ConfigKey::Kind::kOptionalPos, 0.0, "", {}, {double(x), double(y)}};
}
inline ConfigKey no_pos_key(const char* name) {
  return {name, ConfigKey::Kind::kOptionalPos, 0.0, "", {}, {}, true};
}
inline int max_steps_of(const Config& c, int formula) {
  const double* v = c.find_number("max_steps");
  return v == nullptr ? formula : static_cast<int>(*v);
}
// An optional (x, y): false where it is None.
inline bool pos_of(const Config& c, const char* name, int& x, int& y) {
  const std::vector<double>* v = c.find_numbers(name);
  if (v == nullptr) return false;
  x = static_cast<int>((*v)[0]), y = static_cast<int>((*v)[1]);
  return true;
}

// One registered id: the env class with the id's registration kwargs as its defaults
// (minigrid/__init__.py): {"size", 5}, {"agent_start_pos", kNoDefault} (None),
// {"agent_room", 0, {2, 1}} or {"obstacle_type", 0, {}, "wall"}.
struct Default {
  const char* name;
  double value = 0.0;
  std::vector<double> numbers = {};
  std::string text = {};
};
inline constexpr double kNoDefault = -1e300;  // the kwarg's default is None

template <class E>
bool register_id(const char* id, std::vector<Default> defaults) {
  EnvEntry e = entry_for<E>(id, 0);  // minigrid truncates at its own max_steps
  e.config_keys = [defaults] {
    std::vector<ConfigKey> keys = E::config_keys();
    for (const Default& d : defaults) {
      bool found = false;
      for (ConfigKey& k : keys) {
        if (k.name != d.name) continue;
        found = true;
        if (!d.text.empty()) {
          k.default_string = d.text;
        } else {
          k.default_none = d.value == kNoDefault;
          k.default_value = d.value;
          k.default_numbers = d.numbers;
        }
      }
      if (!found) throw std::logic_error(std::string("minigrid: no config key ") + d.name);
    }
    return keys;
  };
  return Registry::get().add(std::move(e));
}

}  // namespace aiopool::minigrid

#define AIOPOOL_REGISTER_MINIGRID(id, Class, ...)                      \
  static const bool AIOPOOL_CONCAT(aiopool_registered_, __COUNTER__) = \
      ::aiopool::minigrid::register_id<Class>(id, {__VA_ARGS__})
