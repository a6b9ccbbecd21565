// CarRacing-v3: gymnasium 1.4's CarRacing (box2d/car_racing.py, car_dynamics.py) with its
// kwargs continuous, lap_complete_percent, domain_randomize (and verbose, which only prints).
//
// The track, the car's dynamics, the tiles it visits, the reward and the episode's end are
// gymnasium's bit for bit, for the reasons LunarLander's are (lunar_lander.h) and
// BipedalWalker's (one b2World for the env's life, the last episode's bodies destroyed in
// gymnasium's order before the next are built): every number that crosses into Box2D is
// computed in double as Python computes it, then rounded to float32 as pybox2d rounds it. The
// car's own physics (car_dynamics.py's Car.step: engine, brakes, tyre friction) is Python
// double arithmetic on Box2D's float32 state, done here in the same order.
//
// The observation is gymnasium's 96x96 "state_pixels" frame, drawn from the same polygons,
// colours and camera by pygame_draw.h's copies of pygame's rasterisers. render() gives the
// 600x400 "rgb_array" frame, skid marks included.
//
// A reset draws the colours (with domain_randomize: 3 + 3 uniforms and an integer), then the
// track (12 checkpoints, 2 uniforms each, again until a track closes), and takes gymnasium's
// own first step (no action), which touches the first tiles.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../registry.h"
#include "box2d.h"
#include "pygame_draw.h"

namespace aiopool {

class CarRacing {
 public:
  // Discrete(5) takes int64 actions, the continuous version float32 (steer, gas, brake).
  using Action = std::byte;

  static std::vector<ConfigKey> config_keys() {
    return {{"continuous", ConfigKey::Kind::kBool, 1.0},
            {"lap_complete_percent", ConfigKey::Kind::kFloat, 0.95},
            {"domain_randomize", ConfigKey::Kind::kBool, 0.0},
            {"verbose", ConfigKey::Kind::kBool, 0.0},
            // The score's glyphs (pygame_font.py's table, as hex), which make() sets.
            {"score_glyphs", ConfigKey::Kind::kString, 0.0, ""}};
  }

  static EnvSpec spec(const Config& config) {
    EnvSpec s;
    constexpr std::size_t n = kStateH * kStateW * 3;
    s.observation_space = {Space::Kind::kBox,
                           DType::kUInt8,
                           {kStateH, kStateW, 3},
                           std::vector<double>(n, 0.0),
                           std::vector<double>(n, 255.0),
                           0};
    if (config.get_bool("continuous"))
      s.action_space = {Space::Kind::kBox, DType::kFloat32, {3}, {-1.0, 0.0, 0.0}, {1.0, 1.0, 1.0}, 0};
    else
      s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 5};
    s.render_shape = {kVideoH, kVideoW, 3};
    s.render_fps = kFps;
    // gymnasium's info["lap_finished"], which its step sets only where the episode ends: True for
    // a finished lap, False for leaving the playfield. `_lap_finished` says where it is set, as
    // gymnasium's vector infos mask each key (the adapters give the key only there).
    s.info = {{"lap_finished", DType::kBool, {}}, {"_lap_finished", DType::kBool, {}}};
    return s;
  }

  explicit CarRacing(const Config& config)
      : continuous_(config.get_bool("continuous")),
        lap_complete_percent_(config.get("lap_complete_percent")),
        domain_randomize_(config.get_bool("domain_randomize")) {
    if (const std::string& hex = config.get_string("score_glyphs"); !hex.empty()) {
      std::string table(hex.size() / 2, '\0');
      for (std::size_t k = 0; k < table.size(); ++k)
        table[k] = static_cast<char>(std::stoi(hex.substr(2 * k, 2), nullptr, 16));
      glyphs_ = std::make_shared<const pygame_draw::Glyphs>(table);
    }
    world_ = std::make_unique<b2World>(b2Vec2(0.0f, 0.0f));
    world_->SetContactListener(friction_.get());
  }

  void reset(Rng& rng) {
    lap_finished_ = -1;
    friction_->env = this;  // where the pool keeps it now
    guard_.clear();
    guard_([&] { build(rng); });
  }

  StepResult step(const Action* action, Rng&) {
    StepResult r;
    lap_finished_ = -1;
    friction_->env = this;
    guard_([&] {
      if (continuous_) {
        const auto* a = reinterpret_cast<const float*>(action);  // .astype(np.float64)
        r = advance(true, -static_cast<double>(a[0]), a[1], a[2]);
      } else {
        const int64_t a = *reinterpret_cast<const int64_t*>(action);
        r = advance(true, -0.6 * (a == 1) + 0.6 * (a == 2), 0.2 * (a == 3), 0.8 * (a == 4));
      }
    });
    return r;
  }

