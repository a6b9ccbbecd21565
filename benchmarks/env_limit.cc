// The "limit" row of benchmarks/throughput.py: the raw simulator, one thread, no pool.
//
// Steps M envs round-robin in a tight loop with precomputed random actions, resets an env when
// its episode ends (terminated, or gymnasium's time limit from the registry), and writes every
// observation into an M-row buffer, as the pool's workers write rows into a batch block. No
// queue, no doorbell, no Python: the pool can approach this rate × cores, never beat it.
//
// Built by throughput.py with `g++ -O3 -ffp-contract=off -std=c++20` (the extension's flags).
// It steps CartPole; `-DLIMIT_ENV_HEADER='"<header>"' -DLIMIT_ENV=<class>` steps another env
// header the same way (the smoke test uses Counting-v0; cmake/atari.cmake builds the Atari one
// against the module's ALE, with `-DLIMIT_SETUP=<statement>` to silence ALE's banner).
//
// Usage: env_limit ENV_ID NUM_ENVS SECONDS [KEY=VALUE ...]   ->   one line of JSON on stdout.
// KEY=VALUE overrides a config key's default (Atari: rom_path=<file>). SECONDS may instead be
// rounds=R: R rounds whatever they take, the same work on every run (cmake/box2d.cmake trains
// its profile-guided Box2D build so).
#ifndef LIMIT_ENV_HEADER
#define LIMIT_ENV_HEADER "../aiopool/_native/envs/classic_control/cartpole.h"
#define LIMIT_ENV ::aiopool::CartPole
#endif
#include LIMIT_ENV_HEADER
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../aiopool/_native/registry.h"

