// BipedalWalker-v3 / BipedalWalkerHardcore-v3: gymnasium 1.4's BipedalWalker
// (box2d/bipedal_walker.py), bit for bit, with its kwarg hardcore.
//
// Exact for the reasons LunarLander is (lunar_lander.h), and two of its own:
// - gymnasium keeps one b2World for the env's life and, at each reset, destroys the last
//   episode's bodies (the terrain in reverse order of creation, the hull, the legs) before it
//   builds the next; Box2D's allocators and broad-phase proxies then come in the same order on
//   both sides only if this env does the same, so it does.
// - the reward's motor cost is float32 arithmetic (numpy 2's promotion: a Python float times an
//   np.float32 is an np.float32, and so is a Python float minus one), and the observation's lidar
//   keeps the closest hit of each ray, as pybox2d's ray-cast callback does.
// A reset draws the terrain (uniforms, and in hardcore mode its obstacles' integers), the
// clouds gymnasium draws for rendering (110 uniforms, kept for the frames), the hull's push, and
// takes gymnasium's own first step (actions 0).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../registry.h"
#include "box2d.h"

namespace aiopool {

class BipedalWalker {
 public:
  using Action = float;

  static std::vector<ConfigKey> keys(bool hardcore) {
    return {{"hardcore", ConfigKey::Kind::kBool, hardcore ? 1.0 : 0.0}};
  }
  static std::vector<ConfigKey> config_keys() { return keys(false); }

  static EnvSpec spec(const Config&) {
    constexpr double pi = M_PI;
    std::vector<double> low = {-pi, -5, -5, -5, -pi, -5, -pi, -5, -0.0, -pi, -5, -pi, -5, -0.0};
    std::vector<double> high = {pi, 5, 5, 5, pi, 5, pi, 5, 5, pi, 5, pi, 5, 5};
    low.resize(24, -1.0);
    high.resize(24, 1.0);
    for (double& v : low) v = static_cast<float>(v);  // .astype(np.float32)
    for (double& v : high) v = static_cast<float>(v);
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox, DType::kFloat32, {24}, low, high, 0};
    s.action_space = {Space::Kind::kBox, DType::kFloat32, {4}, {-1, -1, -1, -1}, {1, 1, 1, 1}, 0};
    return s;
  }

  explicit BipedalWalker(const Config& config) : hardcore_(config.get_bool("hardcore")) {
    // gymnasium's module-level fixture shapes and its env's two terrain fixture definitions.
    std::array<b2Vec2, kHullPoly.size()> hull;
    for (std::size_t k = 0; k < kHullPoly.size(); ++k)
      hull[k] = box2d::vec(kHullPoly[k][0] / kScale, kHullPoly[k][1] / kScale);
    shapes_->hull.Set(hull.data(), static_cast<int32>(hull.size()));
    shapes_->leg.SetAsBox(static_cast<float>(kLegW / 2), static_cast<float>(kLegH / 2));
    shapes_->lower.SetAsBox(static_cast<float>(0.8 * kLegW / 2), static_cast<float>(kLegH / 2));
  }

  void reset(Rng& rng) {
    guard_.clear();
    guard_([&] { build(rng); });
  }

  StepResult step(const Action* action, Rng&) {
    StepResult r;
    guard_([&] { r = advance(action); });
    return r;
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    for (std::size_t k = 0; k < state_.size(); ++k) obs[k] = static_cast<float>(state_[k]);
  }

  // What gymnasium's render() draws, after counting this frame as that render() does (its
  // lidar_render): [scroll, lidar_render, the hull's position (the rays' start), the 10 rays'
  // ends, per body (leg, lower leg, leg, lower leg, hull) x, y, angle, the clouds' 110 draws,
  // the terrain's 200 x then 200 y, then per obstacle its 4 (x, y)].
  std::vector<double> render_state() {
    lidar_render_ = (lidar_render_ + 1) % 100;
    const b2Vec2 pos = contacts_->body->GetPosition();
    std::vector<double> out = {scroll_, static_cast<double>(lidar_render_), pos.x, pos.y};
    for (const auto& p2 : lidar_p2_) out.insert(out.end(), p2.begin(), p2.end());
    for (const b2Body* b :
         std::array<const b2Body*, 5>{legs_[0], legs_[1], legs_[2], legs_[3], contacts_->body})
      out.insert(out.end(), {b->GetPosition().x, b->GetPosition().y, b->GetAngle()});
    out.insert(out.end(), clouds_.begin(), clouds_.end());
    out.insert(out.end(), terrain_x_.begin(), terrain_x_.end());
    out.insert(out.end(), terrain_y_.begin(), terrain_y_.end());
    for (const auto& poly : obstacles_)
      for (const auto& p : poly) out.insert(out.end(), p.begin(), p.end());
    return out;
  }

