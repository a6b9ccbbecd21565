// MiniGrid-LockedRoom-v0: minigrid 3.2.0's LockedRoomEnv (envs/lockedroom.py). Six side rooms
// off a corridor, each behind a door of its own colour; the goal is in the locked one, its key
// in another.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class LockedRoomEnv : public MiniGrid<LockedRoomEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return {int_key("size", 19), max_steps_key()}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit LockedRoomEnv(const Config& c) {
    width = height = static_cast<int>(c.get_int("size"));
    max_steps = max_steps_of(c, 10 * width);
  }

  void gen_grid() {
    for (int i = 0; i < width; ++i) grid.set(i, 0, wall()), grid.set(i, height - 1, wall());
    for (int j = 0; j < height; ++j) grid.set(0, j, wall()), grid.set(width - 1, j, wall());
    const int left = width / 2 - 2, right = width / 2 + 2;
    for (int j = 0; j < height; ++j) grid.set(left, j, wall()), grid.set(right, j, wall());
    std::vector<Room> rooms;
    for (int n = 0; n < 3; ++n) {
      const int j = n * (height / 3);
      for (int i = 0; i < left; ++i) grid.set(i, j, wall());
      for (int i = right; i < width; ++i) grid.set(i, j, wall());
      const int room_w = left + 1, room_h = height / 3 + 1;
      rooms.push_back({0, j, room_w, room_h, left, j + 3, kRed});
      rooms.push_back({right, j, room_w, room_h, right, j + 3, kRed});
    }
    const std::size_t locked = static_cast<std::size_t>(rand_int(0, 6));
    const auto goal = rand_pos(rooms[locked]);
    grid.set(goal.first, goal.second, add(kGoal, kGreen));
    std::vector<Color> colors(kColorNames.begin(), kColorNames.end());  // sorted(set(COLOR_NAMES))
    for (std::size_t k = 0; k < rooms.size(); ++k) {
      const std::size_t c = static_cast<std::size_t>(rand_int(0, static_cast<int>(colors.size())));
      rooms[k].color = colors[c];
      colors.erase(colors.begin() + static_cast<std::ptrdiff_t>(c));
      grid.set(rooms[k].door_x, rooms[k].door_y, door(rooms[k].color, false, k == locked));
    }
    std::size_t key_room;
    do {
      key_room = static_cast<std::size_t>(rand_int(0, 6));
    } while (key_room == locked);
    const auto key = rand_pos(rooms[key_room]);
    grid.set(key.first, key.second, add(kKey, rooms[locked].color));
    place_agent(left, 0, right - left, height);
    const std::string lc = kColorWords[rooms[locked].color];
    mission = "get the " + lc + " key from the " + kColorWords[rooms[key_room].color] + " room, unlock the " +
              lc + " door and go to the goal";
  }

 private:
  struct Room {
    int top_x, top_y, size_x, size_y, door_x, door_y;
    Color color;
  };
  // LockedRoom.rand_pos: _rand_pos over the room's inside, x then y.
  std::pair<int, int> rand_pos(const Room& r) {
    const int x = rand_int(r.top_x + 1, r.top_x + r.size_x - 1);
    const int y = rand_int(r.top_y + 1, r.top_y + r.size_y - 1);
    return {x, y};
  }
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-LockedRoom-v0", LockedRoomEnv);

}  // namespace aiopool::minigrid
