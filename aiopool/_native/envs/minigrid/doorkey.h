// MiniGrid-DoorKey-*: minigrid 3.2.0's DoorKeyEnv (envs/doorkey.py). A wall splits the room;
// the key to its locked yellow door lies on the agent's side, the goal on the other.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class DoorKeyEnv : public MiniGrid<DoorKeyEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return {int_key("size", 8), max_steps_key()}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit DoorKeyEnv(const Config& c) {
    width = height = static_cast<int>(c.get_int("size"));
    max_steps = max_steps_of(c, 10 * width * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    put_obj(add(kGoal, kGreen), width - 2, height - 2);
    const int split = rand_int(2, width - 2);
    grid.vert_wall(split, 0, height, wall());
    place_agent(0, 0, split, height);
    const int door_y = rand_int(1, height - 2);
    put_obj(door(kYellow, false, true), split, door_y);
    place_obj(add(kKey, kYellow), 0, 0, split, height);
    mission = "use the key to open the door and then get to the goal";
  }
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-DoorKey-5x5-v0", DoorKeyEnv, {"size", 5});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-DoorKey-6x6-v0", DoorKeyEnv, {"size", 6});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-DoorKey-8x8-v0", DoorKeyEnv, {"size", 8});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-DoorKey-16x16-v0", DoorKeyEnv, {"size", 16});

}  // namespace aiopool::minigrid