  // A failed Box2D assertion in the last step or reset (box2d::Guard), and its text.
  bool failed() const { return guard_.failed(); }
  std::string error() const { return guard_.error(); }

 private:
  // gymnasium's LidarCallback: each ray keeps the closest fixture of the ground's category,
  // and the point it hit (which render() draws the ray to).
  struct Lidar : b2RayCastCallback {
    float32 ReportFixture(b2Fixture* fixture, const b2Vec2& at, const b2Vec2&, float32 f) override {
      if ((fixture->GetFilterData().categoryBits & 1) == 0) return -1;
      point = at;
      hit = true;
      fraction = f;
      return f;
    }
    float32 fraction = 1.0f;
    bool hit = false;
    b2Vec2 point;
  };

  struct Shapes {
    b2PolygonShape hull, leg, lower;
  };

  b2Body* static_body(const b2Shape& shape, uint16 category) {
    b2BodyDef def;
    def.type = b2_staticBody;
    b2Body* body = world_->CreateBody(&def);
    const b2FixtureDef fd = box2d::fixture(shape, 0.0f, kFriction, category, 0xFFFF);
    body->CreateFixture(&fd);
    return body;
  }

  b2Body* polygon(const std::array<std::array<double, 2>, 4>& poly) {
    obstacles_.push_back(poly);
    b2Vec2 v[4];
    for (int k = 0; k < 4; ++k) v[k] = box2d::vec(poly[k][0], poly[k][1]);
    b2PolygonShape shape;
    shape.Set(v, 4);
    return terrain_.emplace_back(static_body(shape, 0x0001));
  }

  // gymnasium's _destroy: the terrain (in reverse order of creation), the hull, the legs.
  void destroy() {
    obstacles_.clear();
    if (terrain_.empty()) return;
    world_->SetContactListener(nullptr);
    for (auto it = terrain_.rbegin(); it != terrain_.rend(); ++it) world_->DestroyBody(*it);
    terrain_.clear();
    world_->DestroyBody(contacts_->body);
    for (b2Body* leg : legs_) world_->DestroyBody(leg);
  }

