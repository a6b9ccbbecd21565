// RoomGrid (minigrid 3.2.0, core/roomgrid.py): a grid of square rooms sharing walls, with the
// helpers its envs build layouts with (doors between rooms, objects placed away from the
// agent, the agent placed facing open floor or a wall, connect_all), each drawing from numpy's
// stream as minigrid's does. An env holds one RoomGrid beside its World.
#pragma once

#include <array>
#include <cstdlib>
#include <vector>

#include "minigrid_env.h"

namespace aiopool::minigrid {

class RoomGrid {
 public:
  struct Room {
    int top_x = 0, top_y = 0, size = 0;
    std::array<int, 4> neighbor{-1, -1, -1, -1};  // room index per wall: right, down, left, up
    std::array<bool, 4> has_door_pos{};
    std::array<std::pair<int, int>, 4> door_pos{};
    std::array<ObjId, 4> door{kNone, kNone, kNone, kNone};
    std::array<bool, 4> open{};  // a removed wall (minigrid's doors[k] = True)
    bool locked = false;
    // minigrid's `if room.doors[k]`: a door or a removed wall.
    bool connected(int k) const {
      return door[static_cast<std::size_t>(k)] != kNone || open[static_cast<std::size_t>(k)];
    }
  };

  RoomGrid(int room_size, int num_rows, int num_cols)
      : room_size(room_size), num_rows(num_rows), num_cols(num_cols) {
    if (room_size < 3 || num_rows <= 0 || num_cols <= 0)
      throw std::invalid_argument("RoomGrid: needs room_size >= 3 and at least one row and column");
  }
  int width() const { return (room_size - 1) * num_cols + 1; }
  int height() const { return (room_size - 1) * num_rows + 1; }
  Room& room(int i, int j) { return rooms[static_cast<std::size_t>(j * num_cols + i)]; }

  // RoomGrid._gen_grid: the rooms' walls, a door position drawn on each inner wall, the agent
  // in the middle room facing right.
  void gen(World& w) {
    rooms.assign(static_cast<std::size_t>(num_rows * num_cols), Room{});
    for (int j = 0; j < num_rows; ++j)
      for (int i = 0; i < num_cols; ++i) {
        Room& r = room(i, j);
        r.top_x = i * (room_size - 1), r.top_y = j * (room_size - 1), r.size = room_size;
        w.grid.wall_rect(r.top_x, r.top_y, room_size, room_size, w.wall());
      }
    for (int j = 0; j < num_rows; ++j)
      for (int i = 0; i < num_cols; ++i) {
        Room& r = room(i, j);
        const int xl = r.top_x + 1, yl = r.top_y + 1, xm = r.top_x + r.size - 1, ym = r.top_y + r.size - 1;
        if (i < num_cols - 1)
          r.neighbor[0] = j * num_cols + i + 1, set_door_pos(r, 0, xm, w.rand_int(yl, ym));
        if (j < num_rows - 1)
          r.neighbor[1] = (j + 1) * num_cols + i, set_door_pos(r, 1, w.rand_int(xl, xm), ym);
        if (i > 0) r.neighbor[2] = j * num_cols + i - 1, set_door_pos(r, 2, room(i - 1, j).door_pos[0]);
        if (j > 0) r.neighbor[3] = (j - 1) * num_cols + i, set_door_pos(r, 3, room(i, j - 1).door_pos[1]);
      }
    w.agent_x = num_cols / 2 * (room_size - 1) + room_size / 2;
    w.agent_y = num_rows / 2 * (room_size - 1) + room_size / 2;
    w.agent_dir = 0;
  }

