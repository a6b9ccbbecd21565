// MiniGrid-MultiRoom-*: minigrid 3.2.0's MultiRoomEnv (envs/multiroom.py). A chain of rooms
// joined by closed doors of changing colours, grown by _placeRoom's recursive draws (the
// longest chain of several tries wins); the agent in the first room, the goal in the last.
#pragma once

#include "minigrid_env.h"

namespace aiopool::minigrid {

class MultiRoomEnv : public MiniGrid<MultiRoomEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("minNumRooms", 1), int_key("maxNumRooms", 1), int_key("maxRoomSize", 10),
            int_key("width", 25),      int_key("height", 25),     max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit MultiRoomEnv(const Config& c)
      : min_rooms_(static_cast<int>(c.get_int("minNumRooms"))),
        max_rooms_(static_cast<int>(c.get_int("maxNumRooms"))),
        max_room_size_(static_cast<int>(c.get_int("maxRoomSize"))) {
    if (min_rooms_ <= 0 || max_rooms_ < min_rooms_ || max_room_size_ < 4)
      throw std::invalid_argument("MultiRoom: needs 0 < minNumRooms <= maxNumRooms and maxRoomSize >= 4");
    width = static_cast<int>(c.get_int("width"));
    height = static_cast<int>(c.get_int("height"));
    max_steps = max_steps_of(c, max_rooms_ * 20);
  }

  void gen_grid() {
    std::vector<Room> rooms;
    const int num_rooms = rand_int(min_rooms_, max_rooms_ + 1);
    while (static_cast<int>(rooms.size()) < num_rooms) {
      std::vector<Room> current;
      const int door_x = rand_int(0, width - 2);
      const int door_y = rand_int(0, width - 2);  // minigrid draws both from the width
      place_room(num_rooms, current, 4, max_room_size_, 2, door_x, door_y);
      if (current.size() > rooms.size()) rooms = std::move(current);
    }
    int prev_color = -1;
    for (std::size_t idx = 0; idx < rooms.size(); ++idx) {
      const Room& room = rooms[idx];
      for (int i = 0; i < room.size_x; ++i) {
        grid.set(room.top_x + i, room.top_y, wall());
        grid.set(room.top_x + i, room.top_y + room.size_y - 1, wall());
      }
      for (int j = 0; j < room.size_y; ++j) {
        grid.set(room.top_x, room.top_y + j, wall());
        grid.set(room.top_x + room.size_x - 1, room.top_y + j, wall());
      }
      if (idx > 0) {
        std::vector<Color> colors;
        for (Color c : kColorNames)
          if (c != prev_color) colors.push_back(c);
        const Color color = rand_elem(colors);
        grid.set(room.door_x, room.door_y, door(color));
        prev_color = color;
      }
    }
    place_agent(rooms.front().top_x, rooms.front().top_y, rooms.front().size_x, rooms.front().size_y);
    place_obj(add(kGoal, kGreen), rooms.back().top_x, rooms.back().top_y, rooms.back().size_x,
              rooms.back().size_y);
    mission = "traverse the rooms to get to the goal";
  }

 private:
  struct Room {
    int top_x, top_y, size_x, size_y, door_x, door_y;
  };

  // MultiRoomEnv._placeRoom.
  bool place_room(int num_left, std::vector<Room>& rooms, int min_size, int max_size, int entry_wall,
                  int door_x, int door_y) {
    const int size_x = rand_int(min_size, max_size + 1);
    const int size_y = rand_int(min_size, max_size + 1);
    int top_x, top_y;
    if (rooms.empty()) {
      top_x = door_x, top_y = door_y;
    } else if (entry_wall == 0) {
      top_x = door_x - size_x + 1;
      top_y = rand_int(door_y - size_y + 2, door_y);
    } else if (entry_wall == 1) {
      top_x = rand_int(door_x - size_x + 2, door_x);
      top_y = door_y - size_y + 1;
    } else if (entry_wall == 2) {
      top_x = door_x;
      top_y = rand_int(door_y - size_y + 2, door_y);
    } else {
      top_x = rand_int(door_x - size_x + 2, door_x);
      top_y = door_y;
    }
    if (top_x < 0 || top_y < 0) return false;
    if (top_x + size_x > width || top_y + size_y >= height) return false;
    for (std::size_t k = 0; k + 1 < rooms.size(); ++k) {
      const Room& r = rooms[k];
      const bool apart = top_x + size_x < r.top_x || r.top_x + r.size_x <= top_x ||
                         top_y + size_y < r.top_y || r.top_y + r.size_y <= top_y;
      if (!apart) return false;
    }
    rooms.push_back({top_x, top_y, size_x, size_y, door_x, door_y});
    if (num_left == 1) return true;
    for (int i = 0; i < 8; ++i) {
      std::vector<int> walls;
      for (int w = 0; w < 4; ++w)
        if (w != entry_wall) walls.push_back(w);
      const int exit_wall = rand_elem(walls);
      const int next_entry = (exit_wall + 2) % 4;
      int ex, ey;
      if (exit_wall == 0) {
        ex = top_x + size_x - 1, ey = top_y + rand_int(1, size_y - 1);
      } else if (exit_wall == 1) {
        ex = top_x + rand_int(1, size_x - 1), ey = top_y + size_y - 1;
      } else if (exit_wall == 2) {
        ex = top_x, ey = top_y + rand_int(1, size_y - 1);
      } else {
        ex = top_x + rand_int(1, size_x - 1), ey = top_y;
      }
      if (place_room(num_left - 1, rooms, min_size, max_size, next_entry, ex, ey)) break;
    }
    return true;
  }

  int min_rooms_, max_rooms_, max_room_size_;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-MultiRoom-N2-S4-v0", MultiRoomEnv, {"minNumRooms", 2}, {"maxNumRooms", 2},
                          {"maxRoomSize", 4});
// minigrid keeps this legacy id configured for 6 rooms.
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MultiRoom-N4-S5-v0", MultiRoomEnv, {"minNumRooms", 6}, {"maxNumRooms", 6},
                          {"maxRoomSize", 5});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MultiRoom-N4-S5-v1", MultiRoomEnv, {"minNumRooms", 4}, {"maxNumRooms", 4},
                          {"maxRoomSize", 5});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-MultiRoom-N6-v0", MultiRoomEnv, {"minNumRooms", 6}, {"maxNumRooms", 6});

}  // namespace aiopool::minigrid