  // gymnasium's reset: the terrain, the clouds' draws, the walker, then step([0, 0, 0, 0]).
  void build(Rng& rng) {
    destroy();
    *contacts_ = box2d::Contacts();
    world_->SetContactListener(contacts_.get());
    has_prev_shaping_ = false;

    generate_terrain(rng);
    // gymnasium's _generate_clouds: per cloud, its x, then each of 5 points' two offsets.
    for (std::size_t k = 0; k < clouds_.size(); ++k)
      clouds_[k] = k % 11 == 0 ? rng.uniform(0, kTerrainLength) : rng.uniform(0, 5 * kTerrainStep);
    lidar_render_ = 0;

    const double init_x = kTerrainStep * kTerrainStartpad / 2;
    const double init_y = kTerrainHeight + 2 * kLegH;
    b2BodyDef hull_def;
    hull_def.type = b2_dynamicBody;
    hull_def.position = box2d::vec(init_x, init_y);
    b2Body* hull = contacts_->body = world_->CreateBody(&hull_def);
    const b2FixtureDef hull_fd = box2d::fixture(shapes_->hull, 5.0f, 0.1f, 0x0020);
    hull->CreateFixture(&hull_fd);
    hull->ApplyForceToCenter(box2d::vec(rng.uniform(-kInitialRandom, kInitialRandom), 0), true);

    for (int side = 0; side < 2; ++side) {
      const int i = side == 0 ? -1 : +1;
      b2BodyDef leg_def;
      leg_def.type = b2_dynamicBody;
      leg_def.position = box2d::vec(init_x, init_y - kLegH / 2 - kLegDown);
      leg_def.angle = static_cast<float>(i * 0.05);
      b2Body* leg = legs_[2 * side] = world_->CreateBody(&leg_def);
      const b2FixtureDef leg_fd = box2d::fixture(shapes_->leg, 1.0f, 0.2f, 0x0020);
      leg->CreateFixture(&leg_fd);
      joints_[2 * side] = joint(hull, leg, kLegDown, kLegH / 2, i, -0.8, 1.1);

      b2BodyDef lower_def;
      lower_def.type = b2_dynamicBody;
      lower_def.position = box2d::vec(init_x, init_y - kLegH * 3 / 2 - kLegDown);
      lower_def.angle = static_cast<float>(i * 0.05);
      b2Body* lower = legs_[2 * side + 1] = contacts_->legs[side] = world_->CreateBody(&lower_def);
      const b2FixtureDef lower_fd = box2d::fixture(shapes_->lower, 1.0f, 0.2f, 0x0020);
      lower->CreateFixture(&lower_fd);
      joints_[2 * side + 1] = joint(leg, lower, -kLegH / 2, kLegH / 2, 1, -1.6, -0.1);
    }

    const float zeros[4] = {0, 0, 0, 0};
    advance(zeros);
  }

  b2RevoluteJoint* joint(b2Body* a, b2Body* b, double anchor_a_y, double anchor_b_y, double speed,
                         double lower, double upper) {
    b2RevoluteJointDef def;
    def.bodyA = a;
    def.bodyB = b;
    def.localAnchorA = box2d::vec(0, anchor_a_y);
    def.localAnchorB = box2d::vec(0, anchor_b_y);
    def.enableMotor = true;
    def.enableLimit = true;
    def.maxMotorTorque = static_cast<float>(kMotorsTorque);
    def.motorSpeed = static_cast<float>(speed);
    def.lowerAngle = static_cast<float>(lower);
    def.upperAngle = static_cast<float>(upper);
    def.referenceAngle = box2d::reference_angle(a, b);
    return static_cast<b2RevoluteJoint*>(world_->CreateJoint(&def));
  }

  // gymnasium's _generate_terrain: grass whose slope wanders; in hardcore mode, stumps, stairs
  // and pits between stretches of grass. Obstacles are polygons; the ground is 199 edges.
  void generate_terrain(Rng& rng) {
    enum State : int64_t { kGrass, kStump, kStairs, kPit, kStates };
    int64_t state = kGrass;
    double velocity = 0.0, y = kTerrainHeight, original_y = 0;
    int64_t counter = kTerrainStartpad, stair_steps = 0, stair_width = 0, stair_height = 0;
    bool oneshot = false;
    std::array<double, kTerrainLength>& xs = terrain_x_;
    std::array<double, kTerrainLength>& ys = terrain_y_;
    const double ts = kTerrainStep;
    for (int i = 0; i < kTerrainLength; ++i) {
      const double x = i * ts;
      xs[i] = x;
      if (state == kGrass && !oneshot) {
        const double d = kTerrainHeight - y;
        velocity = 0.8 * velocity + 0.01 * (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0);
        if (i > kTerrainStartpad) velocity += rng.uniform(-1, 1) / kScale;
        y += velocity;
      } else if (state == kPit && oneshot) {
        counter = 3 + rng.integers(2);
        const std::array<std::array<double, 2>, 4> poly{
            {{x, y}, {x + ts, y}, {x + ts, y - 4 * ts}, {x, y - 4 * ts}}};
        polygon(poly);
        std::array<std::array<double, 2>, 4> moved = poly;
        for (auto& p : moved) p[0] += ts * static_cast<double>(counter);
        polygon(moved);
        counter += 2;
        original_y = y;
      } else if (state == kPit && !oneshot) {
        y = original_y;
        if (counter > 1) y -= 4 * ts;
      } else if (state == kStump && oneshot) {
        counter = 1 + rng.integers(2);
        const double c = static_cast<double>(counter) * ts;
        polygon({{{x, y}, {x + c, y}, {x + c, y + c}, {x, y + c}}});
      } else if (state == kStairs && oneshot) {
        stair_height = rng.next_double() > 0.5 ? +1 : -1;
        stair_width = 4 + rng.integers(1);  // integers(4, 5): no draw
        stair_steps = 3 + rng.integers(2);
        original_y = y;
        for (int64_t s = 0; s < stair_steps; ++s) {
          const double x0 = x + static_cast<double>(s * stair_width) * ts;
          const double x1 = x + static_cast<double>((1 + s) * stair_width) * ts;
          const double y0 = y + static_cast<double>(s * stair_height) * ts;
          const double y1 = y + static_cast<double>(-1 + s * stair_height) * ts;
          polygon({{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}});
        }
        counter = stair_steps * stair_width;
      } else if (state == kStairs && !oneshot) {
        const int64_t s = stair_steps * stair_width - counter - stair_height;
        const double n = static_cast<double>(s) / static_cast<double>(stair_width);
        y = original_y + (n * static_cast<double>(stair_height)) * ts;
      }
      oneshot = false;
      ys[i] = y;
      counter -= 1;
      if (counter == 0) {
        counter = kTerrainGrass / 2 + rng.integers(kTerrainGrass - kTerrainGrass / 2);
        state = state == kGrass && hardcore_ ? 1 + rng.integers(kStates - 1) : kGrass;
        oneshot = true;
      }
    }
    for (int i = 0; i < kTerrainLength - 1; ++i) {
      b2EdgeShape edge;
      edge.Set(box2d::vec(xs[i], ys[i]), box2d::vec(xs[i + 1], ys[i + 1]));
      terrain_.push_back(static_body(edge, 0x0001));
    }
  }

