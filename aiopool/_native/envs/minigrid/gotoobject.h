// MiniGrid-GoToObject-*: minigrid 3.2.0's GoToObjectEnv (envs/gotoobject.py). Distinct keys,
// balls and boxes; `done` beside the one the mission names succeeds; `toggle` or `done` ends
// the episode.
#pragma once

#include "things.h"

namespace aiopool::minigrid {

class GoToObjectEnv : public MiniGrid<GoToObjectEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return room_keys(6, 2); }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit GoToObjectEnv(const Config& c) : num_objs_(open_room(*this, c)) {
    max_steps = max_steps_of(c, 5 * width * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    const std::vector<Placed> placed = place_distinct(*this, num_objs_, false);
    place_agent();
    target_ = placed[static_cast<std::size_t>(rand_int(0, static_cast<int>(placed.size())))];
    mission = "go to the " + describe(target_.color, target_.type);
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    return go_to_step(*this, *action, target_.x, target_.y);
  }

 private:
  int num_objs_;
  Placed target_{kKey, kRed, 0, 0};
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-GoToObject-6x6-N2-v0", GoToObjectEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-GoToObject-8x8-N2-v0", GoToObjectEnv, {"size", 8}, {"numObjs", 2});

}  // namespace aiopool::minigrid
