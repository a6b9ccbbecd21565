// MiniGrid-RedBlueDoors-*: minigrid 3.2.0's RedBlueDoorEnv (envs/redbluedoors.py). A red door
// on the left wall, a blue one on the right; opening the blue one after the red one succeeds,
// opening it first (or the red one after it) fails.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class RedBlueDoorEnv : public MiniGrid<RedBlueDoorEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return {int_key("size", 8), max_steps_key()}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit RedBlueDoorEnv(const Config& c) : size_(static_cast<int>(c.get_int("size"))) {
    width = 2 * size_, height = size_;
    max_steps = max_steps_of(c, 20 * size_ * size_);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, 2 * size_, size_, wall());
    grid.wall_rect(size_ / 2, 0, size_, size_, wall());
    place_agent(size_ / 2, 0, size_, size_);
    red_ = door(kRed);
    grid.set(size_ / 2, rand_int(1, size_ - 1), red_);
    blue_ = door(kBlue);
    grid.set(size_ / 2 + size_ - 1, rand_int(1, size_ - 1), blue_);
    mission = "open the red door then the blue door";
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    const bool red_before = obj(red_).is_open, blue_before = obj(blue_).is_open;
    StepResult s = World::step(*action);
    if (obj(blue_).is_open) {
      s.reward = red_before ? success_reward() : 0.0;
      s.terminated = true;
    } else if (obj(red_).is_open && blue_before) {
      s.reward = 0.0;
      s.terminated = true;
    }
    return s;
  }

 private:
  int size_;
  ObjId red_ = kNone, blue_ = kNone;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-RedBlueDoors-6x6-v0", RedBlueDoorEnv, {"size", 6});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-RedBlueDoors-8x8-v0", RedBlueDoorEnv);

}  // namespace aiopool::minigrid
