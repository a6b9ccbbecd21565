// What gymnasium's Box2D envs share: Box2D 2.3 as pybox2d drives it, and the containment of
// Box2D's failed assertions.
#pragma once

#include <Box2D/Box2D.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>

extern thread_local const char* aiopool_box2d_assertion;  // cmake/box2d_shim/Python.h

namespace aiopool::box2d {

// A float32 pair as pybox2d makes one from two Python floats.
inline b2Vec2 vec(double x, double y) { return b2Vec2(static_cast<float>(x), static_cast<float>(y)); }

// A fixture definition as gymnasium's fixtureDef(...) makes one: restitution 0, the given filter
// (0x001 as the mask: collide only with the ground).
inline b2FixtureDef fixture(const b2Shape& shape, float density, float friction, uint16 category,
                            uint16 mask = 0x001) {
  b2FixtureDef def;
  def.shape = &shape;
  def.density = density;
  def.friction = friction;
  def.restitution = 0.0f;
  def.filter.categoryBits = category;
  def.filter.maskBits = mask;
  return def;
}

// pybox2d's b2RevoluteJointDef(bodyA=, bodyB=) sets the reference angle from its bodies' angles
// (in Python, in double) unless it is given.
inline float reference_angle(const b2Body* a, const b2Body* b) {
  return static_cast<float>(static_cast<double>(b->GetAngle()) - static_cast<double>(a->GetAngle()));
}

// gymnasium's ContactDetector of LunarLander and BipedalWalker: the body (the lander, the
// walker's hull) touching the ground ends the episode; two legs (the lander's, the walker's
// lower legs) report their contact in the observation. Envs keep it on the heap, where Box2D's
// pointer to it stays valid when the env moves.
struct Contacts : b2ContactListener {
  void BeginContact(b2Contact* contact) override {
    const b2Body* a = contact->GetFixtureA()->GetBody();
    const b2Body* b = contact->GetFixtureB()->GetBody();
    if (body == a || body == b) game_over = true;
    for (int i = 0; i < 2; ++i)
      if (legs[i] == a || legs[i] == b) leg_contact[i] = true;
  }
  void EndContact(b2Contact* contact) override {
    const b2Body* a = contact->GetFixtureA()->GetBody();
    const b2Body* b = contact->GetFixtureB()->GetBody();
    for (int i = 0; i < 2; ++i)
      if (legs[i] == a || legs[i] == b) leg_contact[i] = false;
  }

  b2Body* body = nullptr;
  std::array<b2Body*, 2> legs{nullptr, nullptr};
  std::array<bool, 2> leg_contact{false, false};
  bool game_over = false;
};

// Box2D work whose failed b2Assert (which pybox2d raises as an AssertionError) fails the env:
// the runner ends its episode (failed()), pool.env_error(i) has the text (error()), and the next
// reset starts over.
class Guard {
 public:
  template <class F>
  void operator()(F&& work) {
    try {
      work();
    } catch (const b2AssertException&) {
      failed_ = true;
      std::lock_guard<std::mutex> lock(*mu_);
      error_ = std::string("Box2D assertion failed: ") +
               (aiopool_box2d_assertion != nullptr ? aiopool_box2d_assertion : "?");
    }
  }
  void clear() { failed_ = false; }
  bool failed() const { return failed_; }
  std::string error() const {  // any thread
    std::lock_guard<std::mutex> lock(*mu_);
    return error_;
  }

 private:
  bool failed_ = false;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
  std::string error_;
};

}  // namespace aiopool::box2d
