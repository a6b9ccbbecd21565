// MiniGrid-Empty-*: minigrid 3.2.0's EmptyEnv (envs/empty.py). An empty room, the goal in the
// far corner; the agent starts at agent_start_pos facing agent_start_dir, or (None, the
// Random ids) anywhere, facing anywhere.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class EmptyEnv : public MiniGrid<EmptyEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("size", 8), pos_key("agent_start_pos", 1, 1), int_key("agent_start_dir", 0),
            max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit EmptyEnv(const Config& c) : fixed_start_(pos_of(c, "agent_start_pos", start_x_, start_y_)) {
    width = height = static_cast<int>(c.get_int("size"));
    start_dir_ = static_cast<int>(c.get_int("agent_start_dir"));
    max_steps = max_steps_of(c, 4 * width * width);
    see_through_walls = true;
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    put_obj(add(kGoal, kGreen), width - 2, height - 2);
    start_agent(fixed_start_, start_x_, start_y_, start_dir_);
    mission = "get to the green goal square";
  }

 private:
  int start_x_ = 1, start_y_ = 1, start_dir_ = 0;
  bool fixed_start_;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-Empty-5x5-v0", EmptyEnv, {"size", 5});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Empty-Random-5x5-v0", EmptyEnv, {"size", 5},
                          {"agent_start_pos", kNoDefault});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Empty-6x6-v0", EmptyEnv, {"size", 6});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Empty-Random-6x6-v0", EmptyEnv, {"size", 6},
                          {"agent_start_pos", kNoDefault});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Empty-8x8-v0", EmptyEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Empty-16x16-v0", EmptyEnv, {"size", 16});

}  // namespace aiopool::minigrid
