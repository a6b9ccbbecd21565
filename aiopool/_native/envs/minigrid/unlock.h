// MiniGrid-Unlock-v0, UnlockPickup-v0, BlockedUnlockPickup-v0: minigrid 3.2.0's UnlockEnv,
// UnlockPickupEnv and BlockedUnlockPickupEnv (envs/unlock.py, unlockpickup.py,
// blockedunlockpickup.py). Two rooms joined by a locked door whose key lies in the agent's
// room: open the door (Unlock), or pick up the box behind it (UnlockPickup), with a ball in
// front of the door (BlockedUnlockPickup).
#pragma once

#include "roomgrid.h"
#include "things.h"

namespace aiopool::minigrid {

class UnlockEnv : public MiniGrid<UnlockEnv> {
 public:
  enum class Task { kUnlock, kPickup, kBlockedPickup };

  static std::vector<ConfigKey> config_keys() { return {max_steps_key()}; }
  static EnvSpec spec(const Config&) { return minigrid_spec(7); }
  UnlockEnv(const Config& c, Task task) : task_(task), rooms_(6, 1, 2) {
    width = rooms_.width(), height = rooms_.height();
    max_steps = max_steps_of(c, (task == Task::kBlockedPickup ? 16 : 8) * 36);
  }
  explicit UnlockEnv(const Config& c) : UnlockEnv(c, Task::kUnlock) {}

  void gen_grid() {
    rooms_.gen(*this);
    if (task_ != Task::kUnlock) target_ = rooms_.add_object(*this, 1, 0, kBox);
    door_ = rooms_.add_door(*this, 0, 0, 0, -1, 1);
    if (task_ == Task::kBlockedPickup) {
      const auto pos = rooms_.door_pos(0, 0, 0);
      grid.set(pos.first - 1, pos.second, add(kBall, rand_color()));
    }
    rooms_.add_object(*this, 0, 0, kKey, obj(door_).color);
    rooms_.place_agent(*this, 0, 0);
    mission = task_ == Task::kUnlock ? "open the door" : "pick up the " + describe(obj(target_).color, kBox);
  }

  StepResult step(const Action* action, Rng& r) {
    rng = &r;
    StepResult s = task_ == Task::kUnlock ? World::step(*action) : pick_up_step(*action, target_);
    if (task_ == Task::kUnlock && *action == kToggle && obj(door_).is_open)
      s.reward = success_reward(), s.terminated = true;
    return s;
  }

 private:
  Task task_;
  RoomGrid rooms_;
  ObjId door_ = kNone, target_ = kNone;
};

class UnlockPickupEnv : public UnlockEnv {
 public:
  explicit UnlockPickupEnv(const Config& c) : UnlockEnv(c, Task::kPickup) {}
};

class BlockedUnlockPickupEnv : public UnlockEnv {
 public:
  explicit BlockedUnlockPickupEnv(const Config& c) : UnlockEnv(c, Task::kBlockedPickup) {}
};

AIOPOOL_REGISTER_MINIGRID("MiniGrid-Unlock-v0", UnlockEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-UnlockPickup-v0", UnlockPickupEnv);
AIOPOOL_REGISTER_MINIGRID("MiniGrid-BlockedUnlockPickup-v0", BlockedUnlockPickupEnv);

}  // namespace aiopool::minigrid