namespace {

using Env = LIMIT_ENV;

bool registered(const std::string& env_id) {
  for (const std::string& id : aiopool::Registry::get().ids())
    if (id == env_id) return true;
  return false;
}
using Action = Env::Action;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kActionRounds = 64;  // distinct action vectors, cycled

// The id's defaults (an env class may register ids with defaults of their own: MiniGrid's
// sizes), with KEY=VALUE arguments overriding them.
aiopool::Config make_config(const std::string& env_id, int argc, char** argv) {
  std::map<std::string, double> values;
  std::map<std::string, std::string> strings;
  std::map<std::string, std::vector<double>> ranges;
  std::map<std::string, aiopool::ConfigKey::Kind> kinds;
  const std::vector<aiopool::ConfigKey> keys =
      registered(env_id) ? aiopool::Registry::get().find(env_id).config_keys() : Env::config_keys();
  for (const aiopool::ConfigKey& key : keys) {
    kinds[key.name] = key.kind;
    if (key.kind == aiopool::ConfigKey::Kind::kString) {
      strings[key.name] = key.default_string;
    } else if (key.kind == aiopool::ConfigKey::Kind::kOptionalString ||
               key.kind == aiopool::ConfigKey::Kind::kLines) {
      if (!key.default_string.empty()) strings[key.name] = key.default_string;  // "": None, left out
    } else if (key.kind == aiopool::ConfigKey::Kind::kRange) {
      ranges[key.name] = {key.default_range[0], key.default_range[1]};
    } else if (key.kind == aiopool::ConfigKey::Kind::kNumbers ||
               key.kind == aiopool::ConfigKey::Kind::kOptionalPos) {
      if (!key.default_none) ranges[key.name] = key.default_numbers;  // None, left out
    } else if (key.kind == aiopool::ConfigKey::Kind::kOptionalInt) {
      if (!key.default_none) values[key.name] = key.default_value;
    } else {
      values[key.name] = key.default_value;
    }
  }
  for (int a = 4; a < argc; ++a) {
    const std::string arg = argv[a];
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (eq == std::string::npos || !kinds.count(name) || kinds[name] == aiopool::ConfigKey::Kind::kRange ||
        kinds[name] == aiopool::ConfigKey::Kind::kNumbers) {
      std::fprintf(stderr, "bad override '%s': expected KEY=VALUE of a number or string key\n", argv[a]);
      std::exit(2);
    }
    if (kinds[name] == aiopool::ConfigKey::Kind::kString ||
        kinds[name] == aiopool::ConfigKey::Kind::kOptionalString ||
        kinds[name] == aiopool::ConfigKey::Kind::kLines)
      strings[name] = arg.substr(eq + 1);
    else
      values[name] = std::strtod(arg.c_str() + eq + 1, nullptr);
  }
  return aiopool::Config(std::move(values), std::move(strings), std::move(ranges));
}

// gymnasium's time limit of env_id, when this binary registers it (0: none).
int64_t time_limit_of(const std::string& env_id) {
  return registered(env_id) ? aiopool::Registry::get().find(env_id).max_episode_steps : 0;
}

// kActionRounds × num_envs actions drawn uniformly from the action space.
std::vector<Action> random_actions(const aiopool::Space& space, std::size_t num_envs) {
  const std::size_t per_env = static_cast<std::size_t>(space.size());
  std::vector<Action> out(kActionRounds * num_envs * per_env);
  std::mt19937_64 gen(0);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (space.kind == aiopool::Space::Kind::kDiscrete) {
      out[i] = static_cast<Action>(gen() % static_cast<uint64_t>(space.n));
    } else {
      const std::size_t k = i % per_env;
      std::uniform_real_distribution<double> u(space.low[k], space.high[k]);
      out[i] = static_cast<Action>(u(gen));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s ENV_ID NUM_ENVS SECONDS|rounds=R [KEY=VALUE ...]\n", argv[0]);
    return 2;
  }
#ifdef LIMIT_SETUP
  LIMIT_SETUP;
#endif
  const std::string env_id = argv[1];
  const std::size_t num_envs = std::strtoul(argv[2], nullptr, 10);
  const std::string budget = argv[3];
  const bool by_rounds = budget.starts_with("rounds=");
  const double seconds = by_rounds ? 0.0 : std::strtod(budget.c_str(), nullptr);
  const std::size_t max_rounds = by_rounds ? std::strtoul(budget.c_str() + 7, nullptr, 10) : 0;
  if (by_rounds && max_rounds == 0) {
    std::fprintf(stderr, "rounds=R needs R >= 1\n");
    return 2;
  }

  const aiopool::Config config = make_config(env_id, argc, argv);
  const aiopool::EnvSpec spec = Env::spec(config);
  const int64_t time_limit = time_limit_of(env_id);
  const std::size_t action_size = static_cast<std::size_t>(spec.action_space.size());
  const std::size_t obs_bytes = spec.observation_space.nbytes();

  std::vector<Env> envs;
  std::vector<aiopool::Rng> rngs;
  for (std::size_t i = 0; i < num_envs; ++i) {
    envs.emplace_back(config);
    // Any state (the increment must be odd); integer seed i, as a pool seeded 0 gives env i.
    rngs.emplace_back(0, i, 0, 2 * i + 1, static_cast<int64_t>(i));
  }
  std::vector<int64_t> elapsed(num_envs, 0);
  const std::vector<Action> actions = random_actions(spec.action_space, num_envs);

  // One row per env: the observation and each info field, as in a batch block.
  std::vector<unsigned char> obs(num_envs * obs_bytes);
  std::vector<std::vector<unsigned char>> info_buffers;
  for (const aiopool::Field& f : spec.info) info_buffers.emplace_back(num_envs * f.nbytes());
  std::vector<void*> info_ptrs(spec.info.size());
  auto row_of = [&](std::size_t i) {
    for (std::size_t k = 0; k < spec.info.size(); ++k)
      info_ptrs[k] = info_buffers[k].data() + i * spec.info[k].nbytes();
    return aiopool::Row{obs.data() + i * obs_bytes, info_ptrs.data()};
  };
  for (std::size_t i = 0; i < num_envs; ++i) {
    envs[i].reset(rngs[i]);
    aiopool::Row row = row_of(i);
    envs[i].write(row);
  }

  int64_t steps = 0;
  int64_t episodes = 0;
  double reward_sum = 0.0;
  std::size_t round = 0;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  auto now = start;
  // One round steps every env once; the clock is read per round.
  while (by_rounds ? round < max_rounds : now < deadline) {
    const Action* round_actions = actions.data() + (round % kActionRounds) * num_envs * action_size;
    for (std::size_t i = 0; i < num_envs; ++i) {
      const aiopool::StepResult r = envs[i].step(round_actions + i * action_size, rngs[i]);
      reward_sum += r.reward;
      if ((r.terminated && !r.continues) || r.truncated || ++elapsed[i] == time_limit) {
        envs[i].reset(rngs[i]);
        elapsed[i] = 0;
        ++episodes;
      }
      aiopool::Row row = row_of(i);
      envs[i].write(row);
    }
    steps += static_cast<int64_t>(num_envs);
    ++round;
    now = Clock::now();
  }
  const double elapsed_s = std::chrono::duration<double>(now - start).count();

  unsigned checksum = 0;  // keeps the observation writes observable
  for (unsigned char b : obs) checksum = checksum * 31u + b;
  std::printf(
      "{\"env_id\": \"%s\", \"num_envs\": %zu, \"steps\": %lld, \"seconds\": %.6f, "
      "\"steps_per_s\": %.1f, \"episodes\": %lld, \"reward_sum\": %.1f, \"checksum\": %u}\n",
      env_id.c_str(), num_envs, static_cast<long long>(steps), elapsed_s,
      static_cast<double>(steps) / elapsed_s, static_cast<long long>(episodes), reward_sum, checksum);
  return 0;
}
