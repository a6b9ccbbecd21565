// MiniGrid-SimpleCrossing* / LavaCrossing*: minigrid 3.2.0's CrossingEnv (envs/crossing.py).
// num_crossings rivers of walls or lava, drawn by shuffling the candidate rows and columns,
// each crossed by one gap along a shuffled path (numpy's shuffle and choice(range)).
#pragma once

#include <algorithm>
#include <string>

#include "minigrid_env.h"

namespace aiopool::minigrid {

class CrossingEnv : public MiniGrid<CrossingEnv> {
 public:
  static std::vector<ConfigKey> config_keys() {
    return {int_key("size", 9),
            int_key("num_crossings", 1),
            {"obstacle_type", ConfigKey::Kind::kString, 0.0, "lava"},
            max_steps_key()};
  }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit CrossingEnv(const Config& c) : num_crossings_(static_cast<int>(c.get_int("num_crossings"))) {
    width = height = static_cast<int>(c.get_int("size"));
    if (width % 2 != 1) throw std::invalid_argument("Crossing: size must be odd");
    std::string t = c.get_string("obstacle_type");
    std::transform(t.begin(), t.end(), t.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (t != "lava" && t != "wall")
      throw std::invalid_argument("Unknown obstacle_type '" + c.get_string("obstacle_type") +
                                  "', expected one of ['lava', 'wall']");
    lava_ = t == "lava";
    max_steps = max_steps_of(c, 4 * width * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    agent_x = agent_y = 1, agent_dir = 0;
    put_obj(add(kGoal, kGreen), width - 2, height - 2);
    struct River {
      bool vertical;
      int pos;
    };
    std::vector<River> rivers;
    for (int i = 2; i < height - 2; i += 2) rivers.push_back({true, i});
    for (int j = 2; j < width - 2; j += 2) rivers.push_back({false, j});
    rng->shuffle(rivers.data(), rivers.size());
    rivers.resize(std::min(rivers.size(), static_cast<std::size_t>(std::max(num_crossings_, 0))));
    std::vector<int> rivers_v, rivers_h;
    for (const River& r : rivers) (r.vertical ? rivers_v : rivers_h).push_back(r.pos);
    std::sort(rivers_v.begin(), rivers_v.end());
    std::sort(rivers_h.begin(), rivers_h.end());
    const ObjId obstacle = lava_ ? add(kLava, kRed) : wall();
    for (int j : rivers_h)
      for (int i = 1; i < width - 1; ++i) put_obj(obstacle, i, j);
    for (int i : rivers_v)
      for (int j = 1; j < height - 1; ++j) put_obj(obstacle, i, j);
    std::vector<char> path(rivers_v.size(), 'h');  // cross a vertical river: move horizontally
    path.insert(path.end(), rivers_h.size(), 'v');
    rng->shuffle(path.data(), path.size());
    std::vector<int> limits_v{0}, limits_h{0};
    limits_v.insert(limits_v.end(), rivers_v.begin(), rivers_v.end());
    limits_v.push_back(height - 1);
    limits_h.insert(limits_h.end(), rivers_h.begin(), rivers_h.end());
    limits_h.push_back(width - 1);
    std::size_t room_i = 0, room_j = 0;
    for (char direction : path) {
      int i, j;
      if (direction == 'h') {
        i = limits_v[room_i + 1];
        j = choice(limits_h[room_j] + 1, limits_h[room_j + 1]);
        ++room_i;
      } else {
        i = choice(limits_v[room_i] + 1, limits_v[room_i + 1]);
        j = limits_h[room_j + 1];
        ++room_j;
      }
      grid.set(i, j, kNone);
    }
    mission = lava_ ? "avoid the lava and get to the green goal square"
                    : "find the opening and get to the green goal square";
  }

 private:
  // np_random.choice(range(low, high)): what integers(0, high - low) draws.
  int choice(int low, int high) { return low + static_cast<int>(rng->integers(high - low)); }

  int num_crossings_;
  bool lava_ = true;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaCrossingS9N1-v0", CrossingEnv, {"size", 9}, {"num_crossings", 1});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaCrossingS9N2-v0", CrossingEnv, {"size", 9}, {"num_crossings", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaCrossingS9N3-v0", CrossingEnv, {"size", 9}, {"num_crossings", 3});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-LavaCrossingS11N5-v0", CrossingEnv, {"size", 11}, {"num_crossings", 5});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-SimpleCrossingS9N1-v0", CrossingEnv, {"size", 9}, {"num_crossings", 1},
                          {"obstacle_type", 0.0, {}, "wall"});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-SimpleCrossingS9N2-v0", CrossingEnv, {"size", 9}, {"num_crossings", 2},
                          {"obstacle_type", 0.0, {}, "wall"});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-SimpleCrossingS9N3-v0", CrossingEnv, {"size", 9}, {"num_crossings", 3},
                          {"obstacle_type", 0.0, {}, "wall"});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-SimpleCrossingS11N5-v0", CrossingEnv, {"size", 11}, {"num_crossings", 5},
                          {"obstacle_type", 0.0, {}, "wall"});

}  // namespace aiopool::minigrid
