// LunarLander-v3 / LunarLanderContinuous-v3: gymnasium 1.4's LunarLander
// (box2d/lunar_lander.py), bit for bit, with its kwargs continuous, gravity, enable_wind,
// wind_power and turbulence_power.
//
// Exact because it does what gymnasium's env does, in its order, on the same Box2D: a new
// b2World at each reset (gymnasium's workaround for its issue #728), the terrain, lander and
// legs built as pybox2d builds them (a body, then its fixtures; polygon vertices through
// b2PolygonShape::Set; a revolute joint's reference angle from its bodies' angles, as
// pybox2d's joint definition sets it), the same contact listener, and every number that
// crosses into Box2D computed in double as Python computes it, then rounded to float32 as
// pybox2d's b2Vec2 rounds it.
// The observation and reward are computed in double from Box2D's float32 state, as Python does.
// A reset draws the terrain (12 uniforms), the initial force (2), the wind phases (2 integers,
// with enable_wind) and then takes gymnasium's own first step (action 0), which draws 2 more.
// The particles gymnasium's env adds when it renders (render_mode set) are decoration: they
// never touch the lander. With `particles` (which make() sets with render_mode) they are
// simulated as gymnasium simulates them, and age as its render() ages them (render_state()),
// so frames are gymnasium's.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../registry.h"
#include "box2d.h"

namespace aiopool {

using box2d::vec;

class LunarLander {
 public:
  // Discrete(4) takes int64 actions, the continuous version float32 pairs; `continuous` picks.
  using Action = std::byte;

  static std::vector<ConfigKey> keys(bool continuous) {
    return {{"continuous", ConfigKey::Kind::kBool, continuous ? 1.0 : 0.0},
            {"gravity", ConfigKey::Kind::kFloat, -10.0},
            {"enable_wind", ConfigKey::Kind::kBool, 0.0},
            {"wind_power", ConfigKey::Kind::kFloat, 15.0},
            {"turbulence_power", ConfigKey::Kind::kFloat, 1.5},
            {"particles", ConfigKey::Kind::kBool, 0.0}};
  }
  static std::vector<ConfigKey> config_keys() { return keys(false); }

