// The "limit" row of benchmarks/throughput.py for the Atari envs: ALE with ale-py's vector-env
// preprocessing (aiopool's Atari env class, default options), one thread, no pool.
//
// As cartpole_limit.cc: steps M envs round-robin with precomputed random actions, resets an env
// when its episode ends, and writes every observation into an M-row buffer. It links the same
// ALE build as the _atari module, with the same flags (target `atari_limit` in
// cmake/atari.cmake; throughput.py builds it in the pip build directory).
//
// Usage: atari_limit ROM_PATH NUM_ENVS SECONDS   ->   one line of JSON on stdout.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../aiopool/_native/envs/atari/atari.h"

namespace {

using Env = aiopool::atari::Atari;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kActionRounds = 64;  // distinct action vectors, cycled

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ROM_PATH NUM_ENVS SECONDS\n", argv[0]);
    return 2;
  }
  ale::Logger::setMode(ale::Logger::Error);
  const std::size_t num_envs = std::strtoul(argv[2], nullptr, 10);
  const double seconds = std::strtod(argv[3], nullptr);

  std::map<std::string, double> values;
  for (const aiopool::ConfigKey& key : Env::config_keys()) values[key.name] = key.default_value;
  const aiopool::Config config(std::move(values), {{"rom_path", argv[1]}});
  const aiopool::EnvSpec spec = Env::spec(config);
  const std::size_t obs_bytes = spec.observation_space.nbytes();

  std::vector<Env> envs;
  std::vector<aiopool::Rng> rngs;
  envs.reserve(num_envs);
  for (std::size_t i = 0; i < num_envs; ++i) {
    envs.emplace_back(config);
    rngs.emplace_back(0, i, 0, 2 * i + 1, static_cast<int64_t>(i));  // seed i, as seed=0 gives env i
  }
  std::vector<int64_t> actions(kActionRounds * num_envs);
  std::mt19937_64 gen(0);
  for (int64_t& a : actions) a = static_cast<int64_t>(gen() % static_cast<uint64_t>(spec.action_space.n));

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
  while (now < deadline) {
    const int64_t* round_actions = actions.data() + (round % kActionRounds) * num_envs;
    for (std::size_t i = 0; i < num_envs; ++i) {
      const aiopool::StepResult r = envs[i].step(round_actions + i, rngs[i]);
      reward_sum += r.reward;
      if ((r.terminated && !r.continues) || r.truncated) {
        envs[i].reset(rngs[i]);
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

  unsigned checksum = 0;
  for (unsigned char b : obs) checksum = checksum * 31u + b;
  std::printf(
      "{\"rom_path\": \"%s\", \"num_envs\": %zu, \"steps\": %lld, \"seconds\": %.6f, "
      "\"steps_per_s\": %.1f, \"episodes\": %lld, \"reward_sum\": %.1f, \"checksum\": %u}\n",
      argv[1], num_envs, static_cast<long long>(steps), elapsed_s, static_cast<double>(steps) / elapsed_s,
      static_cast<long long>(episodes), reward_sum, checksum);
  return 0;
}
