// MiniGrid-DistShift*: minigrid 3.2.0's DistShiftEnv (envs/distshift.py). Two strips of lava
// between the agent and the goal; the second at row strip2_row.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class DistShiftEnv : public MiniGrid<DistShiftEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("width", 9),           int_key("height", 7),     pos_key("agent_start_pos", 1, 1),
            int_key("agent_start_dir", 0), int_key("strip2_row", 2), max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit DistShiftEnv(const Config& c) : fixed_start_(pos_of(c, "agent_start_pos", start_x_, start_y_)) {
    width = static_cast<int>(c.get_int("width"));
    height = static_cast<int>(c.get_int("height"));
    start_dir_ = static_cast<int>(c.get_int("agent_start_dir"));
    strip2_row_ = static_cast<int>(c.get_int("strip2_row"));
    max_steps = max_steps_of(c, 4 * width * height);
    see_through_walls = true;
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    put_obj(add(kGoal, kGreen), width - 2, 1);
    const ObjId lava = add(kLava, kRed);
    for (int i = 0; i < width - 6; ++i) {
      grid.set(3 + i, 1, lava);
      grid.set(3 + i, strip2_row_, lava);
    }
    start_agent(fixed_start_, start_x_, start_y_, start_dir_);
    mission = "get to the green goal square";
  }

 private:
  int start_x_ = 1, start_y_ = 1, start_dir_ = 0, strip2_row_ = 2;
  bool fixed_start_;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-DistShift1-v0", DistShiftEnv, {"strip2_row", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-DistShift2-v0", DistShiftEnv, {"strip2_row", 5});

}  // namespace aiopool::minigrid
