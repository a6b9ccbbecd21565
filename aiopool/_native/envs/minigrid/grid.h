// MiniGrid's world (minigrid 3.2.0, core/world_object.py and core/grid.py): the objects, the
// grid of cells and the agent's 7x7 partial view, encoded as minigrid encodes it.
//
// An env owns its objects in one vector and its grid holds their indices (kNone: an empty
// cell), so that "the same object" (a box's content, what the agent carries, the door an env
// watches) is the same index, as minigrid compares Python objects by identity. Walls, lava and
// goals have no state: every cell of one kind may share one object. Only the worker stepping
// the env touches it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace aiopool::minigrid {

// OBJECT_TO_IDX and COLOR_TO_IDX (core/constants.py).
enum Type : uint8_t { kUnseen = 0, kEmpty, kWall, kFloor, kDoor, kKey, kBall, kBox, kGoal, kLava, kAgent };
enum Color : uint8_t { kRed = 0, kGreen, kBlue, kPurple, kYellow, kGrey };
// COLOR_NAMES, sorted by name as minigrid sorts them: what _rand_color / _rand_elem draw from.
inline constexpr std::array<Color, 6> kColorNames = {kBlue, kGreen, kGrey, kPurple, kRed, kYellow};
inline constexpr const char* kColorWords[6] = {"red", "green", "blue", "purple", "yellow", "grey"};
inline constexpr const char* kTypeWords[11] = {"unseen", "empty", "wall", "floor", "door", "key",
                                               "ball",   "box",   "goal", "lava",  "agent"};
// DIR_TO_VEC: right, down, left, up.
inline constexpr int kDirX[4] = {1, 0, -1, 0};
inline constexpr int kDirY[4] = {0, 1, 0, -1};

using ObjId = int16_t;
inline constexpr ObjId kNone = -1;

struct Obj {
  Type type = kEmpty;
  Color color = kGrey;
  bool is_open = false;    // doors
  bool is_locked = false;  // doors
  ObjId contains = kNone;  // boxes
  int x = -1, y = -1;      // cur_pos (-1, -1 while carried)

  bool can_overlap() const {
    return type == kGoal || type == kFloor || type == kLava || (type == kDoor && is_open);
  }
  bool can_pickup() const { return type == kKey || type == kBall || type == kBox; }
  bool see_behind() const { return type != kWall && (type != kDoor || is_open); }
  // WorldObj.encode: (type, color, state); a door's state is open 0, closed 1, locked 2.
  std::array<uint8_t, 3> encode() const {
    uint8_t state = 0;
    if (type == kDoor) state = is_open ? 0 : is_locked ? 2 : 1;
    return {static_cast<uint8_t>(type), static_cast<uint8_t>(color), state};
  }
};

class Grid {
 public:
  void reset(int width, int height) {
    width_ = width;
    height_ = height;
    cells_.assign(static_cast<std::size_t>(width * height), kNone);
  }
  int width() const { return width_; }
  int height() const { return height_; }
  ObjId get(int x, int y) const { return cells_[static_cast<std::size_t>(y * width_ + x)]; }
  void set(int x, int y, ObjId v) { cells_[static_cast<std::size_t>(y * width_ + x)] = v; }
  void horz_wall(int x, int y, int length, ObjId v) {
    for (int i = 0; i < length; ++i) set(x + i, y, v);
  }
  void vert_wall(int x, int y, int length, ObjId v) {
    for (int j = 0; j < length; ++j) set(x, y + j, v);
  }
  void wall_rect(int x, int y, int w, int h, ObjId v) {
    horz_wall(x, y, w, v);
    horz_wall(x, y + h - 1, w, v);
    vert_wall(x, y, h, v);
    vert_wall(x + w - 1, y, h, v);
  }

 private:
  int width_ = 0, height_ = 0;
  std::vector<ObjId> cells_;
};

