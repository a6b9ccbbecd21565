// MiniGrid-Playground-v0: minigrid 3.2.0's PlaygroundEnv (envs/playground.py). Nine rooms
// joined by doors of random colours, twelve random keys, balls and boxes, no mission (an empty
// string) and no reward.
#pragma once

#include "things.h"

namespace aiopool::minigrid {

class PlaygroundEnv : public MiniGrid<PlaygroundEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return {int_key("max_steps", 100)}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit PlaygroundEnv(const Config& c) {
    width = height = 19;
    max_steps = static_cast<int>(c.get_int("max_steps"));
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    const int room_w = width / 3, room_h = height / 3;
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 3; ++i) {
        const int left = i * room_w, top = j * room_h, right = left + room_w, bottom = top + room_h;
        if (i + 1 < 3) {
          grid.vert_wall(right, top, room_h, wall());
          const int y = rand_int(top + 1, bottom - 1);
          grid.set(right, y, door(rand_color()));
        }
        if (j + 1 < 3) {
          grid.horz_wall(left, bottom, room_w, wall());
          const int x = rand_int(left + 1, right - 1);
          grid.set(x, bottom, door(rand_color()));
        }
      }
    place_agent();
    for (int i = 0; i < 12; ++i) {
      const Type type = rand_elem(kThings);
      const Color color = rand_color();
      place_obj(add(type, color));
    }
    mission.clear();
  }
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-Playground-v0", PlaygroundEnv);

}  // namespace aiopool::minigrid
