// MiniGrid-ObstructedMaze-*: minigrid 3.2.0's ObstructedMaze_1Dlhb, ObstructedMaze_Full
// (envs/obstructedmaze.py) and ObstructedMaze_Full_V1 (envs/obstructedmaze_v1.py). Rooms
// behind locked doors, their keys hidden in boxes, the doors blocked by balls; pick up the
// blue ball. v1 places the keys after both doors of a side room (v0 after each door).
#pragma once

#include "roomgrid.h"
#include "things.h"

namespace aiopool::minigrid {

class ObstructedMazeEnv : public MiniGrid<ObstructedMazeEnv> {
 public:
  enum class Layout { k1Dlhb, kFull, kFullV1 };

  static std::vector<ConfigKey> config_keys() {
    return {{"agent_room", ConfigKey::Kind::kNumbers, 0.0, "", {}, {1.0, 1.0}},
            {"key_in_box", ConfigKey::Kind::kBool, 1.0},
            {"blocked", ConfigKey::Kind::kBool, 1.0},
            int_key("num_quarters", 4),
            int_key("num_rooms_visited", 25),
            max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  ObstructedMazeEnv(const Config& c, Layout layout)
      : layout_(layout),
        rooms_(6, layout == Layout::k1Dlhb ? 1 : 3, layout == Layout::k1Dlhb ? 2 : 3),
        key_in_box_(c.get_bool("key_in_box")),
        blocked_(c.get_bool("blocked")) {
    if (layout != Layout::k1Dlhb) {
      agent_room_x_ = static_cast<int>(c.get_numbers("agent_room")[0]);
      agent_room_y_ = static_cast<int>(c.get_numbers("agent_room")[1]);
      num_quarters_ = static_cast<int>(c.get_int("num_quarters"));
    }
    width = rooms_.width(), height = rooms_.height();
    const int visited = layout == Layout::k1Dlhb ? 2 : static_cast<int>(c.get_int("num_rooms_visited"));
    max_steps = max_steps_of(c, 4 * visited * 36);
  }
  explicit ObstructedMazeEnv(const Config& c) : ObstructedMazeEnv(c, Layout::kFull) {}

  void gen_grid() {
    rooms_.gen(*this);
    std::vector<Color> pool(kColorNames.begin(), kColorNames.end());  // _rand_subset(COLOR_NAMES, 6)
    colors_.clear();
    while (!pool.empty()) {
      const std::size_t k = static_cast<std::size_t>(rand_int(0, static_cast<int>(pool.size())));
      colors_.push_back(pool[k]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(k));
    }
    mission = "pick up the blue ball";
    if (layout_ == Layout::k1Dlhb) {
      add_door(0, 0, 0, colors_[0], true, key_in_box_, blocked_);
      target_ = rooms_.add_object(*this, 1, 0, kBall, kBlue);
      rooms_.place_agent(*this, 0, 0);
      return;
    }
    static constexpr int kSide[4][2] = {{2, 1}, {1, 2}, {0, 1}, {1, 0}};
    static constexpr int kCorner[4][2] = {{2, 0}, {2, 2}, {0, 2}, {0, 0}};
    const int quarters = std::min(std::max(num_quarters_, 0), 4);
    for (int i = 0; i < quarters; ++i) {
      add_door(1, 1, i, colors_[static_cast<std::size_t>(i)], false, false, false);
      const int side_x = kSide[i][0], side_y = kSide[i][1];
      for (int k : {-1, 1}) {
        const int d = (i + k + 4) % 4;
        const Color c = colors_[static_cast<std::size_t>((i + k + 6) % 6)];
        add_door(side_x, side_y, d, c, true, layout_ == Layout::kFull && key_in_box_, blocked_,
                 layout_ == Layout::kFull);
      }
      if (layout_ == Layout::kFullV1)
        for (int k : {-1, 1})
          add_key(side_x, side_y, colors_[static_cast<std::size_t>((i + k + 6) % 6)], key_in_box_);
    }
    const int corner = quarters > 0 ? rand_int(0, quarters) : 0;
    target_ = rooms_.add_object(*this, kCorner[corner][0], kCorner[corner][1], kBall, kBlue);
    rooms_.place_agent(*this, agent_room_x_, agent_room_y_);
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    return pick_up_step(*action, target_);
  }

 private:
  // ObstructedMazeEnv.add_door (v1's add_locked_door where `with_key` is false): the door, a
  // green ball in front of it if blocked, and if locked its key (in a grey box) in the room.
  void add_door(int i, int j, int door_idx, Color color, bool locked, bool key_in_box, bool blocked,
                bool with_key = true) {
    const ObjId d = rooms_.add_door(*this, i, j, door_idx, color, locked ? 1 : 0);
    if (blocked) {
      const auto pos = rooms_.door_pos(i, j, door_idx);
      grid.set(pos.first - kDirX[door_idx], pos.second - kDirY[door_idx], add(kBall, kGreen));
    }
    if (locked && with_key) add_key(i, j, obj(d).color, key_in_box);
  }
  void add_key(int i, int j, Color color, bool key_in_box) {
    ObjId o = add(kKey, color);
    if (key_in_box) {
      const ObjId box = add(kBox, kGrey);
      obj(box).contains = o;
      o = box;
    }
    rooms_.place_in_room(*this, i, j, o);
  }

  Layout layout_;
  RoomGrid rooms_;
  bool key_in_box_, blocked_;
  int agent_room_x_ = 1, agent_room_y_ = 1, num_quarters_ = 4;
  std::vector<Color> colors_;
  ObjId target_ = kNone;
};

class ObstructedMaze1DlhbEnv : public ObstructedMazeEnv {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {{"key_in_box", ConfigKey::Kind::kBool, 1.0},
            {"blocked", ConfigKey::Kind::kBool, 1.0},
            max_steps_key()};
  }
  explicit ObstructedMaze1DlhbEnv(const Config& c) : ObstructedMazeEnv(c, Layout::k1Dlhb) {}
};

class ObstructedMazeFullV1Env : public ObstructedMazeEnv {
 public:
  explicit ObstructedMazeFullV1Env(const Config& c) : ObstructedMazeEnv(c, Layout::kFullV1) {}
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-ObstructedMaze-1Dl-v0", ObstructedMaze1DlhbEnv, {"key_in_box", 0},
                          {"blocked", 0});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-ObstructedMaze-1Dlh-v0", ObstructedMaze1DlhbEnv, {"key_in_box", 1},
                          {"blocked", 0});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-ObstructedMaze-1Dlhb-v0", ObstructedMaze1DlhbEnv);
#define AIOPOOL_OBSTRUCTED(id, Class, x, in_box, blocked, quarters, visited)              \
  AIOPOOL_REGISTER_MINIGRID(id, Class, {"agent_room", 0, {x, 1}}, {"key_in_box", in_box}, \
                            {"blocked", blocked}, {"num_quarters", quarters},             \
                            {"num_rooms_visited", visited})
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-2Dl-v0", ObstructedMazeEnv, 2, 0, 0, 1, 4);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-2Dlh-v0", ObstructedMazeEnv, 2, 1, 0, 1, 4);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-2Dlhb-v0", ObstructedMazeEnv, 2, 1, 1, 1, 4);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-1Q-v0", ObstructedMazeEnv, 1, 1, 1, 1, 5);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-2Q-v0", ObstructedMazeEnv, 2, 1, 1, 2, 11);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-ObstructedMaze-Full-v0", ObstructedMazeEnv);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-2Dlhb-v1", ObstructedMazeFullV1Env, 2, 1, 1, 1, 4);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-1Q-v1", ObstructedMazeFullV1Env, 1, 1, 1, 1, 5);
AIOPOOL_OBSTRUCTED("MiniGrid-ObstructedMaze-2Q-v1", ObstructedMazeFullV1Env, 2, 1, 1, 2, 11);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-ObstructedMaze-Full-v1", ObstructedMazeFullV1Env);
#undef AIOPOOL_OBSTRUCTED

}  // namespace aiopool::minigrid