// The agent's view (MiniGridEnv.gen_obs_grid, then Grid.encode with the visibility mask):
// the grid sliced at the view's extents (cells outside it are grey walls), rotated left
// agent_dir + 1 times, occluded by Grid.process_vis unless the env sees through walls, the
// agent's own cell showing what it carries. `image` is minigrid's (view, view, 3) array,
// indexed [column][row][channel].
template <int kView>
class View {
 public:
  static constexpr int kCells = kView * kView;

  // `wall` is an object id of a grey wall (what a cell outside the grid shows).
  void encode(const Grid& grid, const std::vector<Obj>& objs, int ax, int ay, int dir, bool see_through_walls,
              ObjId carrying, ObjId wall, uint8_t* image) {
    int top_x, top_y;
    switch (dir) {  // MiniGridEnv.get_view_exts
      case 0:
        top_x = ax, top_y = ay - kView / 2;
        break;
      case 1:
        top_x = ax - kView / 2, top_y = ay;
        break;
      case 2:
        top_x = ax - kView + 1, top_y = ay - kView / 2;
        break;
      default:
        top_x = ax - kView / 2, top_y = ay - kView + 1;
        break;
    }
    for (int j = 0; j < kView; ++j)  // Grid.slice
      for (int i = 0; i < kView; ++i) {
        const int x = top_x + i, y = top_y + j;
        cell_[j * kView + i] =
            (x >= 0 && x < grid.width() && y >= 0 && y < grid.height()) ? grid.get(x, y) : wall;
      }
    for (int r = 0; r <= dir; ++r) {  // Grid.rotate_left: (i, j) -> (j, size - 1 - i)
      for (int j = 0; j < kView; ++j)
        for (int i = 0; i < kView; ++i) rotated_[(kView - 1 - i) * kView + j] = cell_[j * kView + i];
      cell_ = rotated_;
    }
    if (see_through_walls)
      vis_.fill(true);
    else
      process_vis(objs);
    const int agent = (kView - 1) * kView + kView / 2;  // (view // 2, view - 1)
    cell_[agent] = carrying;
    for (int i = 0; i < kView; ++i)
      for (int j = 0; j < kView; ++j) {
        uint8_t* out = image + (i * kView + j) * 3;
        const int c = j * kView + i;
        if (!vis_[c]) {
          out[0] = out[1] = out[2] = 0;
        } else if (cell_[c] == kNone) {
          out[0] = kEmpty, out[1] = out[2] = 0;
        } else {
          const std::array<uint8_t, 3> e = objs[static_cast<std::size_t>(cell_[c])].encode();
          out[0] = e[0], out[1] = e[1], out[2] = e[2];
        }
      }
  }

 private:
  // Grid.process_vis from the agent's cell (view // 2, view - 1), row by row from the bottom.
  void process_vis(const std::vector<Obj>& objs) {
    vis_.fill(false);
    vis_[(kView - 1) * kView + kView / 2] = true;
    auto opaque = [&](int c) {
      return cell_[c] != kNone && !objs[static_cast<std::size_t>(cell_[c])].see_behind();
    };
    for (int j = kView - 1; j >= 0; --j) {
      for (int i = 0; i < kView - 1; ++i) {
        if (!vis_[j * kView + i] || opaque(j * kView + i)) continue;
        vis_[j * kView + i + 1] = true;
        if (j > 0) vis_[(j - 1) * kView + i + 1] = vis_[(j - 1) * kView + i] = true;
      }
      for (int i = kView - 1; i >= 1; --i) {
        if (!vis_[j * kView + i] || opaque(j * kView + i)) continue;
        vis_[j * kView + i - 1] = true;
        if (j > 0) vis_[(j - 1) * kView + i - 1] = vis_[(j - 1) * kView + i] = true;
      }
    }
  }

  std::array<ObjId, kCells> cell_{}, rotated_{};
  std::array<bool, kCells> vis_{};
};

}  // namespace aiopool::minigrid
