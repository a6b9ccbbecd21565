// MiniGrid-PutNear-*: minigrid 3.2.0's PutNearEnv (envs/putnear.py). Distinct objects apart
// from each other; dropping the one the mission names next to the other succeeds, picking up
// a wrong one or dropping anything ends the episode.
#pragma once

#include "things.h"

namespace aiopool::minigrid {

class PutNearEnv : public MiniGrid<PutNearEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return room_keys(6, 2); }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit PutNearEnv(const Config& c) : num_objs_(open_room(*this, c)) {
    max_steps = max_steps_of(c, 5 * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    const std::vector<Placed> placed = place_distinct(*this, num_objs_, true);
    place_agent();
    const int move = rand_int(0, static_cast<int>(placed.size()));
    int target;
    do {
      target = rand_int(0, static_cast<int>(placed.size()));
    } while (target == move);
    move_ = placed[static_cast<std::size_t>(move)];
    const Placed& t = placed[static_cast<std::size_t>(target)];
    target_x_ = t.x, target_y_ = t.y;
    mission = "put the " + describe(move_.color, move_.type) + " near the " + describe(t.color, t.type);
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    const ObjId before = carrying;
    StepResult s = World::step(*action);
    const int ox = front_x(), oy = front_y();
    if (*action == kPickup && carrying != kNone) {
      if (obj(carrying).type != move_.type || obj(carrying).color != move_.color) s.terminated = true;
    }
    if (*action == kDrop && before != kNone) {
      if (grid.get(ox, oy) == before && std::abs(ox - target_x_) <= 1 && std::abs(oy - target_y_) <= 1)
        s.reward = success_reward();
      s.terminated = true;
    }
    return s;
  }

 private:
  int num_objs_;
  Placed move_{kKey, kRed, 0, 0};
  int target_x_ = 0, target_y_ = 0;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-PutNear-6x6-N2-v0", PutNearEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-PutNear-8x8-N3-v0", PutNearEnv, {"size", 8}, {"numObjs", 3});

}  // namespace aiopool::minigrid