  void write(Row& row) const {
    std::copy(state_.px.begin(), state_.px.end(), row.obs_as<uint8_t>());
    *row.info_as<bool>(0) = lap_finished_ == 1;
    *row.info_as<bool>(1) = lap_finished_ >= 0;
  }

  void render(uint8_t* rgb) const {
    pygame_draw::Surface video(kVideoW, kVideoH);
    draw(video, true);
    std::copy(video.px.begin(), video.px.end(), rgb);
  }

  // The state gymnasium's render() draws, for tests and tools: [t, reward, the hull's x, y,
  // angle, linear velocity (x, y), angular velocity, then per wheel x, y, angle, phase, omega,
  // joint angle, then the number of tiles and how many were visited].
  std::vector<double> render_state() const {
    const b2Body* hull = car_.hull;
    std::vector<double> out = {t_,
                               reward_,
                               hull->GetPosition().x,
                               hull->GetPosition().y,
                               hull->GetAngle(),
                               hull->GetLinearVelocity().x,
                               hull->GetLinearVelocity().y,
                               hull->GetAngularVelocity()};
    for (const Wheel& w : car_.wheels)
      out.insert(out.end(), {w.body->GetPosition().x, w.body->GetPosition().y, w.body->GetAngle(), w.phase,
                             w.omega, w.joint->GetJointAngle()});
    out.insert(out.end(), {static_cast<double>(track_.size()), static_cast<double>(tile_visited_count_)});
    return out;
  }

  // A failed Box2D assertion in the last step or reset (box2d::Guard), and its text.
  bool failed() const { return guard_.failed(); }
  std::string error() const { return guard_.error(); }

 private:
  using Rgb3 = std::array<double, 3>;  // a colour as gymnasium's numpy arrays hold it

  struct Tile {
    b2Body* body;
    Rgb3 color;
    bool visited = false;
  };
  struct Particle {  // a skid mark: car_dynamics.py's Particle
    bool grass;
    std::vector<std::array<double, 2>> poly;
  };
  struct Wheel {
    b2Body* body = nullptr;
    b2RevoluteJoint* joint = nullptr;
    double gas = 0.0, brake = 0.0, steer = 0.0, phase = 0.0, omega = 0.0;
    std::multiset<int> tiles;  // the tiles it touches (gymnasium's set; a tile once per contact)
    bool skidding = false;     // skid_start is not None
    std::shared_ptr<Particle> skid_particle;
    static double wheel_rad() { return 1.0 * kWheelR * kSize; }  // front_k * WHEEL_R * SIZE
  };
  struct Car {
    b2Body* hull = nullptr;
    std::array<Wheel, 4> wheels;
    std::deque<std::shared_ptr<Particle>> particles;  // deque(maxlen=30)
  };

  // gymnasium's FrictionDetector: a tile touched takes the road's colour; a wheel on a tile
  // grips, and a tile's first wheel scores 1000/N and may end the lap. Bodies' user data tell
  // tiles (index + 1) from wheels (-(index + 1)); the hull has none.
  struct Friction : b2ContactListener {
    void BeginContact(b2Contact* contact) override { touch(contact, true); }
    void EndContact(b2Contact* contact) override { touch(contact, false); }
    void touch(b2Contact* contact, bool begin) {
      if (env == nullptr || env->destroying_) return;
      const auto tag = [](const b2Fixture* f) {
        return static_cast<int>(reinterpret_cast<intptr_t>(f->GetBody()->GetUserData()));
      };
      int u1 = tag(contact->GetFixtureA()), u2 = tag(contact->GetFixtureB());
      int tile = 0, obj = 0;
      if (u1 > 0) tile = u1, obj = u2;
      if (u2 > 0) tile = u2, obj = u1;
      if (tile == 0) return;
      env->touch(tile - 1, obj < 0 ? -obj - 1 : -1, begin);
    }
    CarRacing* env = nullptr;
  };

  void touch(int tile_index, int wheel, bool begin) {
    Tile& tile = tiles_[static_cast<std::size_t>(tile_index)];
    tile.color = road_color_;
    if (wheel < 0) return;
    std::multiset<int>& on = car_.wheels[static_cast<std::size_t>(wheel)].tiles;
    if (!begin) {
      on.erase(on.find(tile_index));
      return;
    }
    on.insert(tile_index);
    if (tile.visited) return;
    tile.visited = true;
    const double n = static_cast<double>(track_.size());
    reward_ += 1000.0 / n;
    tile_visited_count_ += 1;
    if (tile_index == 0 && tile_visited_count_ / n > lap_complete_percent_) new_lap_ = true;
  }

