// MiniGrid-Memory*: minigrid 3.2.0's MemoryEnv (envs/memory.py). An object in the start room,
// a hallway, and two objects at its end; reaching the one that matches succeeds, the other
// fails. `pickup` acts as `toggle`.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class MemoryEnv : public MiniGrid<MemoryEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("size", 8), {"random_length", ConfigKey::Kind::kBool, 0.0}, max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit MemoryEnv(const Config& c) : random_length_(c.get_bool("random_length")) {
    width = height = static_cast<int>(c.get_int("size"));
    if (height % 2 != 1)
      throw std::invalid_argument("Memory: size must be odd (minigrid asserts it at reset)");
    max_steps = max_steps_of(c, 5 * width * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    const int upper = height / 2 - 2, lower = height / 2 + 2;
    const int hallway_end = random_length_ ? rand_int(4, width - 2) : width - 3;
    for (int i = 1; i < 5; ++i) grid.set(i, upper, wall()), grid.set(i, lower, wall());
    grid.set(4, upper + 1, wall());
    grid.set(4, lower - 1, wall());
    for (int i = 5; i < hallway_end; ++i) grid.set(i, upper + 1, wall()), grid.set(i, lower - 1, wall());
    for (int j = 0; j < height; ++j) {
      if (j != height / 2) grid.set(hallway_end, j, wall());
      grid.set(hallway_end + 2, j, wall());
    }
    agent_x = rand_int(1, hallway_end + 1), agent_y = height / 2, agent_dir = 0;
    const Type start = rand_int(0, 2) == 0 ? kKey : kBall;  // _rand_elem([Key, Ball])
    grid.set(1, height / 2 - 1, add(start, kGreen));
    const bool ball_first = rand_int(0, 2) == 0;  // _rand_elem([[Ball, Key], [Key, Ball]])
    const Type first = ball_first ? kBall : kKey, second = ball_first ? kKey : kBall;
    const int x = hallway_end + 1, y0 = height / 2 - 2, y1 = height / 2 + 2;
    grid.set(x, y0, add(first, kGreen));
    grid.set(x, y1, add(second, kGreen));
    success_x_ = failure_x_ = x;
    if (start == first)
      success_y_ = y0 + 1, failure_y_ = y1 - 1;
    else
      success_y_ = y1 - 1, failure_y_ = y0 + 1;
    mission = "go to the matching object at the end of the hallway";
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    StepResult s = World::step(*action == kPickup ? kToggle : *action);
    if (agent_x == success_x_ && agent_y == success_y_) s.reward = success_reward(), s.terminated = true;
    if (agent_x == failure_x_ && agent_y == failure_y_) s.reward = 0.0, s.terminated = true;
    return s;
  }

 private:
  bool random_length_;
  int success_x_ = 0, success_y_ = 0, failure_x_ = 0, failure_y_ = 0;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-MemoryS17Random-v0", MemoryEnv, {"size", 17}, {"random_length", 1});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MemoryS13Random-v0", MemoryEnv, {"size", 13}, {"random_length", 1});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MemoryS13-v0", MemoryEnv, {"size", 13});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MemoryS11-v0", MemoryEnv, {"size", 11});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MemoryS9-v0", MemoryEnv, {"size", 9});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MemoryS7-v0", MemoryEnv, {"size", 7});

}  // namespace aiopool::minigrid
