// MiniGrid-LavaGapS*: minigrid 3.2.0's LavaGapEnv (envs/lavagap.py) with its Lava obstacle: a
// vertical strip of lava with one gap between the agent and the goal.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class LavaGapEnv : public MiniGrid<LavaGapEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return {int_key("size", 5), max_steps_key()}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit LavaGapEnv(const Config& c) {
    width = height = static_cast<int>(c.get_int("size"));
    if (width < 5) throw std::invalid_argument("LavaGap: size must be >= 5");
    max_steps = max_steps_of(c, 4 * width * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    agent_x = agent_y = 1, agent_dir = 0;
    put_obj(add(kGoal, kGreen), width - 2, height - 2);
    const int gap_x = rand_int(2, width - 2);
    const int gap_y = rand_int(1, height - 1);
    grid.vert_wall(gap_x, 1, height - 2, add(kLava, kRed));
    grid.set(gap_x, gap_y, kNone);
    mission = "avoid the lava and get to the green goal square";
  }
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaGapS5-v0", LavaGapEnv, {"size", 5});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaGapS6-v0", LavaGapEnv, {"size", 6});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaGapS7-v0", LavaGapEnv, {"size", 7});

}  // namespace aiopool::minigrid
