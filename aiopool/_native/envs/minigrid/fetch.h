// MiniGrid-Fetch-*: minigrid 3.2.0's FetchEnv (envs/fetch.py). Keys and balls; picking up
// the one the mission names succeeds, picking up any other fails.
#pragma once

#include "things.h"

namespace aiopool::minigrid {

inline const std::vector<Type> kFetchThings = {kKey, kBall};

class FetchEnv : public MiniGrid<FetchEnv> {
 public:
  static std::vector<ConfigKey> config_keys() { return room_keys(8, 3); }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  explicit FetchEnv(const Config& c) : num_objs_(open_room(*this, c)) {
    max_steps = max_steps_of(c, 5 * width * width);
  }

  void gen_grid() {
    grid.wall_rect(0, 0, width, height, wall());
    std::vector<ObjId> made;
    while (static_cast<int>(made.size()) < num_objs_) {
      const Type type = rand_elem(kFetchThings);
      const Color color = rand_color();
      const ObjId o = add(type, color);
      place_obj(o);
      made.push_back(o);
    }
    place_agent();
    const Obj& target = obj(made[static_cast<std::size_t>(rand_int(0, static_cast<int>(made.size())))]);
    target_type_ = target.type, target_color_ = target.color;
    static const char* const kSyntax[5] = {"get a", "go get a", "fetch a", "go fetch a", "you must fetch a"};
    mission = std::string(kSyntax[rand_int(0, 5)]) + " " + describe(target_color_, target_type_);
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    StepResult s = World::step(*action);
    if (carrying != kNone) {
      const bool right = obj(carrying).color == target_color_ && obj(carrying).type == target_type_;
      s.reward = right ? success_reward() : 0.0;
      s.terminated = true;
    }
    return s;
  }

 private:
  int num_objs_;
  Type target_type_ = kKey;
  Color target_color_ = kRed;
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-Fetch-5x5-N2-v0", FetchEnv, {"size", 5}, {"numObjs", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Fetch-6x6-N2-v0", FetchEnv, {"size", 6}, {"numObjs", 2});
AIOPOOL_REGISTER_MINIGRID("MiniGrid-Fetch-8x8-N3-v0", FetchEnv);

}  // namespace aiopool::minigrid
