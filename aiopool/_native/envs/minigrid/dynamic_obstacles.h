// MiniGrid-Dynamic-Obstacles-*: minigrid 3.2.0's DynamicObstaclesEnv (envs/dynamicobstacles.py).
// Balls that each move to a random free cell of their 3x3 neighbourhood before every step
// (place_obj with max_tries=100; a ball with no room stays); walking into anything but the
// goal costs -1 and ends the episode. Three actions: left, right, forward.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class DynamicObstaclesEnv : public MiniGrid<DynamicObstaclesEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("size", 8), pos_key("agent_start_pos", 1, 1), int_key("agent_start_dir", 0),
            int_key("n_obstacles", 4), max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(3); }
  explicit DynamicObstaclesEnv(const Config& c)
      : fixed_start_(pos_of(c, "agent_start_pos", start_x_, start_y_)) {
    width = height = static_cast<int>(c.get_int("size"));
    start_dir_ = static_cast<int>(c.get_int("agent_start_dir"));
    const int64_t n = c.get_int("n_obstacles");
    n_obstacles_ =
        static_cast<double>(n) <= width / 2.0 + 1 ? static_cast<int>(n) : static_cast<int>(width / 2.0);
    max_steps = max_steps_of(c, 4 * width * width);
    see_through_walls = true;
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    grid.set(width - 2, height - 2, add(kGoal, kGreen));
    start_agent(fixed_start_, start_x_, start_y_, start_dir_);
    obstacles_.clear();
    for (int i = 0; i < n_obstacles_; ++i) {
      obstacles_.push_back(add(kBall, kBlue));
      place_obj(obstacles_.back(), 0, 0, -1, -1, nullptr, 100);
    }
    mission = "get to the green goal square";
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    const ObjId front = grid.get(front_x(), front_y());
    const bool not_clear = front != kNone && obj(front).type != kGoal;
    for (ObjId o : obstacles_) {
      const int old_x = obj(o).x, old_y = obj(o).y;
      try {
        place_obj(o, old_x - 1, old_y - 1, 3, 3, nullptr, 100);
        grid.set(old_x, old_y, kNone);
      } catch (const RejectionFailed&) {  // the ball stays
      }
    }
    StepResult s = World::step(*action);
    if (*action == kForward && not_clear) s.reward = -1.0, s.terminated = true;
    return s;
  }

 private:
  int start_x_ = 1, start_y_ = 1, start_dir_ = 0, n_obstacles_ = 4;
  bool fixed_start_;
  std::vector<ObjId> obstacles_;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-Dynamic-Obstacles-5x5-v0", DynamicObstaclesEnv, {"size", 5},
                          {"n_obstacles", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Dynamic-Obstacles-Random-5x5-v0", DynamicObstaclesEnv, {"size", 5},
                          {"agent_start_pos", kNoDefault}, {"n_obstacles", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Dynamic-Obstacles-6x6-v0", DynamicObstaclesEnv, {"size", 6},
                          {"n_obstacles", 3});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Dynamic-Obstacles-Random-6x6-v0", DynamicObstaclesEnv, {"size", 6},
                          {"agent_start_pos", kNoDefault}, {"n_obstacles", 3});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Dynamic-Obstacles-8x8-v0", DynamicObstaclesEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Dynamic-Obstacles-16x16-v0", DynamicObstaclesEnv, {"size", 16},
                          {"n_obstacles", 8});

}  // namespace aiopool::minigrid