  // RoomGrid.place_in_room: away from the agent (reject_next_to), at most 1000 retries.
  std::pair<int, int> place_in_room(World& w, int i, int j, ObjId o) {
    const Room& r = room(i, j);
    auto next_to = [&w](int x, int y) { return std::abs(w.agent_x - x) + std::abs(w.agent_y - y) < 2; };
    return w.place_obj(o, r.top_x, r.top_y, r.size, r.size, next_to, 1000);
  }
  // RoomGrid.add_object: kind kEmpty / color -1 are drawn (kind first).
  ObjId add_object(World& w, int i, int j, Type kind = kEmpty, int color = -1) {
    if (kind == kEmpty) kind = w.rand_elem(std::vector<Type>{kKey, kBall, kBox});
    const Color c = color < 0 ? w.rand_color() : static_cast<Color>(color);
    const ObjId o = w.add(kind, c);
    place_in_room(w, i, j, o);
    return o;
  }
  // RoomGrid.add_door: door_idx -1, color -1 and locked -1 are drawn, in that order.
  ObjId add_door(World& w, int i, int j, int door_idx = -1, int color = -1, int locked = -1) {
    Room& r = room(i, j);
    if (door_idx < 0) {
      do {
        door_idx = w.rand_int(0, 4);
      } while (r.neighbor[static_cast<std::size_t>(door_idx)] < 0 || r.connected(door_idx));
    }
    const Color c = color < 0 ? w.rand_color() : static_cast<Color>(color);
    const bool is_locked = locked < 0 ? w.rand_bool() : locked != 0;
    const auto k = static_cast<std::size_t>(door_idx);
    if (r.connected(door_idx)) throw std::logic_error("RoomGrid.add_door: door already exists");
    r.locked = is_locked;
    const ObjId d = w.door(c, false, is_locked);
    w.grid.set(r.door_pos[k].first, r.door_pos[k].second, d);
    w.obj(d).x = r.door_pos[k].first, w.obj(d).y = r.door_pos[k].second;
    r.door[k] = d;
    rooms[static_cast<std::size_t>(r.neighbor[k])].door[(k + 2) % 4] = d;
    return d;
  }
  std::pair<int, int> door_pos(int i, int j, int door_idx) {
    return room(i, j).door_pos[static_cast<std::size_t>(door_idx)];
  }
  // RoomGrid.remove_wall.
  void remove_wall(World& w, int i, int j, int wall_idx) {
    Room& r = room(i, j);
    const int tx = r.top_x, ty = r.top_y, s = r.size;
    for (int k = 1; k < s - 1; ++k) {
      if (wall_idx == 0) w.grid.set(tx + s - 1, ty + k, kNone);
      if (wall_idx == 1) w.grid.set(tx + k, ty + s - 1, kNone);
      if (wall_idx == 2) w.grid.set(tx, ty + k, kNone);
      if (wall_idx == 3) w.grid.set(tx + k, ty, kNone);
    }
    r.open[static_cast<std::size_t>(wall_idx)] = true;
    rooms[static_cast<std::size_t>(r.neighbor[static_cast<std::size_t>(wall_idx)])].open[(wall_idx + 2) % 4] =
        true;
  }
  // RoomGrid.place_agent: in room (i, j) (-1: drawn, i first), until it faces floor or a wall.
  void place_agent(World& w, int i = -1, int j = -1, bool rand_dir = true) {
    if (i < 0) i = w.rand_int(0, num_cols);
    if (j < 0) j = w.rand_int(0, num_rows);
    const Room& r = room(i, j);
    while (true) {
      w.place_agent(r.top_x, r.top_y, r.size, r.size, rand_dir, 1000);
      const Type front = w.type_at(w.front_x(), w.front_y());
      if (front == kEmpty || front == kWall) break;
    }
  }
  // RoomGrid.connect_all: unlocked doors of door_colors between random rooms until every room
  // is reachable from the agent's (RejectionFailed after max_itrs).
  void connect_all(World& w, const std::vector<Color>& colors, int max_itrs = 5000) {
    const int start = (w.agent_y / (room_size - 1)) * num_cols + w.agent_x / (room_size - 1);
    for (int itrs = 0;; ++itrs) {
      if (itrs > max_itrs) throw RejectionFailed();
      if (reach(start) == num_rows * num_cols) break;
      const int i = w.rand_int(0, num_cols), j = w.rand_int(0, num_rows), k = w.rand_int(0, 4);
      Room& r = room(i, j);
      if (!r.has_door_pos[static_cast<std::size_t>(k)] || r.connected(k)) continue;
      if (r.locked || rooms[static_cast<std::size_t>(r.neighbor[static_cast<std::size_t>(k)])].locked)
        continue;
      add_door(w, i, j, k, w.rand_elem(colors), 0);
    }
  }

  int room_size, num_rows, num_cols;
  std::vector<Room> rooms;

 private:
  static void set_door_pos(Room& r, int k, int x, int y) { set_door_pos(r, k, {x, y}); }
  static void set_door_pos(Room& r, int k, std::pair<int, int> p) {
    r.has_door_pos[static_cast<std::size_t>(k)] = true;
    r.door_pos[static_cast<std::size_t>(k)] = p;
  }
  // How many rooms the doors and open walls join to `start`.
  int reach(int start) const {
    std::vector<char> seen(rooms.size(), 0);
    std::vector<int> stack{start};
    int n = 0;
    while (!stack.empty()) {
      const int r = stack.back();
      stack.pop_back();
      if (seen[static_cast<std::size_t>(r)]) continue;
      seen[static_cast<std::size_t>(r)] = 1, ++n;
      for (int k = 0; k < 4; ++k)
        if (rooms[static_cast<std::size_t>(r)].connected(k))
          stack.push_back(rooms[static_cast<std::size_t>(r)].neighbor[static_cast<std::size_t>(k)]);
    }
    return n;
  }
};

}  // namespace aiopool::minigrid
