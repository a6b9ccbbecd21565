// MiniGridEnv (minigrid 3.2.0, minigrid_env.py): what every MiniGrid env shares. An env class
// derives from MiniGrid<Env>, builds its layout in `gen_grid()` with the helpers below, each of
// which draws from numpy's stream exactly as minigrid's does (place_obj's rejection loop retry
// for retry), and may wrap `step` as minigrid's subclass wraps it. Only the worker stepping an
// env touches it; the row it writes is laid out as spec.h says.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "grid.h"
#include "spec.h"

namespace aiopool::minigrid {

// The world and the engine: objects, grid, agent, and the draws minigrid's helpers make.
class World {
 public:
  int width = 0, height = 0;
  int max_steps = 100;
  bool see_through_walls = false;
  Grid grid;
  std::vector<Obj> objs;
  int agent_x = -1, agent_y = -1, agent_dir = -1;
  ObjId carrying = kNone;
  int step_count = 0;
  std::string mission;
  Rng* rng = nullptr;

  // -- objects --------------------------------------------------------------------------------
  ObjId add(Type type, Color color) {
    Obj o;
    o.type = type;
    o.color = color;
    objs.push_back(o);
    return static_cast<ObjId>(objs.size() - 1);
  }
  ObjId door(Color color, bool is_open = false, bool is_locked = false) {
    const ObjId d = add(kDoor, color);
    objs[static_cast<std::size_t>(d)].is_open = is_open;
    objs[static_cast<std::size_t>(d)].is_locked = is_locked;
    return d;
  }
  Obj& obj(ObjId id) { return objs[static_cast<std::size_t>(id)]; }
  const Obj& obj(ObjId id) const { return objs[static_cast<std::size_t>(id)]; }
  ObjId wall() const { return 0; }  // grey, made first at each reset
  // An object's kind at (x, y), kEmpty for none.
  Type type_at(int x, int y) const {
    const ObjId o = grid.get(x, y);
    return o == kNone ? kEmpty : obj(o).type;
  }

  // -- draws ----------------------------------------------------------------------------------
  int rand_int(int low, int high) { return static_cast<int>(rng->integers(low, high)); }
  bool rand_bool() { return rng->integers(0, 2) == 0; }
  Color rand_color() { return kColorNames[static_cast<std::size_t>(rng->integers(6))]; }
  template <class T>
  T rand_elem(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(rng->integers(static_cast<int64_t>(v.size())))];
  }

  void put_obj(ObjId o, int x, int y) {
    grid.set(x, y, o);
    obj(o).x = x, obj(o).y = y;
  }

  // MiniGridEnv.place_obj: draw (x, y) in the rectangle until the cell is empty, not the
  // agent's, and not rejected; RejectionFailed after max_tries retries (< 0: none).
  using Reject = std::function<bool(int, int)>;
  std::pair<int, int> place_obj(ObjId o, int top_x = 0, int top_y = 0, int size_x = -1, int size_y = -1,
                                const Reject& reject = nullptr, long max_tries = -1) {
    top_x = std::max(top_x, 0), top_y = std::max(top_y, 0);
    if (size_x < 0) size_x = grid.width(), size_y = grid.height();
    long tries = 0;
    int x, y;
    while (true) {
      if (max_tries >= 0 && tries > max_tries) throw RejectionFailed();
      ++tries;
      x = rand_int(top_x, std::min(top_x + size_x, grid.width()));
      y = rand_int(top_y, std::min(top_y + size_y, grid.height()));
      if (grid.get(x, y) != kNone) continue;
      if (x == agent_x && y == agent_y) continue;
      if (reject && reject(x, y)) continue;
      break;
    }
    grid.set(x, y, o);
    if (o != kNone) obj(o).x = x, obj(o).y = y;
    return {x, y};
  }
  // MiniGridEnv.place_agent.
  std::pair<int, int> place_agent(int top_x = 0, int top_y = 0, int size_x = -1, int size_y = -1,
                                  bool rand_dir = true, long max_tries = -1) {
    agent_x = agent_y = -1;
    const auto pos = place_obj(kNone, top_x, top_y, size_x, size_y, nullptr, max_tries);
    agent_x = pos.first, agent_y = pos.second;
    if (rand_dir) agent_dir = rand_int(0, 4);
    return pos;
  }

  // The agent at agent_start_pos facing agent_start_dir, or anywhere (`fixed` false: None).
  void start_agent(bool fixed, int x, int y, int dir) {
    if (fixed)
      agent_x = x, agent_y = y, agent_dir = dir;
    else
      place_agent();
  }
  // A step that succeeds where `action` picks up `target`, the object the mission names (by
  // identity, as minigrid's `self.carrying == self.obj`): the success reward, and the end.
  StepResult pick_up_step(int64_t action, ObjId target) {
    StepResult s = step(action);
    if (action == kPickup && carrying != kNone && carrying == target)
      s.reward = success_reward(), s.terminated = true;
    return s;
  }

