// The "limit" row of benchmarks/throughput.py for the Control Suite: raw MuJoCo, one thread.
//
// Steps M envs round-robin in a tight loop, as mujoco_limit.cc does for the gymnasium family:
// one shared mjModel loaded from the task's compiled model (the MJB file dm_control builds and
// the C++ envs load), one mjData per env. A step is what dm_control's control.Environment does
// to the simulator: ctrl = a precomputed random action in the actuators' ctrlrange (float64, as
// dm_control's action spec), then Physics.step's legacy stepping of the task's n_sub_steps
// (mj_step2, mj_step n - 1 times, mj_step1; RK4: mj_step n times, then mj_step1). An env is
// reset at the task's step limit: mj_resetData, then the physics steps the task's own reset takes
// (RESET_STEPS, counted in dm_control's reset by throughput.py: cheetah lets its model settle for
// 200, most tasks take none), then mj_forward. No task: no initial state drawn, no observation,
// no reward; this is the physics alone, which the pool can approach × its worker threads, never
// beat (without the reset's steps it could not be approached: cheetah's reset is a sixth of its
// physics).
//
// Built by throughput.py with the extension's flags, against the libmujoco aiopool links:
//   g++ -O3 -ffp-contract=off -std=c++20 -I<mujoco>/include dmc_limit.cc
//       <mujoco>/libmujoco.so.3.17.0 -Wl,-rpath,<mujoco>
//
// Usage: dmc_limit ENV_ID NUM_ENVS SECONDS|rounds=R MODEL.mjb N_SUB_STEPS STEP_LIMIT [RESET_STEPS]
//   ->   one line of JSON on stdout. rounds=R: R rounds whatever they take, the same work (and
//   checksum) on every run.
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

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kActionRounds = 64;  // distinct action vectors, cycled

void legacy_step(const mjModel* m, mjData* d, int n_sub_steps) {
  if (m->opt.integrator != mjINT_RK4) {
    mj_step2(m, d);
    for (int i = 1; i < n_sub_steps; ++i) mj_step(m, d);
  } else {
    for (int i = 0; i < n_sub_steps; ++i) mj_step(m, d);
  }
  mj_step1(m, d);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(
        stderr, "usage: %s ENV_ID NUM_ENVS SECONDS|rounds=R MODEL.mjb N_SUB_STEPS STEP_LIMIT [RESET_STEPS]\n",
        argv[0]);
    return 2;
  }
  const std::string env_id = argv[1];
  const std::size_t num_envs = std::strtoul(argv[2], nullptr, 10);
  const std::string budget = argv[3];
  const bool by_rounds = budget.starts_with("rounds=");
  const double seconds = by_rounds ? 0.0 : std::strtod(budget.c_str(), nullptr);
  const std::size_t max_rounds = by_rounds ? std::strtoul(budget.c_str() + 7, nullptr, 10) : 0;
  const std::string path = argv[4];
  const int n_sub_steps = std::atoi(argv[5]);
  const double limit = std::strtod(argv[6], nullptr);  // 0: none
  const int reset_steps = argc == 8 ? std::atoi(argv[7]) : 0;
  if (num_envs == 0 || n_sub_steps < 1 || reset_steps < 0 || (by_rounds && max_rounds == 0)) {
    std::fprintf(stderr, "no envs, N_SUB_STEPS < 1, RESET_STEPS < 0 or rounds=0\n");
    return 2;
  }
  std::unique_ptr<mjModel, void (*)(mjModel*)> model(mj_loadModel(path.c_str(), nullptr), &mj_deleteModel);
  if (!model) {
    std::fprintf(stderr, "MuJoCo could not load %s\n", path.c_str());
    return 1;
  }
  const mjModel* m = model.get();
  const std::size_t nu = static_cast<std::size_t>(m->nu);
  const int64_t step_limit = limit > 0 ? static_cast<int64_t>(std::ceil(limit)) : 0;

  std::vector<std::unique_ptr<mjData, void (*)(mjData*)>> datas;
  for (std::size_t i = 0; i < num_envs; ++i) {
    datas.emplace_back(mj_makeData(m), &mj_deleteData);
    mj_forward(m, datas.back().get());
  }
  std::vector<int64_t> elapsed(num_envs, 0);

  // kActionRounds × num_envs actions, uniform in the ctrlrange (dm_control's action bounds).
  std::vector<double> actions(kActionRounds * num_envs * nu);
  std::mt19937_64 gen(0);
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const std::size_t j = i % nu;
    const bool limited = m->actuator_ctrllimited[j];
    std::uniform_real_distribution<double> u(limited ? m->actuator_ctrlrange[2 * j] : -1.0,
                                             limited ? m->actuator_ctrlrange[2 * j + 1] : 1.0);
    actions[i] = u(gen);
  }

  int64_t steps = 0;
  int64_t episodes = 0;
  std::size_t round = 0;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  auto now = start;
  while (by_rounds ? round < max_rounds : now < deadline) {  // a round steps every env once
    const double* round_actions = actions.data() + (round % kActionRounds) * num_envs * nu;
    for (std::size_t i = 0; i < num_envs; ++i) {
      mjData* d = datas[i].get();
      for (std::size_t j = 0; j < nu; ++j) d->ctrl[j] = round_actions[i * nu + j];
      legacy_step(m, d, n_sub_steps);
      if (++elapsed[i] == step_limit) {
        mj_resetData(m, d);
        if (reset_steps > 0) legacy_step(m, d, reset_steps);  // zero controls, as after mj_resetData
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
  for (const auto& d : datas) checksum += d->qpos[0] + d->qvel[0];
  std::printf(
      "{\"env_id\": \"%s\", \"num_envs\": %zu, \"steps\": %lld, \"seconds\": %.6f, "
      "\"steps_per_s\": %.1f, \"episodes\": %lld, \"n_sub_steps\": %d, \"reset_steps\": %d, \"checksum\": "
      "%.6g}\n",
      env_id.c_str(), num_envs, static_cast<long long>(steps), elapsed_s,
      static_cast<double>(steps) / elapsed_s, static_cast<long long>(episodes), n_sub_steps, reset_steps,
      checksum);
  return 0;
}
