// Counting-v0: a deterministic env for testing the pool itself (and a user's pipeline).
//
// Every reset or step of an env bumps its event counter, so a consumer can check that each
// env-step arrives exactly once and in order per env. obs = [events, episode, elapsed,
// last_action]; reward = action; terminated when elapsed reaches `episode_length`. Each reset
// draws one uniform from the env's rng into info["draw"] (so seeding is observable), and
// `step_ns` / `jitter_ns` make a step busy-wait to mimic a costly env and shuffle finish order.
#pragma once

#include <cstdint>
#include <vector>

#include "../../action_queue.h"
#include "../../env.h"
#include "../../registry.h"

namespace aiopool {

class Counting {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> config_keys() {
    return {{"episode_length", ConfigKey::Kind::kInt, 10},
            {"num_actions", ConfigKey::Kind::kInt, 1000},
            {"step_ns", ConfigKey::Kind::kInt, 0},
            {"jitter_ns", ConfigKey::Kind::kInt, 0},
            {"chunk", ConfigKey::Kind::kInt, 1}};
  }

  static EnvSpec spec(const Config& c) {
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox, DType::kInt64, {4}, {0, 0, 0, 0}, {1e18, 1e18, 1e18, 1e18}, 0};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, c.get_int("num_actions")};
    s.info = {{"draw", DType::kFloat64, {}}, {"events_parity", DType::kInt32, {}}};
    s.chunk = static_cast<int>(c.get_int("chunk"));
    return s;
  }

  explicit Counting(const Config& c)
      : episode_length_(c.get_int("episode_length")),
        step_ns_(c.get_int("step_ns")),
        jitter_ns_(c.get_int("jitter_ns")) {}

  void reset(Rng& rng) {
    ++events_;
    ++episode_;
    elapsed_ = 0;
    last_action_ = -1;
    draw_ = rng.next_double();
  }

  StepResult step(const Action* action, Rng& rng) {
    if (step_ns_ > 0 || jitter_ns_ > 0) {
      int64_t wait = step_ns_;
      if (jitter_ns_ > 0) wait += static_cast<int64_t>(rng.next_double() * static_cast<double>(jitter_ns_));
      const int64_t until = now_ns() + wait;
      while (now_ns() < until) cpu_relax();
    }
    ++events_;
    ++elapsed_;
    last_action_ = *action;
    return {static_cast<double>(*action), elapsed_ >= episode_length_, false};
  }

  void write(Row& row) const {
    int64_t* obs = row.obs_as<int64_t>();
    obs[0] = events_;
    obs[1] = episode_;
    obs[2] = elapsed_;
    obs[3] = last_action_;
    *row.info_as<double>(0) = draw_;
    *row.info_as<int32_t>(1) = static_cast<int32_t>(events_ % 2);
  }

 private:
  int64_t episode_length_, step_ns_, jitter_ns_;
  int64_t events_ = 0, episode_ = -1, elapsed_ = 0, last_action_ = -1;
  double draw_ = 0.0;
};

AIOPOOL_REGISTER_ENV("Counting-v0", Counting, 0);

}  // namespace aiopool