  // gymnasium's reset: the last episode's bodies destroyed, the colours, a track, the car, step().
  void build(Rng& rng) {
    destroy();
    reward_ = prev_reward_ = 0.0;
    tile_visited_count_ = 0;
    t_ = 0.0;
    new_lap_ = false;
    road_poly_.clear();
    if (domain_randomize_) {
      for (double& c : road_color_) c = rng.uniform(0, 210);
      for (double& c : bg_color_) c = rng.uniform(0, 210);
      grass_color_ = bg_color_;
      grass_color_[static_cast<std::size_t>(rng.integers(3))] += 20;
    }
    while (!create_track(rng)) {
    }
    create_car(track_[0][1], track_[0][2], track_[0][3]);
    advance(false, 0, 0, 0);
  }

  void destroy() {
    if (tiles_.empty()) return;
    destroying_ = true;  // gymnasium's listener sees these contacts end on bodies it forgets
    for (Tile& t : tiles_) world_->DestroyBody(t.body);
    tiles_.clear();
    world_->DestroyBody(car_.hull);
    for (Wheel& w : car_.wheels) world_->DestroyBody(w.body);
    car_ = Car();
    destroying_ = false;
  }

  // gymnasium's _create_track: 12 checkpoints around a circle, a road that steers towards
  // them for up to five laps, one lap cut out of it, tiles and the red-white borders of sharp
  // turns. False where the lap does not close, as gymnasium's.
  bool create_track(Rng& rng) {
    constexpr int kCheckpoints = 12;
    std::array<std::array<double, 3>, kCheckpoints> checkpoints;
    for (int c = 0; c < kCheckpoints; ++c) {
      const double noise = rng.uniform(0, 2 * M_PI * 1 / kCheckpoints);
      double alpha = 2 * M_PI * c / kCheckpoints + noise;
      double rad = rng.uniform(kTrackRad / 3, kTrackRad);
      if (c == 0) {
        alpha = 0;
        rad = 1.5 * kTrackRad;
      }
      if (c == kCheckpoints - 1) {
        alpha = 2 * M_PI * c / kCheckpoints;
        start_alpha_ = 2 * M_PI * (-0.5) / kCheckpoints;
        rad = 1.5 * kTrackRad;
      }
      checkpoints[static_cast<std::size_t>(c)] = {alpha, rad * std::cos(alpha), rad * std::sin(alpha)};
    }

    double x = 1.5 * kTrackRad, y = 0, beta = 0;
    int dest_i = 0, laps = 0, no_freeze = 2500;
    bool visited_other_side = false;
    std::vector<std::array<double, 4>> track;  // (alpha, beta, x, y)
    while (true) {
      double alpha = std::atan2(y, x);
      if (visited_other_side && alpha > 0) {
        laps += 1;
        visited_other_side = false;
      }
      if (alpha < 0) {
        visited_other_side = true;
        alpha += 2 * M_PI;
      }
      double dest_x, dest_y;
      while (true) {  // the next checkpoint ahead
        bool failed = true;
        while (true) {
          const auto& [dest_alpha, cx, cy] = checkpoints[static_cast<std::size_t>(dest_i % kCheckpoints)];
          dest_x = cx, dest_y = cy;
          if (alpha <= dest_alpha) {
            failed = false;
            break;
          }
          dest_i += 1;
          if (dest_i % kCheckpoints == 0) break;
        }
        if (!failed) break;
        alpha -= 2 * M_PI;
      }
      const double r1x = std::cos(beta), r1y = std::sin(beta);
      const double p1x = -r1y, p1y = r1x;
      const double dest_dx = dest_x - x, dest_dy = dest_y - y;
      double proj = r1x * dest_dx + r1y * dest_dy;
      while (beta - alpha > 1.5 * M_PI) beta -= 2 * M_PI;
      while (beta - alpha < -1.5 * M_PI) beta += 2 * M_PI;
      const double prev_beta = beta;
      proj *= kScale;
      if (proj > 0.3) beta -= std::min(kTrackTurnRate, std::abs(0.001 * proj));
      if (proj < -0.3) beta += std::min(kTrackTurnRate, std::abs(0.001 * proj));
      x += p1x * kTrackDetailStep;
      y += p1y * kTrackDetailStep;
      track.push_back({alpha, prev_beta * 0.5 + beta * 0.5, x, y});
      if (laps > 4) break;
      no_freeze -= 1;
      if (no_freeze == 0) break;
    }

    // One lap: between the last two passes through the start.
    int i1 = -1, i2 = -1;
    int i = static_cast<int>(track.size());
    while (true) {
      i -= 1;
      if (i == 0) return false;
      const bool pass_through_start = track[static_cast<std::size_t>(i)][0] > start_alpha_ &&
                                      track[static_cast<std::size_t>(i - 1)][0] <= start_alpha_;
      if (pass_through_start && i2 == -1) {
        i2 = i;
      } else if (pass_through_start && i1 == -1) {
        i1 = i;
        break;
      }
    }
    if (i2 - 1 <= i1) return false;  // an empty lap (gymnasium would fail on track[0])
    track = std::vector<std::array<double, 4>>(track.begin() + i1, track.begin() + (i2 - 1));
    const std::size_t n = track.size();
    const auto at = [&](long k) -> const std::array<double, 4>& {  // Python's track[k], k >= -n
      return track[static_cast<std::size_t>(k < 0 ? k + static_cast<long>(n) : k)];
    };

    const double first_beta = track[0][1];
    const double first_perp_x = std::cos(first_beta), first_perp_y = std::sin(first_beta);
    const double gx = first_perp_x * (track[0][2] - track[n - 1][2]);
    const double gy = first_perp_y * (track[0][3] - track[n - 1][3]);
    if (std::sqrt(gx * gx + gy * gy) > kTrackDetailStep) return false;  // not well glued

    // Borders where the road turns one way sharply for BORDER_MIN_COUNT segments.
    std::vector<char> border(n, 0);
    for (std::size_t k = 0; k < n; ++k) {
      bool good = true;
      double oneside = 0;
      for (long neg = 0; neg < kBorderMinCount; ++neg) {
        const double beta1 = at(static_cast<long>(k) - neg)[1];
        const double beta2 = at(static_cast<long>(k) - neg - 1)[1];
        good &= std::abs(beta1 - beta2) > kTrackTurnRate * 0.2;
        oneside += sign(beta1 - beta2);
      }
      good &= std::abs(oneside) == kBorderMinCount;
      border[k] = good;
    }
    for (std::size_t k = 0; k < n; ++k)
      for (long neg = 0; neg < kBorderMinCount; ++neg) {
        const long j = static_cast<long>(k) - neg;
        border[static_cast<std::size_t>(j < 0 ? j + static_cast<long>(n) : j)] |= border[k];
      }

    tiles_.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto& [alpha1, beta1, x1, y1] = at(static_cast<long>(k));
      const auto& [alpha2, beta2, x2, y2] = at(static_cast<long>(k) - 1);
      const Poly road = {{{x1 - kTrackWidth * std::cos(beta1), y1 - kTrackWidth * std::sin(beta1)},
                          {x1 + kTrackWidth * std::cos(beta1), y1 + kTrackWidth * std::sin(beta1)},
                          {x2 + kTrackWidth * std::cos(beta2), y2 + kTrackWidth * std::sin(beta2)},
                          {x2 - kTrackWidth * std::cos(beta2), y2 - kTrackWidth * std::sin(beta2)}}};
      b2Vec2 v[4];
      for (int j = 0; j < 4; ++j)
        v[j] = box2d::vec(road[static_cast<std::size_t>(j)][0], road[static_cast<std::size_t>(j)][1]);
      b2PolygonShape shape;
      shape.Set(v, 4);
      b2BodyDef body_def;
      body_def.type = b2_staticBody;
      b2Body* body = world_->CreateBody(&body_def);
      b2FixtureDef fd;
      fd.shape = &shape;
      body->CreateFixture(&fd)->SetSensor(true);
      body->SetUserData(reinterpret_cast<void*>(static_cast<intptr_t>(k + 1)));
      const double c = 0.01 * static_cast<double>(k % 3) * 255;
      tiles_.push_back({body, {road_color_[0] + c, road_color_[1] + c, road_color_[2] + c}});
      road_poly_.push_back({road, static_cast<int>(k), {}});
      if (border[k]) {
        const double side = sign(beta2 - beta1);
        const double w1 = side * kTrackWidth, w2 = side * (kTrackWidth + kBorder);
        const Poly b = {{{x1 + w1 * std::cos(beta1), y1 + w1 * std::sin(beta1)},
                         {x1 + w2 * std::cos(beta1), y1 + w2 * std::sin(beta1)},
                         {x2 + w2 * std::cos(beta2), y2 + w2 * std::sin(beta2)},
                         {x2 + w1 * std::cos(beta2), y2 + w1 * std::sin(beta2)}}};
        road_poly_.push_back({b, -1, k % 2 == 0 ? Rgb3{255, 255, 255} : Rgb3{255, 0, 0}});
      }
    }
    track_ = std::move(track);
    return true;
  }

  // car_dynamics.py's Car: the hull's four polygons and four wheels on motorised joints that
  // steer the front two.
  void create_car(double init_angle, double init_x, double init_y) {
    b2BodyDef hull_def;
    hull_def.type = b2_dynamicBody;
    hull_def.position = box2d::vec(init_x, init_y);
    hull_def.angle = static_cast<float>(init_angle);
    car_.hull = world_->CreateBody(&hull_def);
    for (const auto& poly : kHullPolys) {
      std::vector<b2Vec2> v;
      for (const auto& [px, py] : poly) v.push_back(box2d::vec(px * kSize, py * kSize));
      b2PolygonShape shape;
      shape.Set(v.data(), static_cast<int32>(v.size()));
      b2FixtureDef fd;
      fd.shape = &shape;
      fd.density = 1.0f;
      car_.hull->CreateFixture(&fd);
    }
    for (std::size_t k = 0; k < 4; ++k) {
      const auto [wx, wy] = kWheelPos[k];
      b2BodyDef def;
      def.type = b2_dynamicBody;
      def.position = box2d::vec(init_x + wx * kSize, init_y + wy * kSize);
      def.angle = static_cast<float>(init_angle);
      Wheel& w = car_.wheels[k];
      w.body = world_->CreateBody(&def);
      const double front_k = 1.0;
      const std::array<std::array<double, 2>, 4> wheel_poly = {
          {{-kWheelW, +kWheelR}, {+kWheelW, +kWheelR}, {+kWheelW, -kWheelR}, {-kWheelW, -kWheelR}}};
      b2Vec2 v[4];
      for (int j = 0; j < 4; ++j) {
        const auto& [px, py] = wheel_poly[static_cast<std::size_t>(j)];
        v[j] = box2d::vec(px * front_k * kSize, py * front_k * kSize);
      }
      b2PolygonShape shape;
      shape.Set(v, 4);
      const b2FixtureDef fd = box2d::fixture(shape, 0.1f, 0.2f, 0x0020);
      w.body->CreateFixture(&fd);
      w.body->SetUserData(reinterpret_cast<void*>(static_cast<intptr_t>(-static_cast<int>(k) - 1)));

      b2RevoluteJointDef joint;
      joint.bodyA = car_.hull;
      joint.bodyB = w.body;
      joint.referenceAngle = box2d::reference_angle(car_.hull, w.body);
      joint.localAnchorA = box2d::vec(wx * kSize, wy * kSize);
      joint.localAnchorB = box2d::vec(0, 0);
      joint.enableMotor = true;
      joint.enableLimit = true;
      joint.maxMotorTorque = static_cast<float>(180 * 900 * kSize * kSize);
      joint.motorSpeed = 0.0f;
      joint.lowerAngle = -0.4f;
      joint.upperAngle = +0.4f;
      w.joint = static_cast<b2RevoluteJoint*>(world_->CreateJoint(&joint));
    }
  }

  // gymnasium's step: the controls (none in reset's step), Car.step, one Box2D step, the frame,
  // then (with an action) the reward and the episode's end.
  StepResult advance(bool act, double steer, double gas, double brake) {
    if (act) {
      gas = std::min(std::max(gas, 0.0), 1.0);  // Car.gas: np.clip, then at most +0.1 a step
      for (std::size_t k = 2; k < 4; ++k) {
        double diff = gas - car_.wheels[k].gas;
        if (diff > 0.1) diff = 0.1;
        car_.wheels[k].gas += diff;
      }
      for (Wheel& w : car_.wheels) w.brake = brake;
      car_.wheels[0].steer = steer;
      car_.wheels[1].steer = steer;
    }
    car_step(1.0 / kFps);
    world_->Step(static_cast<float>(1.0 / kFps), 6 * 30, 2 * 30);
    t_ += 1.0 / kFps;
    draw(state_, false);

    StepResult r;
    if (!act) return r;
    reward_ -= 0.1;
    r.reward = reward_ - prev_reward_;
    prev_reward_ = reward_;
    if (tile_visited_count_ == static_cast<int>(track_.size()) || new_lap_) {
      r.terminated = true;
      lap_finished_ = 1;
    }
    const b2Vec2 pos = car_.hull->GetPosition();
    if (std::abs(static_cast<double>(pos.x)) > kPlayfield ||
        std::abs(static_cast<double>(pos.y)) > kPlayfield) {
      r.terminated = true;
      r.reward = -100;
      lap_finished_ = 0;
    }
    return r;
  }

  // car_dynamics.py's Car.step: each wheel steers towards its target, spins up with the gas,
  // slows with the brake, and pushes the car with a friction force limited by the ground.
  void car_step(double dt) {
    for (Wheel& w : car_.wheels) {
      const double joint_angle = w.joint->GetJointAngle();
      const double dir = sign(w.steer - joint_angle);
      const double val = std::abs(w.steer - joint_angle);
      w.joint->SetMotorSpeed(static_cast<float>(dir * std::min(50.0 * val, 3.0)));

      // Every tile's road_friction is 1.0: the max over the tiles touched, or grass's 0.6.
      const bool grass = w.tiles.empty();
      const double friction_limit = grass ? kFrictionLimit * 0.6 : kFrictionLimit * 1.0;

      const b2Vec2 forw = w.body->GetWorldVector(b2Vec2(0.0f, 1.0f));
      const b2Vec2 side = w.body->GetWorldVector(b2Vec2(1.0f, 0.0f));
      const b2Vec2 v = w.body->GetLinearVelocity();
      const double vf = static_cast<double>(forw.x) * v.x + static_cast<double>(forw.y) * v.y;
      const double vs = static_cast<double>(side.x) * v.x + static_cast<double>(side.y) * v.y;

      w.omega += dt * kEnginePower * w.gas / kWheelMomentOfInertia / (std::abs(w.omega) + 5.0);
      if (w.brake >= 0.9) {
        w.omega = 0;
      } else if (w.brake > 0) {
        const double brake_dir = -sign(w.omega);
        double brake_val = 15 * w.brake;  // BRAKE_FORCE, radians per second
        if (std::abs(brake_val) > std::abs(w.omega)) brake_val = std::abs(w.omega);
        w.omega += brake_dir * brake_val;
      }
      w.phase += w.omega * dt;

      const double vr = w.omega * w.wheel_rad();
      double f_force = -vf + vr;
      double p_force = -vs;
      f_force *= 205000 * kSize * kSize;
      p_force *= 205000 * kSize * kSize;
      double force = std::sqrt(f_force * f_force + p_force * p_force);

      const b2Vec2 position = w.body->GetPosition();
      if (std::abs(force) > 2.0 * friction_limit) {  // a skid mark
        if (w.skid_particle && w.skid_particle->grass == grass && w.skid_particle->poly.size() < 30) {
          w.skid_particle->poly.push_back({position.x, position.y});
        } else if (!w.skidding) {
          w.skidding = true;
        } else {
          // skid_start is pybox2d's w.position: a reference to the wheel's position, so the mark
          // starts where the wheel is now, not where it started skidding.
          w.skid_particle = std::make_shared<Particle>(
              Particle{grass, {{position.x, position.y}, {position.x, position.y}}});
          car_.particles.push_back(w.skid_particle);
          if (car_.particles.size() > 30) car_.particles.pop_front();
          w.skidding = false;
        }
      } else {
        w.skidding = false;
        w.skid_particle.reset();
      }

      if (std::abs(force) > friction_limit) {
        f_force /= force;
        p_force /= force;
        force = friction_limit;
        f_force *= force;
        p_force *= force;
      }
      w.omega -= dt * f_force * w.wheel_rad() / kWheelMomentOfInertia;
      w.body->ApplyForceToCenter(
          box2d::vec(p_force * side.x + f_force * forw.x, p_force * side.y + f_force * forw.y), true);
    }
  }

  // gymnasium's _render: the field, grass, road and borders, the car (and its skid marks, in
  // the video), the surface flipped, the indicators and the score, scaled to `out`'s size.
  void draw(pygame_draw::Surface& out, bool particles) const {
    namespace pg = pygame_draw;
    thread_local pg::Surface surf(kWindowW, kWindowH);  // the window, black again for each frame
    std::fill(surf.px.begin(), surf.px.end(), uint8_t{0});
    surf.flipped = true;  // the field and the car are drawn upside down: gymnasium flips them
    const double angle = -static_cast<double>(car_.hull->GetAngle());
    const double zoom = 0.1 * kScale * std::max(1 - t_, 0.0) + kZoom * kScale * std::min(t_, 1.0);
    const b2Vec2 hull_pos = car_.hull->GetPosition();
    const auto scroll = pg::rotate_rad(-static_cast<double>(hull_pos.x) * zoom,
                                       -static_cast<double>(hull_pos.y) * zoom, angle);
    const std::array<double, 2> trans = {kWindowW / 2.0 + scroll[0], kWindowH / 4.0 + scroll[1]};
    const auto screen = [&](double x, double y) {
      const auto r = pg::rotate_rad(x, y, angle);
      return std::array<double, 2>{r[0] * zoom + trans[0], r[1] * zoom + trans[1]};
    };
    const auto color = [](const Rgb3& c) {
      return pg::Rgb{static_cast<uint8_t>(c[0]), static_cast<uint8_t>(c[1]), static_cast<uint8_t>(c[2])};
    };
    // _draw_colored_polygon: drawn where a corner is near the window (or always, clip=false).
    std::vector<std::array<double, 2>> corners;  // each polygon's corners on the window
    const auto polygon = [&](const std::array<std::array<double, 2>, 4>& poly, pg::Rgb rgb, bool clip) {
      corners.clear();
      bool near = !clip;
      for (const auto& [x, y] : poly) {
        const auto& p = corners.emplace_back(screen(x, y));
        near = near || (-kMaxShapeDim <= p[0] && p[0] <= kWindowW + kMaxShapeDim && -kMaxShapeDim <= p[1] &&
                        p[1] <= kWindowH + kMaxShapeDim);
      }
      if (!near) return;
      pg::gfx_aapolygon(surf, corners, rgb);
      pg::gfx_filled_polygon(surf, corners, rgb);
    };

    constexpr double b = kPlayfield;
    polygon({{{b, b}, {b, -b}, {-b, -b}, {-b, b}}}, color(bg_color_), false);
    constexpr double g = kGrassDim;
    for (int x = -20; x < 20; x += 2)
      for (int y = -20; y < 20; y += 2)
        polygon({{{g * x + g, g * y + 0},
                  {g * x + 0, g * y + 0},
                  {g * x + 0, g * y + g},
                  {g * x + g, g * y + g}}},
                color(grass_color_), true);
    for (const RoadPoly& p : road_poly_)
      polygon(p.poly, color(p.tile >= 0 ? tiles_[static_cast<std::size_t>(p.tile)].color : p.color), true);

    // Car.draw: the skid marks, then each wheel (with its white stripe) and the hull.
    if (particles)
      for (const auto& p : car_.particles) {
        std::vector<std::array<double, 2>> pts;
        for (const auto& [x, y] : p->poly) pts.push_back(screen(x, y));
        pg::draw_lines(surf, pts, p->grass ? pg::Rgb{102, 102, 0} : pg::Rgb{0, 0, 0}, 2);
      }
    const auto body_polygon = [&](const b2Transform& xf, const std::vector<b2Vec2>& vertices, pg::Rgb rgb) {
      std::vector<std::array<double, 2>> pts;
      for (const b2Vec2& v : vertices) {
        const b2Vec2 at = b2Mul(xf, v);  // pybox2d's transform * vertex, in float32
        pts.push_back(screen(at.x, at.y));
      }
      pg::draw_polygon(surf, pts, rgb);
    };
    const auto draw_body = [&](const b2Body* body, pg::Rgb rgb, const Wheel* wheel) {
      for (const b2Fixture* f = body->GetFixtureList(); f != nullptr; f = f->GetNext()) {
        const auto* shape = static_cast<const b2PolygonShape*>(f->GetShape());
        body_polygon(body->GetTransform(),
                     std::vector<b2Vec2>(shape->m_vertices, shape->m_vertices + shape->m_count), rgb);
        if (wheel == nullptr) continue;
        const double a1 = wheel->phase, a2 = wheel->phase + 1.2;
        const double s1 = std::sin(a1), s2 = std::sin(a2);
        double c1 = std::cos(a1), c2 = std::cos(a2);
        if (s1 > 0 && s2 > 0) continue;
        if (s1 > 0) c1 = sign(c1);
        if (s2 > 0) c2 = sign(c2);
        const double wx = kWheelW * kSize;
        body_polygon(body->GetTransform(),
                     {box2d::vec(-wx, kWheelR * c1 * kSize), box2d::vec(+wx, kWheelR * c1 * kSize),
                      box2d::vec(+wx, kWheelR * c2 * kSize), box2d::vec(-wx, kWheelR * c2 * kSize)},
                     pg::Rgb{77, 77, 77});
      }
    };
    for (const Wheel& w : car_.wheels) draw_body(w.body, pg::Rgb{0, 0, 0}, &w);
    draw_body(car_.hull, pg::Rgb{static_cast<uint8_t>(0.8 * 255), 0, 0}, nullptr);

    surf.flipped = false;  // pygame.transform.flip(surf, False, True) done; then the indicators
    draw_indicators(surf);
    char text[32];
    std::snprintf(text, sizeof text, "%04.0f", reward_);
    if (glyphs_ != nullptr) pg::draw_text(surf, *glyphs_, text, 60, kWindowH - kWindowH * 2.5 / 40.0);
    pg::smoothscale(surf, out);
  }

  // _render_indicators: the speed, the wheels' spin, the steering and the gyroscope as bars.
  void draw_indicators(pygame_draw::Surface& surf) const {
    namespace pg = pygame_draw;
    constexpr double w = kWindowW, h = kWindowH, s = w / 40.0, u = h / 40.0;
    pg::draw_polygon(surf, {{w, h}, {w, h - 5 * u}, {0, h - 5 * u}, {0, h}}, pg::Rgb{0, 0, 0});
    const auto vertical = [&](double value, double place, double val, pg::Rgb rgb) {
      if (std::abs(value) > 1e-4)
        pg::draw_polygon(surf,
                         {{place * s, h - (u + u * val)},
                          {(place + 1) * s, h - (u + u * val)},
                          {(place + 1) * s, h - u},
                          {(place + 0) * s, h - u}},
                         rgb);
    };
    const auto horizontal = [&](double value, double place, double val, pg::Rgb rgb) {
      if (std::abs(value) > 1e-4)
        pg::draw_polygon(surf,
                         {{(place + 0) * s, h - 4 * u},
                          {(place + val) * s, h - 4 * u},
                          {(place + val) * s, h - 2 * u},
                          {(place + 0) * s, h - 2 * u}},
                         rgb);
    };
    const b2Vec2 v = car_.hull->GetLinearVelocity();
    const double vx = v.x, vy = v.y;
    const double true_speed = std::sqrt(vx * vx + vy * vy);
    vertical(true_speed, 5, 0.02 * true_speed, pg::Rgb{255, 255, 255});
    for (std::size_t k = 0; k < 4; ++k) {
      const double omega = car_.wheels[k].omega;
      vertical(omega, 7.0 + static_cast<double>(k), 0.01 * omega,
               k < 2 ? pg::Rgb{0, 0, 255} : pg::Rgb{51, 0, 255});
    }
    const double joint = car_.wheels[0].joint->GetJointAngle();
    horizontal(joint, 20, -10.0 * joint, pg::Rgb{0, 255, 0});
    const double gyro = car_.hull->GetAngularVelocity();
    horizontal(gyro, 30, -0.8 * gyro, pg::Rgb{255, 0, 0});
  }

  static double sign(double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : v); }  // np.sign

  static constexpr int kStateW = 96, kStateH = 96, kVideoW = 600, kVideoH = 400;
  static constexpr int kWindowW = 1000, kWindowH = 800;
  static constexpr double kScale = 6.0, kTrackRad = 900 / kScale, kPlayfield = 2000 / kScale;
  static constexpr double kFps = 50, kZoom = 2.7;
  static constexpr double kTrackDetailStep = 21 / kScale, kTrackTurnRate = 0.31;
  static constexpr double kTrackWidth = 40 / kScale, kBorder = 8 / kScale;
  static constexpr int kBorderMinCount = 4;
  static constexpr double kGrassDim = kPlayfield / 20.0;
  // MAX_SHAPE_DIM: max(GRASS_DIM, TRACK_WIDTH, TRACK_DETAIL_STEP) * sqrt(2) * ZOOM * SCALE
  static inline const double kMaxShapeDim =
      std::max({kGrassDim, kTrackWidth, kTrackDetailStep}) * std::sqrt(2.0) * kZoom * kScale;
  static constexpr double kSize = 0.02;
  static constexpr double kEnginePower = 100000000 * kSize * kSize;
  static constexpr double kWheelMomentOfInertia = 4000 * kSize * kSize;
  static constexpr double kFrictionLimit = 1000000 * kSize * kSize;
  static constexpr double kWheelR = 27, kWheelW = 14;
  static constexpr std::array<std::array<double, 2>, 4> kWheelPos = {
      {{-55, +80}, {+55, +80}, {-55, -82}, {+55, -82}}};
  static inline const std::array<std::vector<std::array<double, 2>>, 4> kHullPolys = {
      {{{-60, +130}, {+60, +130}, {+60, +110}, {-60, +110}},
       {{-15, +120}, {+15, +120}, {+20, +20}, {-20, 20}},
       {{+25, +20}, {+50, -10}, {+50, -40}, {+20, -90}, {-20, -90}, {-50, -40}, {-50, -10}, {-25, +20}},
       {{-50, -120}, {+50, -120}, {+50, -90}, {-50, -90}}}};

  bool continuous_;
  double lap_complete_percent_;
  bool domain_randomize_;
  Rgb3 road_color_{102, 102, 102}, bg_color_{102, 204, 102}, grass_color_{102, 230, 102};

  using Poly = std::array<std::array<double, 2>, 4>;
  struct RoadPoly {
    Poly poly;
    int tile;  // its tile's index (whose colour it takes), or -1: a border, in `color`
    Rgb3 color;
  };
  std::vector<RoadPoly> road_poly_;
  std::vector<std::array<double, 4>> track_;
  std::vector<Tile> tiles_;
  double start_alpha_ = 0.0;
  double reward_ = 0.0, prev_reward_ = 0.0, t_ = 0.0;
  int tile_visited_count_ = 0;
  bool new_lap_ = false;
  int8_t lap_finished_ = -1;  // info["lap_finished"] of the last step: -1 where not set
  bool destroying_ = false;
  pygame_draw::Surface state_{kStateW, kStateH};
  std::shared_ptr<const pygame_draw::Glyphs> glyphs_;  // the score's digits
  std::unique_ptr<Friction> friction_ = std::make_unique<Friction>();
  std::unique_ptr<b2World> world_;  // declared after friction_: destroyed before it
  Car car_;
  box2d::Guard guard_;
};

AIOPOOL_REGISTER_ENV("CarRacing-v3", CarRacing, 1000);

}  // namespace aiopool
