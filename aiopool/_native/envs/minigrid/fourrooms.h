// MiniGrid-FourRooms-v0: minigrid 3.2.0's FourRoomsEnv (envs/fourrooms.py). Four rooms of a
// 19x19 grid joined by one gap in each inner wall; the agent and the goal anywhere, or at
// agent_pos / goal_pos.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class FourRoomsEnv : public MiniGrid<FourRoomsEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {no_pos_key("agent_pos"), no_pos_key("goal_pos"), int_key("max_steps", 100)};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit FourRoomsEnv(const Config& c)
      : agent_given_(pos_of(c, "agent_pos", agent_px_, agent_py_)),
        goal_given_(pos_of(c, "goal_pos", goal_x_, goal_y_)) {
    width = height = 19;
    max_steps = static_cast<int>(c.get_int("max_steps"));
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    const int room_w = width / 2, room_h = height / 2;
    for (int j = 0; j < 2; ++j)
      for (int i = 0; i < 2; ++i) {
        const int left = i * room_w, top = j * room_h, right = left + room_w, bottom = top + room_h;
        if (i + 1 < 2) {
          grid.vert_wall(right, top, room_h, wall());
          grid.set(right, rand_int(top + 1, bottom), kNone);
        }
        if (j + 1 < 2) {
          grid.horz_wall(left, bottom, room_w, wall());
          grid.set(rand_int(left + 1, right), bottom, kNone);
        }
      }
    if (agent_given_) {
      agent_x = agent_px_, agent_y = agent_py_;
      grid.set(agent_x, agent_y, kNone);
      agent_dir = rand_int(0, 4);
    } else {
      place_agent();
    }
    if (goal_given_)
      put_obj(add(kGoal, kGreen), goal_x_, goal_y_);
    else
      place_obj(add(kGoal, kGreen));
    mission = "reach the goal";
  }

 private:
  int agent_px_ = 0, agent_py_ = 0, goal_x_ = 0, goal_y_ = 0;
  bool agent_given_, goal_given_;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-FourRooms-v0", FourRoomsEnv);

}  // namespace aiopool::minigrid
