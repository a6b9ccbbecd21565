// MiniGrid-KeyCorridorS*R*: minigrid 3.2.0's KeyCorridorEnv (envs/keycorridor.py). A corridor
// of rooms; the object to pick up is behind a locked door, its key in a room on the other
// side, the other rooms joined by connect_all's doors.
#pragma once

#include "roomgrid.h"
#include "things.h"

namespace aiopool::minigrid {

class KeyCorridorEnv : public MiniGrid<KeyCorridorEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("num_rows", 3),
            {"obj_type", ConfigKey::Kind::kString, 0.0, "ball"},
            int_key("room_size", 6),
            max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit KeyCorridorEnv(const Config& c)
      : rooms_(static_cast<int>(c.get_int("room_size")), static_cast<int>(c.get_int("num_rows")), 3) {
    const std::string& type = c.get_string("obj_type");
    obj_type_ = type == "key" ? kKey : type == "ball" ? kBall : type == "box" ? kBox : kEmpty;
    if (obj_type_ == kEmpty)
      throw std::invalid_argument("KeyCorridor: obj_type must be 'key', 'ball' or 'box'");
    width = rooms_.width(), height = rooms_.height();
    max_steps = max_steps_of(c, 30 * rooms_.room_size * rooms_.room_size);
  }

  void gen_grid() {
    rooms_.gen(*this);
    for (int j = 1; j < rooms_.num_rows; ++j) rooms_.remove_wall(*this, 1, j, 3);
    const int room_idx = rand_int(0, rooms_.num_rows);
    const ObjId door = rooms_.add_door(*this, 2, room_idx, 2, -1, 1);
    target_ = rooms_.add_object(*this, 2, room_idx, obj_type_);
    rooms_.add_object(*this, 0, rand_int(0, rooms_.num_rows), kKey, obj(door).color);
    rooms_.place_agent(*this, 1, rooms_.num_rows / 2);
    rooms_.connect_all(*this, {kColorNames.begin(), kColorNames.end()});
    mission = "pick up the " + describe(obj(target_).color, obj_type_);
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    return pick_up_step(*action, target_);
  }

 private:
  RoomGrid rooms_;
  Type obj_type_ = kBall;
  ObjId target_ = kNone;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-KeyCorridorS3R1-v0", KeyCorridorEnv, {"room_size", 3}, {"num_rows", 1});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-KeyCorridorS3R2-v0", KeyCorridorEnv, {"room_size", 3}, {"num_rows", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-KeyCorridorS3R3-v0", KeyCorridorEnv, {"room_size", 3}, {"num_rows", 3});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-KeyCorridorS4R3-v0", KeyCorridorEnv, {"room_size", 4}, {"num_rows", 3});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-KeyCorridorS5R3-v0", KeyCorridorEnv, {"room_size", 5}, {"num_rows", 3});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-KeyCorridorS6R3-v0", KeyCorridorEnv, {"room_size", 6}, {"num_rows", 3});

}  // namespace aiopool::minigrid