  static EnvSpec spec(const Config& config) {
    const double gravity = config.get("gravity");
    if (!(-12.0 < gravity && gravity < 0.0))
      throw std::invalid_argument("gravity is " + std::to_string(gravity) + ", expected -12 < gravity < 0");
    const float pi2 = static_cast<float>(2 * M_PI);
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox,
                           DType::kFloat32,
                           {8},
                           {-2.5, -2.5, -10.0, -10.0, -pi2, -10.0, -0.0, -0.0},
                           {2.5, 2.5, 10.0, 10.0, pi2, 10.0, 1.0, 1.0},
                           0};
    if (config.get_bool("continuous"))
      s.action_space = {Space::Kind::kBox, DType::kFloat32, {2}, {-1.0, -1.0}, {1.0, 1.0}, 0};
    else
      s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 4};
    return s;
  }

  explicit LunarLander(const Config& config)
      : continuous_(config.get_bool("continuous")),
        gravity_(config.get("gravity")),
        enable_wind_(config.get_bool("enable_wind")),
        wind_power_(config.get("wind_power")),
        turbulence_power_(config.get("turbulence_power")),
        particles_on_(config.get_bool("particles")) {}

  void reset(Rng& rng) {
    guard_.clear();
    guard_([&] { build(rng); });
  }

  StepResult step(const Action* action, Rng& rng) {
    StepResult r;
    if (!continuous_) {
      guard_([&] { r = advance(0.0, 0.0, *reinterpret_cast<const int64_t*>(action), rng); });
      return r;
    }
    const auto* a = reinterpret_cast<const float*>(action);
    // np.clip(action, -1, +1).astype(np.float64): float32 clipping, then exact widening.
    auto clip = [](float v) { return static_cast<double>(v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v)); };
    guard_([&] { r = advance(clip(a[0]), clip(a[1]), -1, rng); });
    return r;
  }

  void write(Row& row) const {
    float* obs = row.obs_as<float>();
    for (std::size_t k = 0; k < state_.size(); ++k) obs[k] = static_cast<float>(state_[k]);
  }

  // What gymnasium's render() draws, after it has aged the particles as that render() does:
  // [helipad_x1, helipad_x2, helipad_y, the terrain's 11 (x, y), then per body (lander, leg,
  // leg) x, y, angle, then per particle x, y, angle, ttl (the ttl before this render's aging)].
  std::vector<double> render_state() {
    std::vector<double> out = {chunk_x_[kChunks / 2 - 1], chunk_x_[kChunks / 2 + 1], helipad_y_};
    for (int i = 0; i < kChunks; ++i) out.insert(out.end(), {chunk_x_[i], smooth_y_[i]});
    for (const b2Body* b : {lander(), contacts_->legs[0], contacts_->legs[1]})
      out.insert(out.end(), {b->GetPosition().x, b->GetPosition().y, b->GetAngle()});
    for (const Particle& p : particles_)
      out.insert(out.end(), {p.body->GetPosition().x, p.body->GetPosition().y, p.body->GetAngle(), p.ttl});
    for (Particle& p : particles_) p.ttl -= 0.15;  // render(): obj.ttl -= 0.15
    guard_([&] { clean_particles(false); });
    return out;
  }

  // A failed Box2D assertion in the last step or reset (box2d::Guard), and its text.
  bool failed() const { return guard_.failed(); }
  std::string error() const { return guard_.error(); }

 private:
  b2Body* lander() const { return contacts_->body; }

  // gymnasium's reset: a new world, the terrain, the lander and its legs, then step(0).
  void build(Rng& rng) {
    particles_.clear();  // gymnasium destroys them; the new world replaces the old
    world_ = std::make_unique<b2World>(vec(0.0, gravity_));
    *contacts_ = box2d::Contacts();
    world_->SetContactListener(contacts_.get());
    has_prev_shaping_ = false;

    // The terrain: 11 chunks, the helipad's five heights flat, each point the mean of three.
    const double w = kViewportW / kScale, h = kViewportH / kScale;
    std::array<double, kChunks + 1> height;
    for (double& y : height) y = rng.uniform(0, h / 2);
    std::array<double, kChunks>& chunk_x = chunk_x_;
    std::array<double, kChunks>& smooth_y = smooth_y_;
    for (int i = 0; i < kChunks; ++i) chunk_x[i] = w / (kChunks - 1) * i;
    helipad_y_ = h / 4;
    for (int i = kChunks / 2 - 2; i <= kChunks / 2 + 2; ++i) height[i] = helipad_y_;
    for (int i = 0; i < kChunks; ++i)  // height[-1] is Python's last element
      smooth_y[i] = 0.33 * (height[(i + kChunks) % (kChunks + 1)] + height[i] + height[i + 1]);

    b2BodyDef moon_def;
    moon_def.type = b2_staticBody;
    b2Body* moon = world_->CreateBody(&moon_def);
    b2EdgeShape floor;
    floor.Set(vec(0, 0), vec(w, 0));
    b2FixtureDef floor_def;
    floor_def.shape = &floor;
    moon->CreateFixture(&floor_def);
    for (int i = 0; i < kChunks - 1; ++i) {
      b2EdgeShape edge;
      edge.Set(vec(chunk_x[i], smooth_y[i]), vec(chunk_x[i + 1], smooth_y[i + 1]));
      b2FixtureDef def;
      def.shape = &edge;
      def.density = 0;
      def.friction = 0.1f;
      moon->CreateFixture(&def);
    }

    // The lander, pushed by a random force, and its legs on spring-loaded joints.
    const double initial_x = kViewportW / kScale / 2, initial_y = kViewportH / kScale;
    b2BodyDef lander_def;
    lander_def.type = b2_dynamicBody;
    lander_def.position = vec(initial_x, initial_y);
    lander_def.angle = 0.0f;
    contacts_->body = world_->CreateBody(&lander_def);
    constexpr std::array<std::array<int, 2>, 6> kLanderPoly{
        {{-14, +17}, {-17, 0}, {-17, -10}, {+17, -10}, {+17, 0}, {+14, +17}}};
    b2Vec2 hull[kLanderPoly.size()];
    for (std::size_t k = 0; k < kLanderPoly.size(); ++k)
      hull[k] = vec(kLanderPoly[k][0] / kScale, kLanderPoly[k][1] / kScale);
    b2PolygonShape body_shape;
    body_shape.Set(hull, static_cast<int32>(kLanderPoly.size()));
    const b2FixtureDef body_fd = box2d::fixture(body_shape, 5.0f, 0.1f, 0x0010);
    lander()->CreateFixture(&body_fd);
    const double fx = rng.uniform(-kInitialRandom, kInitialRandom);
    const double fy = rng.uniform(-kInitialRandom, kInitialRandom);
    lander()->ApplyForceToCenter(vec(fx, fy), true);

    if (enable_wind_) {  // integers(-9999, 9999)
      wind_idx_ = rng.integers(19998) - 9999;
      torque_idx_ = rng.integers(19998) - 9999;
    }

    for (int side = 0; side < 2; ++side) {
      const int i = side == 0 ? -1 : +1;
      b2BodyDef leg_def;
      leg_def.type = b2_dynamicBody;
      leg_def.position = vec(initial_x - i * kLegAway / kScale, initial_y);
      leg_def.angle = static_cast<float>(i * 0.05);
      contacts_->legs[side] = world_->CreateBody(&leg_def);
      b2PolygonShape leg_shape;
      leg_shape.SetAsBox(static_cast<float>(kLegW / kScale), static_cast<float>(kLegH / kScale));
      const b2FixtureDef leg_fd = box2d::fixture(leg_shape, 1.0f, 0.2f, 0x0020);
      contacts_->legs[side]->CreateFixture(&leg_fd);

      b2RevoluteJointDef joint;
      joint.bodyA = lander();
      joint.bodyB = contacts_->legs[side];
      joint.referenceAngle = box2d::reference_angle(lander(), contacts_->legs[side]);
      joint.localAnchorA = vec(0, 0);
      joint.localAnchorB = vec(i * kLegAway / kScale, kLegDown / kScale);
      joint.enableMotor = true;
      joint.enableLimit = true;
      joint.maxMotorTorque = static_cast<float>(kLegSpringTorque);
      joint.motorSpeed = static_cast<float>(+0.3 * i);
      joint.lowerAngle = static_cast<float>(i == -1 ? +0.9 - 0.5 : -0.9);
      joint.upperAngle = static_cast<float>(i == -1 ? +0.9 : -0.9 + 0.5);
      world_->CreateJoint(&joint);
    }

    advance(0.0, 0.0, 0, rng);  // gymnasium's reset returns the observation of step(0)
  }

  // gymnasium's _create_particle: a small ball that collides with the ground only.
  b2Body* create_particle(double mass, double x, double y, double ttl) {
    b2BodyDef def;
    def.type = b2_dynamicBody;
    def.position = vec(x, y);
    def.angle = 0.0f;
    b2Body* body = world_->CreateBody(&def);
    b2CircleShape ball;
    ball.m_radius = static_cast<float>(2 / kScale);
    ball.m_p = vec(0, 0);
    b2FixtureDef fd;
    fd.shape = &ball;
    fd.density = static_cast<float>(mass);
    fd.friction = 0.1f;
    fd.filter.categoryBits = 0x0100;
    fd.filter.maskBits = 0x001;  // collide only with the ground
    fd.restitution = 0.3f;
    body->CreateFixture(&fd);
    particles_.push_back({body, ttl});
    clean_particles(false);
    return body;
  }

  // gymnasium's _clean_particles: the oldest particles while their ttl is below 0, or all.
  void clean_particles(bool all) {
    while (!particles_.empty() && (all || particles_.front().ttl < 0)) {
      world_->DestroyBody(particles_.front().body);
      particles_.pop_front();
    }
  }

  // gymnasium's step: wind, the engines' impulses, one Box2D step, the state and the reward.
  // `discrete` is the Discrete(4) action, or -1 with the continuous (main, lateral) in [-1, 1].
  StepResult advance(double main, double lateral, int64_t discrete, Rng& rng) {
    if (enable_wind_ && !(contacts_->leg_contact[0] || contacts_->leg_contact[1])) {
      // tanh(sin(2 k x) + sin(pi k x)), k = 0.01: never periodic.
      const double wind_mag =
          std::tanh(std::sin(0.02 * wind_idx_) + std::sin(M_PI * 0.01 * wind_idx_)) * wind_power_;
      wind_idx_ += 1;
      lander()->ApplyForceToCenter(vec(wind_mag, 0.0), true);
      const double torque_mag =
          std::tanh(std::sin(0.02 * torque_idx_) + std::sin(M_PI * 0.01 * torque_idx_)) * turbulence_power_;
      torque_idx_ += 1;
      lander()->ApplyTorque(static_cast<float>(torque_mag), true);
    }

    // tip: the lander's up direction; side: across it.
    const double angle = lander()->GetAngle();
    const double tip0 = std::sin(angle), tip1 = std::cos(angle);
    const double side0 = -tip1, side1 = tip0;
    std::array<double, 2> dispersion;
    for (double& d : dispersion) d = rng.uniform(-1.0, +1.0) / kScale;

    double m_power = 0.0;
    if (discrete < 0 ? main > 0.0 : discrete == 2) {
      m_power = discrete < 0 ? (std::min(std::max(main, 0.0), 1.0) + 1.0) * 0.5 : 1.0;  // 0.5..1.0
      const double reach = kMainEngineYLocation / kScale + 2 * dispersion[0];
      const double ox = tip0 * reach + side0 * dispersion[1];
      const double oy = -tip1 * reach - side1 * dispersion[1];
      const b2Vec2 pos = lander()->GetPosition();
      const double at_x = pos.x + ox, at_y = pos.y + oy;
      const b2Vec2 at = vec(at_x, at_y);
      if (particles_on_)  // 3.5: a particle speed that looks right
        create_particle(3.5, at_x, at_y, m_power)
            ->ApplyLinearImpulse(vec(ox * kMainEnginePower * m_power, oy * kMainEnginePower * m_power), at,
                                 true);
      lander()->ApplyLinearImpulse(vec(-ox * kMainEnginePower * m_power, -oy * kMainEnginePower * m_power),
                                   at, true);
    }

    double s_power = 0.0;
    if (discrete < 0 ? std::abs(lateral) > 0.5 : (discrete == 1 || discrete == 3)) {
      double direction;
      if (discrete < 0) {
        direction = lateral > 0.0 ? 1.0 : -1.0;  // np.sign of |lateral| > 0.5
        s_power = std::min(std::max(std::abs(lateral), 0.5), 1.0);
      } else {
        direction = static_cast<double>(discrete - 2);  // 1 fires the left engine, 3 the right
        s_power = 1.0;
      }
      const double away = 3 * dispersion[1] + direction * kSideEngineAway / kScale;
      const double ox = tip0 * dispersion[0] + side0 * away;
      const double oy = -tip1 * dispersion[0] - side1 * away;
      // gymnasium's 17 (where SIDE_ENGINE_HEIGHT is 14) makes the torque depend on the tilt.
      const b2Vec2 pos = lander()->GetPosition();
      const double at_x = pos.x + ox - tip0 * 17 / kScale,
                   at_y = pos.y + oy + tip1 * kSideEngineHeight / kScale;
      const b2Vec2 at = vec(at_x, at_y);
      if (particles_on_)
        create_particle(0.7, at_x, at_y, s_power)
            ->ApplyLinearImpulse(vec(ox * kSideEnginePower * s_power, oy * kSideEnginePower * s_power), at,
                                 true);
      lander()->ApplyLinearImpulse(vec(-ox * kSideEnginePower * s_power, -oy * kSideEnginePower * s_power),
                                   at, true);
    }

    world_->Step(static_cast<float>(1.0 / kFps), 6 * 30, 2 * 30);

    const b2Vec2 pos = lander()->GetPosition();
    const b2Vec2 vel = lander()->GetLinearVelocity();
    const double pos_x = pos.x, pos_y = pos.y, vel_x = vel.x, vel_y = vel.y;
    state_ = {(pos_x - kViewportW / kScale / 2) / (kViewportW / kScale / 2),
              (pos_y - (helipad_y_ + kLegDown / kScale)) / (kViewportH / kScale / 2),
              vel_x * (kViewportW / kScale / 2) / kFps,
              vel_y * (kViewportH / kScale / 2) / kFps,
              static_cast<double>(lander()->GetAngle()),
              20.0 * static_cast<double>(lander()->GetAngularVelocity()) / kFps,
              contacts_->leg_contact[0] ? 1.0 : 0.0,
              contacts_->leg_contact[1] ? 1.0 : 0.0};
    const std::array<double, 8>& s = state_;
    // Closer to the pad, slower, level and on its legs is better.
    const double shaping = -100 * std::sqrt(s[0] * s[0] + s[1] * s[1]) -
                           100 * std::sqrt(s[2] * s[2] + s[3] * s[3]) - 100 * std::abs(s[4]) + 10 * s[6] +
                           10 * s[7];
    double reward = has_prev_shaping_ ? shaping - prev_shaping_ : 0.0;
    prev_shaping_ = shaping;
    has_prev_shaping_ = true;
    reward -= m_power * 0.30;  // less fuel spent is better
    reward -= s_power * 0.03;

    bool terminated = false;
    if (contacts_->game_over || std::abs(s[0]) >= 1.0) {
      terminated = true;
      reward = -100;
    }
    if (!lander()->IsAwake()) {  // landed and at rest
      terminated = true;
      reward = +100;
    }
    return {reward, terminated, false};
  }

  static constexpr int kChunks = 11;
  static constexpr double kFps = 50;
  static constexpr double kScale = 30.0;
  static constexpr double kMainEnginePower = 13.0;
  static constexpr double kSideEnginePower = 0.6;
  static constexpr double kInitialRandom = 1000.0;
  static constexpr double kLegAway = 20, kLegDown = 18, kLegW = 2, kLegH = 8;
  static constexpr double kLegSpringTorque = 40;
  static constexpr double kSideEngineHeight = 14, kSideEngineAway = 12;
  static constexpr double kMainEngineYLocation = 4;
  static constexpr double kViewportW = 600, kViewportH = 400;

  bool continuous_;
  double gravity_;
  bool enable_wind_;
  double wind_power_, turbulence_power_;
  std::unique_ptr<box2d::Contacts> contacts_ = std::make_unique<box2d::Contacts>();
  std::unique_ptr<b2World> world_;  // declared after contacts_: destroyed before it
  double helipad_y_ = 0.0;
  std::array<double, kChunks> chunk_x_{}, smooth_y_{};  // the terrain's points
  bool particles_on_;
  struct Particle {
    b2Body* body;
    double ttl;  // gymnasium's p.ttl: the engine's power, less 0.15 per frame drawn
  };
  std::deque<Particle> particles_;
  int64_t wind_idx_ = 0, torque_idx_ = 0;
  bool has_prev_shaping_ = false;
  double prev_shaping_ = 0.0;
  std::array<double, 8> state_{};
  box2d::Guard guard_;
};

class LunarLanderContinuous : public LunarLander {
 public:
  using LunarLander::LunarLander;
  static std::vector<ConfigKey> config_keys() { return keys(true); }
};

AIOPOOL_REGISTER_ENV("LunarLander-v3", LunarLander, 1000);
AIOPOOL_REGISTER_ENV("LunarLanderContinuous-v3", LunarLanderContinuous, 1000);

}  // namespace aiopool
