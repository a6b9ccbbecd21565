// MiniGrid-GoToDoor-*: minigrid 3.2.0's GoToDoorEnv (envs/gotodoor.py). A room of random size
// with four doors of distinct colours; the mission names one, `done` beside it succeeds, and
// `toggle` or `done` ends the episode.
#pragma once

#include "things.h"

namespace aiopool::minigrid {

class GoToDoorEnv : public MiniGrid<GoToDoorEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return {int_key("size", 5), max_steps_key()}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit GoToDoorEnv(const Config& c) {
    width = height = static_cast<int>(c.get_int("size"));
    if (width < 5) throw std::invalid_argument("GoToDoor: size must be >= 5");
    max_steps = max_steps_of(c, 4 * width * width);
    see_through_walls = true;
  }

  void gen_grid() {
    const int w = rand_int(5, width + 1);
    const int h = rand_int(5, height + 1);
    grid.wall_rect(0, 0, w, h, wall());
    int doors[4][2];  // in minigrid's order of draws: top, bottom, left, right
    doors[0][0] = rand_int(2, w - 2), doors[0][1] = 0;
    doors[1][0] = rand_int(2, w - 2), doors[1][1] = h - 1;
    doors[2][0] = 0, doors[2][1] = rand_int(2, h - 2);
    doors[3][0] = w - 1, doors[3][1] = rand_int(2, h - 2);
    std::vector<Color> colors;
    while (colors.size() < 4) {
      const Color color = rand_color();
      bool seen = false;
      for (Color c : colors) seen = seen || c == color;
      if (!seen) colors.push_back(color);
    }
    for (int k = 0; k < 4; ++k) grid.set(doors[k][0], doors[k][1], door(colors[static_cast<std::size_t>(k)]));
    place_agent(0, 0, w, h);
    const int target = rand_int(0, 4);
    target_x_ = doors[target][0], target_y_ = doors[target][1];
    mission = std::string("go to the ") + kColorWords[colors[static_cast<std::size_t>(target)]] + " door";
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    return go_to_step(*this, *action, target_x_, target_y_);
  }

 private:
  int target_x_ = 0, target_y_ = 0;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-GoToDoor-5x5-v0", GoToDoorEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-GoToDoor-6x6-v0", GoToDoorEnv, {"size", 6});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-GoToDoor-8x8-v0", GoToDoorEnv, {"size", 8});

}  // namespace aiopool::minigrid
