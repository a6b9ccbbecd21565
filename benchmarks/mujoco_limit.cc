// The "limit" row of benchmarks/throughput.py for the MuJoCo v5 envs: raw MuJoCo, one thread.
//
// Steps M envs round-robin in a tight loop, as env_limit.cc does: one shared mjModel
// loaded from gymnasium's MJCF asset, one mjData per env. A step is what gymnasium's MujocoEnv
// does to the simulator: ctrl = a precomputed random float32 action in the actuators' ctrlrange
// widened to double, mj_step × frame_skip, mj_rnePostConstraint. An env is reset (mj_resetData,
// mj_forward) when its episode ends: at the registry's time limit, or, for Ant and Humanoid,
// when the torso leaves the env's healthy z range, so the limit steps the same kind of states as
// the pool does under random actions (Humanoid falls within ~20 steps; one left lying on the
// floor for 1000 steps, with many contacts, steps ~35 % slower). The other envs end at the time
// limit only. No observation, no reward, no reset noise: this is the physics alone, which the
// pool can approach × its worker threads, never beat.
//
// Built by throughput.py with the extension's flags, against the libmujoco aiopool links:
//   g++ -O3 -ffp-contract=off -std=c++20 -I<mujoco>/include mujoco_limit.cc
//       <mujoco>/libmujoco.so.3.17.0 -Wl,-rpath,<mujoco>
//       -DLIMIT_MUJOCO_ASSETS='"<gymnasium>/envs/mujoco/assets"'
//
// Usage: mujoco_limit ENV_ID NUM_ENVS SECONDS   ->   one line of JSON on stdout.
#include <mujoco/mujoco.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#ifndef LIMIT_MUJOCO_ASSETS
#error "define LIMIT_MUJOCO_ASSETS as gymnasium's envs/mujoco/assets directory"
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kActionRounds = 64;  // distinct action vectors, cycled
constexpr double kInf = INFINITY;

// The defaults of aiopool/_native/envs/mujoco/*.h (gymnasium's v5 constructors).
struct V5 {
  const char* id;
  const char* xml;
  int frame_skip;
  int64_t time_limit;
  double z_low, z_high;  // healthy torso height (qpos[2]), open or closed as the env has it
  bool z_inclusive;
};

constexpr V5 kEnvs[] = {
    {"Ant-v5", "ant.xml", 5, 1000, 0.2, 1.0, true},
    {"HalfCheetah-v5", "half_cheetah.xml", 5, 1000, -kInf, kInf, false},
    {"Hopper-v5", "hopper.xml", 4, 1000, -kInf, kInf, false},
    {"Walker2d-v5", "walker2d_v5.xml", 4, 1000, -kInf, kInf, false},
    {"Humanoid-v5", "humanoid.xml", 5, 1000, 1.0, 2.0, false},
    {"HumanoidStandup-v5", "humanoidstandup.xml", 5, 1000, -kInf, kInf, false},
    {"InvertedPendulum-v5", "inverted_pendulum.xml", 2, 1000, -kInf, kInf, false},
    {"InvertedDoublePendulum-v5", "inverted_double_pendulum.xml", 5, 1000, -kInf, kInf, false},
    {"Reacher-v5", "reacher.xml", 2, 50, -kInf, kInf, false},
    {"Pusher-v5", "pusher_v5.xml", 5, 100, -kInf, kInf, false},
    {"Swimmer-v5", "swimmer.xml", 4, 1000, -kInf, kInf, false},
};

bool healthy(const V5& env, double z) {
  if (std::isinf(env.z_low) && std::isinf(env.z_high)) return true;
  return env.z_inclusive ? env.z_low <= z && z <= env.z_high : env.z_low < z && z < env.z_high;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ENV_ID NUM_ENVS SECONDS\n", argv[0]);
    return 2;
  }
  const std::string env_id = argv[1];
  const std::size_t num_envs = std::strtoul(argv[2], nullptr, 10);
  const double seconds = std::strtod(argv[3], nullptr);
  const V5* env = nullptr;
  for (const V5& e : kEnvs)
    if (env_id == e.id) env = &e;
  if (env == nullptr || num_envs == 0) {
    std::fprintf(stderr, "unknown env id %s or no envs\n", env_id.c_str());
    return 2;
  }

  const std::string xml = std::string(LIMIT_MUJOCO_ASSETS) + "/" + env->xml;
  char error[1024] = "";
  std::unique_ptr<mjModel, void (*)(mjModel*)> model(mj_loadXML(xml.c_str(), nullptr, error, sizeof error),
                                                     &mj_deleteModel);
  if (!model) {
    std::fprintf(stderr, "MuJoCo could not load %s: %s\n", xml.c_str(), error);
    return 1;
  }
  const mjModel* m = model.get();
  const std::size_t nu = static_cast<std::size_t>(m->nu);

  std::vector<std::unique_ptr<mjData, void (*)(mjData*)>> datas;
  for (std::size_t i = 0; i < num_envs; ++i) {
    datas.emplace_back(mj_makeData(m), &mj_deleteData);
    mj_forward(m, datas.back().get());
  }
  std::vector<int64_t> elapsed(num_envs, 0);

  // kActionRounds × num_envs float32 actions, uniform in the float32-rounded ctrlrange.
  std::vector<float> actions(kActionRounds * num_envs * nu);
  std::mt19937_64 gen(0);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const std::size_t j = i % nu;
    std::uniform_real_distribution<double> u(static_cast<float>(m->actuator_ctrlrange[2 * j]),
                                             static_cast<float>(m->actuator_ctrlrange[2 * j + 1]));
    actions[i] = static_cast<float>(u(gen));
  }

  int64_t steps = 0;
  int64_t episodes = 0;
  std::size_t round = 0;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  auto now = start;
  while (now < deadline) {  // one round steps every env once; the clock is read per round
    const float* round_actions = actions.data() + (round % kActionRounds) * num_envs * nu;
    for (std::size_t i = 0; i < num_envs; ++i) {
      mjData* d = datas[i].get();
      for (std::size_t j = 0; j < nu; ++j) d->ctrl[j] = static_cast<double>(round_actions[i * nu + j]);
      for (int k = 0; k < env->frame_skip; ++k) mj_step(m, d);
      mj_rnePostConstraint(m, d);
      if (++elapsed[i] == env->time_limit || !healthy(*env, d->qpos[2])) {
        mj_resetData(m, d);
        mj_forward(m, d);
        elapsed[i] = 0;
        ++episodes;
      }
    }
    steps += static_cast<int64_t>(num_envs);
    ++round;
    now = Clock::now();
  }
  const double elapsed_s = std::chrono::duration<double>(now - start).count();

  double checksum = 0.0;  // keeps the physics observable
  for (const auto& d : datas) checksum += d->qpos[0] + d->cfrc_ext[6 * (m->nbody - 1)];
  std::printf(
      "{\"env_id\": \"%s\", \"num_envs\": %zu, \"steps\": %lld, \"seconds\": %.6f, "
      "\"steps_per_s\": %.1f, \"episodes\": %lld, \"frame_skip\": %d, \"checksum\": %.6g}\n",
      env_id.c_str(), num_envs, static_cast<long long>(steps), elapsed_s,
      static_cast<double>(steps) / elapsed_s, static_cast<long long>(episodes), env->frame_skip, checksum);
  return 0;
}
