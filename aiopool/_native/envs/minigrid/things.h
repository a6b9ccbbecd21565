// Keys, balls and boxes in a room: what GoToObject, Fetch and PutNear share.
#pragma once

#include <cstdlib>
#include <string>

#include "minigrid_env.h"

namespace aiopool::minigrid {

inline const std::vector<Type> kThings = {kKey, kBall, kBox};  // GoToObject's and PutNear's types

// "<color> <type>", as minigrid's missions name an object.
inline std::string describe(Color color, Type type) {
  return std::string(kColorWords[color]) + " " + kTypeWords[type];
}

// Whether (x, y) is next to (tx, ty) along a row or a column, as GoToObject's and GoToDoor's
// `done` checks it.
inline bool beside(int x, int y, int tx, int ty) {
  return (x == tx && std::abs(y - ty) == 1) || (y == ty && std::abs(x - tx) == 1);
}

// The set-up GoToObject, Fetch and PutNear share: a size x size room seen through walls.
// Returns numObjs.
inline std::vector<ConfigKey> room_keys(int size, int num_objs) {
  return {int_key("size", size), int_key("numObjs", num_objs), max_steps_key()};
}
inline int open_room(World& w, const Config& c) {
  w.width = w.height = static_cast<int>(c.get_int("size"));
  w.see_through_walls = true;
  return static_cast<int>(c.get_int("numObjs"));
}

// An object drawn and placed by place_distinct.
struct Placed {
  Type type;
  Color color;
  int x, y;
};

// GoToObject's and PutNear's loop: a type of kThings and a colour drawn until n distinct pairs
// are placed (a pair drawn again is dropped); `apart`: none next to another (PutNear).
inline std::vector<Placed> place_distinct(World& w, int n, bool apart) {
  std::vector<Placed> placed;
  auto near = [&placed](int x, int y) {
    for (const Placed& p : placed)
      if (std::abs(x - p.x) <= 1 && std::abs(y - p.y) <= 1) return true;
    return false;
  };
  while (static_cast<int>(placed.size()) < n) {
    const Type type = w.rand_elem(kThings);
    const Color color = w.rand_color();
    bool seen = false;
    for (const Placed& p : placed) seen = seen || (p.type == type && p.color == color);
    if (seen) continue;
    const auto pos = w.place_obj(w.add(type, color), 0, 0, -1, -1, apart ? World::Reject(near) : nullptr);
    placed.push_back({type, color, pos.first, pos.second});
  }
  return placed;
}

// GoToDoor's and GoToObject's step: `toggle` ends the episode; `done` ends it, with the
// success reward beside the target (tx, ty).
inline StepResult go_to_step(World& w, int64_t action, int tx, int ty) {
  StepResult s = w.step(action);
  if (action == kToggle) s.terminated = true;
  if (action == kDone) {
    if (beside(w.agent_x, w.agent_y, tx, ty)) s.reward = w.success_reward();
    s.terminated = true;
  }
  return s;
}

}  // namespace aiopool::minigrid
