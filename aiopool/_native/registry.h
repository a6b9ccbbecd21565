// The env registry: id -> how to describe and build a group of envs. Registering an env is
// one line in its header:
//   AIOPOOL_REGISTER_ENV("CartPole-v1", CartPole, 500);   // id, class, gymnasium time limit
// Only a module file (core_module.cc, mujoco_module.cc, ...) and the native tests include env
// headers, so each registers once, in the registry of its own module.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "env.h"
#include "runner.h"

namespace aiopool {

struct EnvEntry {
  std::string id;
  int max_episode_steps = 0;
  // A std::function so that one class can serve many ids with per-id defaults (Atari: the ROM).
  std::function<std::vector<ConfigKey>()> config_keys;
  EnvSpec (*spec)(const Config&) = nullptr;
  std::unique_ptr<Runner> (*make_runner)(const Config&, const EnvSpec&, int, AutoReset) = nullptr;

  EnvSpec spec_for(const Config& config) const {
    EnvSpec s = spec(config);
    // The registered limit, unless the env works its own out of its config (the Control
    // Suite's: time_limit over the control timestep).
    if (s.max_episode_steps == 0) s.max_episode_steps = max_episode_steps;
    return s;
  }
};

class Registry {
 public:
  static Registry& get() {
    static Registry r;
    return r;
  }
  bool add(EnvEntry e) {
    const std::string id = e.id;
    if (!entries_.emplace(id, std::move(e)).second) throw std::logic_error("env id registered twice: " + id);
    return true;
  }
  const EnvEntry& find(const std::string& id) const {
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      std::string known;
      for (const auto& [k, v] : entries_) known += (known.empty() ? "" : ", ") + k;
      throw std::invalid_argument("unknown env id '" + id + "'; registered ids: " + known);
    }
    return it->second;
  }
  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : entries_) out.push_back(k);
    return out;
  }

 private:
  std::map<std::string, EnvEntry> entries_;
};

template <class E>
EnvEntry entry_for(const char* id, int max_episode_steps) {
  EnvEntry e;
  e.id = id;
  e.max_episode_steps = max_episode_steps;
  e.config_keys = &E::config_keys;
  e.spec = &E::spec;
  e.make_runner = [](const Config& c, const EnvSpec& s, int n, AutoReset m) -> std::unique_ptr<Runner> {
    return std::make_unique<EnvRunner<E>>(c, s, n, m);
  };
  return e;
}

}  // namespace aiopool

#define AIOPOOL_CONCAT_INNER(a, b) a##b
#define AIOPOOL_CONCAT(a, b) AIOPOOL_CONCAT_INNER(a, b)
#define AIOPOOL_REGISTER_ENV(id, Class, max_episode_steps)             \
  static const bool AIOPOOL_CONCAT(aiopool_registered_, __COUNTER__) = \
      ::aiopool::Registry::get().add(::aiopool::entry_for<Class>(id, max_episode_steps))