  // gymnasium's step: motor speeds and torques from the action, one Box2D step, ten lidar rays,
  // the state and the reward.
  StepResult advance(const float* action) {
    for (int j = 0; j < 4; ++j) {
      const float a = action[j];
      const float sign = a > 0 ? 1.0f : a < 0 ? -1.0f : 0.0f;  // np.sign: +0.0 for -0.0
      const float speed = static_cast<float>(j % 2 == 0 ? kSpeedHip : kSpeedKnee) * sign;
      joints_[j]->SetMotorSpeed(speed);
      joints_[j]->SetMaxMotorTorque(static_cast<float>(kMotorsTorque) * clip01(std::abs(a)));
    }

    world_->Step(static_cast<float>(1.0 / kFps), 6 * 30, 2 * 30);

    const b2Body* hull = contacts_->body;
    const b2Vec2 pos = hull->GetPosition();
    const b2Vec2 vel = hull->GetLinearVelocity();
    std::array<float, 10> lidar;
    for (int i = 0; i < 10; ++i) {
      Lidar ray;
      lidar_p2_[i] = {pos.x + std::sin(1.5 * i / 10.0) * kLidarRange,
                      pos.y - std::cos(1.5 * i / 10.0) * kLidarRange};
      world_->RayCast(&ray, pos, box2d::vec(lidar_p2_[i][0], lidar_p2_[i][1]));
      if (ray.hit) lidar_p2_[i] = {ray.point.x, ray.point.y};
      lidar[i] = ray.fraction;
    }

    auto joint_angle = [&](int j) { return static_cast<double>(joints_[j]->GetJointAngle()); };
    auto joint_speed = [&](int j) { return static_cast<double>(joints_[j]->GetJointSpeed()); };
    state_ = {static_cast<double>(hull->GetAngle()),
              2.0 * static_cast<double>(hull->GetAngularVelocity()) / kFps,
              0.3 * static_cast<double>(vel.x) * (kViewportW / kScale) / kFps,
              0.3 * static_cast<double>(vel.y) * (kViewportH / kScale) / kFps,
              joint_angle(0),
              joint_speed(0) / kSpeedHip,
              joint_angle(1) + 1.0,
              joint_speed(1) / kSpeedKnee,
              contacts_->leg_contact[0] ? 1.0 : 0.0,
              joint_angle(2),
              joint_speed(2) / kSpeedHip,
              joint_angle(3) + 1.0,
              joint_speed(3) / kSpeedKnee,
              contacts_->leg_contact[1] ? 1.0 : 0.0};
    for (int i = 0; i < 10; ++i) state_[14 + i] = lidar[i];

    const double pos_x = pos.x;
    scroll_ = pos_x - kViewportW / kScale / 5;
    double shaping = 130 * pos_x / kScale;  // forward: 300 points over the terrain
    shaping -= 5.0 * std::abs(state_[0]);   // keep the head level
    const double progress = has_prev_shaping_ ? shaping - prev_shaping_ : 0.0;
    prev_shaping_ = shaping;
    has_prev_shaping_ = true;
    // reward -= 0.00035 * MOTORS_TORQUE * np.clip(np.abs(a), 0, 1), in float32 (see the top).
    const float cost = static_cast<float>(0.00035 * kMotorsTorque);
    float reward = static_cast<float>(progress);
    for (int j = 0; j < 4; ++j) reward -= cost * clip01(std::abs(action[j]));

    StepResult r{reward, false, false};
    if (contacts_->game_over || pos_x < 0) {
      r.reward = -100;
      r.terminated = true;
    }
    if (pos_x > (kTerrainLength - kTerrainGrass) * kTerrainStep) r.terminated = true;
    return r;
  }