  int front_x() const { return agent_x + kDirX[agent_dir]; }
  int front_y() const { return agent_y + kDirY[agent_dir]; }
  // MiniGridEnv._reward.
  double success_reward() const {
    return 1.0 - 0.9 * (static_cast<double>(step_count) / static_cast<double>(max_steps));
  }

  // MiniGridEnv.reset's start: an empty grid (the env's gen_grid fills it), nothing carried.
  void begin(Rng& r) {
    rng = &r;
    objs.clear();
    add(kWall, kGrey);
    grid.reset(width, height);
    agent_x = agent_y = agent_dir = -1;
    carrying = kNone;
    step_count = 0;
  }

  // MiniGridEnv.step.
  StepResult step(int64_t action) {
    ++step_count;
    StepResult r;
    const int fx = front_x(), fy = front_y();
    const ObjId fwd = grid.get(fx, fy);
    switch (action) {
      case kLeft:
        agent_dir = (agent_dir + 3) % 4;
        break;
      case kRight:
        agent_dir = (agent_dir + 1) % 4;
        break;
      case kForward:
        if (fwd == kNone || obj(fwd).can_overlap()) agent_x = fx, agent_y = fy;
        if (fwd != kNone && obj(fwd).type == kGoal) r.terminated = true, r.reward = success_reward();
        if (fwd != kNone && obj(fwd).type == kLava) r.terminated = true;
        break;
      case kPickup:
        if (fwd != kNone && obj(fwd).can_pickup() && carrying == kNone) {
          carrying = fwd;
          obj(fwd).x = obj(fwd).y = -1;
          grid.set(fx, fy, kNone);
        }
        break;
      case kDrop:
        if (fwd == kNone && carrying != kNone) {
          grid.set(fx, fy, carrying);
          obj(carrying).x = fx, obj(carrying).y = fy;
          carrying = kNone;
        }
        break;
      case kToggle:
        if (fwd != kNone) toggle(fwd, fx, fy);
        break;
      default:  // done; send() has checked the action space
        break;
    }
    if (step_count >= max_steps) r.truncated = true;
    return r;
  }

  void toggle(ObjId o, int x, int y) {
    Obj& t = obj(o);
    if (t.type == kDoor) {
      if (t.is_locked) {
        if (carrying != kNone && obj(carrying).type == kKey && obj(carrying).color == t.color)
          t.is_locked = false, t.is_open = true;
      } else {
        t.is_open = !t.is_open;
      }
    } else if (t.type == kBox) {
      grid.set(x, y, t.contains);
    }
  }

  // gen_obs, into a row laid out as minigrid_spec says.
  void write_obs(uint8_t* row) const {
    const int64_t dir = agent_dir;
    std::memcpy(row, &dir, sizeof dir);
    int32_t text[kMissionWidth] = {};
    for (std::size_t i = 0; i < mission.size() && i < static_cast<std::size_t>(kMissionWidth); ++i)
      text[i] = static_cast<unsigned char>(mission[i]);
    std::memcpy(row + kMissionOffset, text, sizeof text);
    view_.encode(grid, objs, agent_x, agent_y, agent_dir, see_through_walls, carrying, wall(),
                 row + kImageOffset);
  }

 private:
  mutable View<kViewSize> view_;
};

// The runner's side of an env: Env derives from MiniGrid<Env> and defines gen_grid() (and its
// own step where minigrid's subclass wraps step).
template <class Env>
class MiniGrid : public World {
 public:
  using Action = int64_t;
  void reset(Rng& r) {
    begin(r);
    static_cast<Env*>(this)->gen_grid();
  }
  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    return World::step(*action);
  }
  void write(Row& row) const { write_obs(row.obs_as<uint8_t>()); }
  // What minigrid's render() draws from (aiopool/_render.py decodes it into the reference's
  // env): width, height, agent x, y and direction, the carried object's encoding ((0, 0, 0):
  // none), then Grid.encode() of the whole grid, [x][y][channel].
  std::vector<double> render_state() const {
    std::vector<double> s{double(width), double(height), double(agent_x), double(agent_y), double(agent_dir)};
    const std::array<uint8_t, 3> held = carrying == kNone ? std::array<uint8_t, 3>{} : obj(carrying).encode();
    s.insert(s.end(), held.begin(), held.end());
    for (int x = 0; x < width; ++x)
      for (int y = 0; y < height; ++y) {
        const ObjId o = grid.get(x, y);
        const std::array<uint8_t, 3> e = o == kNone ? std::array<uint8_t, 3>{kEmpty, 0, 0} : obj(o).encode();
        s.insert(s.end(), e.begin(), e.end());
      }
    return s;
  }
};

}  // namespace aiopool::minigrid