  static float clip01(float v) { return std::min(std::max(v, 0.0f), 1.0f); }

  static constexpr double kFps = 50;
  static constexpr double kScale = 30.0;
  static constexpr double kMotorsTorque = 80;
  static constexpr double kSpeedHip = 4, kSpeedKnee = 6;
  static constexpr double kLidarRange = 160 / kScale;
  static constexpr double kInitialRandom = 5;
  static constexpr std::array<std::array<int, 2>, 5> kHullPoly{
      {{-30, +9}, {+6, +9}, {+34, +1}, {+34, -8}, {-30, -8}}};
  static constexpr double kLegDown = -8 / kScale;
  static constexpr double kLegW = 8 / kScale, kLegH = 34 / kScale;
  static constexpr double kViewportW = 600, kViewportH = 400;
  static constexpr double kTerrainStep = 14 / kScale;
  static constexpr int kTerrainLength = 200;  // in steps
  static constexpr double kTerrainHeight = kViewportH / kScale / 4;
  static constexpr int64_t kTerrainGrass = 10;  // in steps
  static constexpr int64_t kTerrainStartpad = 20;
  static constexpr float kFriction = 2.5f;

  bool hardcore_;
  std::unique_ptr<Shapes> shapes_ = std::make_unique<Shapes>();
  std::unique_ptr<box2d::Contacts> contacts_ = std::make_unique<box2d::Contacts>();
  // One world for the env's life, as gymnasium's; declared after contacts_: destroyed before it.
  std::unique_ptr<b2World> world_ = std::make_unique<b2World>(b2Vec2(0.0f, -10.0f));
  std::vector<b2Body*> terrain_;
  std::array<b2Body*, 4> legs_{};  // leg, lower leg; leg, lower leg
  std::array<b2RevoluteJoint*, 4> joints_{};
  bool has_prev_shaping_ = false;
  double prev_shaping_ = 0.0;
  std::array<double, 24> state_{};
  // What render() draws besides the bodies.
  double scroll_ = 0.0;
  int lidar_render_ = 0;
  std::array<std::array<double, 2>, 10> lidar_p2_{};
  std::array<double, kTerrainLength / 20 * 11> clouds_{};
  std::array<double, kTerrainLength> terrain_x_{}, terrain_y_{};
  std::vector<std::array<std::array<double, 2>, 4>> obstacles_;
  box2d::Guard guard_;
};

class BipedalWalkerHardcore : public BipedalWalker {
 public:
  using BipedalWalker::BipedalWalker;
  static std::vector<ConfigKey> config_keys() { return keys(true); }
};

AIOPOOL_REGISTER_ENV("BipedalWalker-v3", BipedalWalker, 1600);
AIOPOOL_REGISTER_ENV("BipedalWalkerHardcore-v3", BipedalWalkerHardcore, 2000);

}  // namespace aiopool
