// Taxi-v4: gymnasium 1.4's TaxiEnv (toy_text/taxi.py), bit for bit, with every kwarg: is_rainy,
// rainy_probability, fickle_passenger, fickle_probability.
//
// The transition table is built as gymnasium builds `P` (the dry and the rainy rules, tabular.h
// draws from it); a fickle passenger's new destination is np_random.choice of the three others
// (Rng::integers(3)), drawn when the taxi first moves with them aboard, and whether the passenger
// is fickle this episode is a reset's second draw, as gymnasium's. A row's info has "prob" (1 after
// a reset) and "action_mask" (int8, 6), as gymnasium's info.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../registry.h"
#include "tabular.h"

namespace aiopool {

class Taxi {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> config_keys() {
    return {{"is_rainy", ConfigKey::Kind::kBool, 0.0},
            {"fickle_passenger", ConfigKey::Kind::kBool, 0.0},
            {"rainy_probability", ConfigKey::Kind::kFloat, 0.8},
            {"fickle_probability", ConfigKey::Kind::kFloat, 0.3}};
  }

  static EnvSpec spec(const Config&) {
    EnvSpec s;
    s.observation_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, kStates};
    s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 6};
    s.info = {{"prob", DType::kFloat64, {}}, {"action_mask", DType::kInt8, {6}}};
    s.chunk = 32;
    return s;
  }

  explicit Taxi(const Config& config)
      : fickle_passenger_(config.get_bool("fickle_passenger")),
        fickle_probability_(config.get("fickle_probability")) {
    const bool rainy = config.get_bool("is_rainy");
    const double p = config.get("rainy_probability");
    char key[64];
    std::snprintf(key, sizeof key, "%d %a", rainy ? 1 : 0, rainy ? p : 0.0);
    model_ = toy_text::shared_model(key, [&] { return build(rainy, p); });
  }

  void reset(Rng& rng) {
    s_ = model_->sample_initial(rng);
    prob_ = 1.0;
    orientation_ = 0;
    fickle_step_ = fickle_passenger_ && rng.next_double() < fickle_probability_;
  }

  StepResult step(const Action* action, Rng& rng) {
    const toy_text::Transition& t = model_->sample(s_, *action, rng);
    int32_t s = t.next;
    if (fickle_passenger_ && fickle_step_) {
      const State before = decode(s_), after = decode(s);
      if (before.pass == 4 && (after.row != before.row || after.col != before.col)) {
        fickle_step_ = false;
        int32_t others[3], n = 0;
        for (int32_t d = 0; d < 4; ++d)
          if (d != before.dest) others[n++] = d;
        s = encode(after.row, after.col, after.pass, others[rng.integers(3)]);
      }
    }
    s_ = s;
    prob_ = t.prob;
    if (*action < 4) orientation_ = static_cast<int32_t>(*action);
    return {t.reward, t.terminated, false};
  }

  // What gymnasium's render() draws: `s` and `taxi_orientation`, which its render sets from
  // the last move (0-3) since the reset when it renders every step.
  std::vector<double> render_state() const {
    return {static_cast<double>(s_), static_cast<double>(orientation_)};
  }

  void write(Row& row) const {
    *row.obs_as<int64_t>() = s_;
    *row.info_as<double>(0) = prob_;
    const std::array<int8_t, 6>& mask = masks()[static_cast<std::size_t>(s_)];
    std::copy(mask.begin(), mask.end(), row.info_as<int8_t>(1));
  }

 private:
  static constexpr int32_t kStates = 500;
  static constexpr int32_t kMaxRow = 4, kMaxCol = 4;
  static constexpr const char* kMap[7] = {"+---------+", "|R: | : :G|", "| : | : : |", "| : : : : |",
                                          "| | : | : |", "|Y| : |B: |", "+---------+"};
  static constexpr int32_t kLocs[4][2] = {{0, 0}, {0, 4}, {4, 0}, {4, 3}};

  struct State {
    int32_t row, col, pass, dest;
  };
  static int32_t encode(int32_t row, int32_t col, int32_t pass, int32_t dest) {
    return ((row * 5 + col) * 5 + pass) * 4 + dest;
  }
  static State decode(int32_t i) { return {i / 100, i / 20 % 5, i / 4 % 5, i % 4}; }
  static bool open(int32_t map_row, int32_t map_col) { return kMap[map_row][map_col] == ':'; }
  static int32_t loc_index(int32_t row, int32_t col) {  // locs.index((row, col)), -1 if absent
    for (int32_t k = 0; k < 4; ++k)
      if (kLocs[k][0] == row && kLocs[k][1] == col) return k;
    return -1;
  }

  // _pickup and _dropoff: the passenger index and reward (and whether the ride ended).
  static void pickup(int32_t row, int32_t col, int32_t& pass, double& reward) {
    if (!(pass < 4 && kLocs[pass][0] == row && kLocs[pass][1] == col))
      reward = -10.0;
    else
      pass = 4;
  }
  static void dropoff(int32_t row, int32_t col, int32_t dest, int32_t& pass, double& reward,
                      bool& terminated) {
    if (kLocs[dest][0] == row && kLocs[dest][1] == col && pass == 4) {
      pass = dest;
      terminated = true;
      reward = 20.0;
    } else if (loc_index(row, col) >= 0 && pass == 4) {
      pass = loc_index(row, col);
    } else {
      reward = -10.0;
    }
  }

  // _calc_new_position: a lateral slip, undone where a wall is in the way.
  static std::array<int32_t, 2> slip(int32_t row, int32_t col, int32_t dr, int32_t dc) {
    const int32_t r = std::clamp(row + dr, 0, kMaxRow), c = std::clamp(col + dc, 0, kMaxCol);
    if (dc == 1 && !open(1 + r, 2 * c)) return {row, col};
    if (dc == -1 && !open(1 + r, 2 * c + 2)) return {row, col};
    return {r, c};
  }

  // gymnasium's __init__ with _build_dry_transitions / _build_rainy_transitions.
  static toy_text::Model build(bool rainy, double rainy_p) {
    toy_text::Model m(kStates, 6);
    std::vector<double> weights(kStates, 0.0);
    const double lateral = (1.0 - rainy_p) / 2.0;
    static constexpr int32_t kMoves[4][3][2] = {{{1, 0}, {0, 1}, {0, -1}},
                                                {{-1, 0}, {0, -1}, {0, 1}},
                                                {{0, 1}, {-1, 0}, {1, 0}},
                                                {{0, -1}, {1, 0}, {-1, 0}}};
    for (int32_t row = 0; row < 5; ++row)
      for (int32_t col = 0; col < 5; ++col)
        for (int32_t pass = 0; pass < 5; ++pass)
          for (int32_t dest = 0; dest < 4; ++dest) {
            const int32_t state = encode(row, col, pass, dest);
            if (pass < 4 && pass != dest) weights[static_cast<std::size_t>(state)] += 1.0;
            for (int32_t a = 0; a < 6; ++a) {
              int32_t new_row = row, new_col = col, new_pass = pass;
              double reward = -1.0;
              bool terminated = false;
              if (!rainy) {
                if (a == 0)
                  new_row = std::min(row + 1, kMaxRow);
                else if (a == 1)
                  new_row = std::max(row - 1, 0);
                if (a == 2 && open(1 + row, 2 * col + 2))
                  new_col = std::min(col + 1, kMaxCol);
                else if (a == 3 && open(1 + row, 2 * col))
                  new_col = std::max(col - 1, 0);
                else if (a == 4)
                  pickup(row, col, new_pass, reward);
                else if (a == 5)
                  dropoff(row, col, dest, new_pass, reward, terminated);
                m.add(state, a, 1.0, encode(new_row, new_col, new_pass, dest), reward, terminated);
                continue;
              }
              std::array<int32_t, 2> left = {row, col}, right = {row, col};
              if ((a == 0 && row < kMaxRow) || (a == 1 && row > 0) ||
                  (a == 2 && open(1 + row, 2 * col + 2)) || (a == 3 && open(1 + row, 2 * col))) {
                new_row = std::clamp(row + kMoves[a][0][0], 0, kMaxRow);
                new_col = std::clamp(col + kMoves[a][0][1], 0, kMaxCol);
                left = slip(row, col, kMoves[a][1][0], kMoves[a][1][1]);
                right = slip(row, col, kMoves[a][2][0], kMoves[a][2][1]);
              } else if (a == 4) {
                pickup(row, col, new_pass, reward);
              } else if (a == 5) {
                dropoff(row, col, dest, new_pass, reward, terminated);
              }
              const int32_t intended = encode(new_row, new_col, new_pass, dest);
              if (a <= 3) {
                m.add(state, a, rainy_p, intended, -1.0, terminated);
                m.add(state, a, lateral, encode(left[0], left[1], new_pass, dest), -1.0, terminated);
                m.add(state, a, lateral, encode(right[0], right[1], new_pass, dest), -1.0, terminated);
              } else {
                m.add(state, a, 1.0, intended, reward, terminated);
              }
            }
          }
    m.set_initial(weights);
    return m;
  }

  // action_mask(state) for every state.
  static const std::vector<std::array<int8_t, 6>>& masks() {
    static const std::vector<std::array<int8_t, 6>> table = [] {
      std::vector<std::array<int8_t, 6>> t(kStates);
      for (int32_t i = 0; i < kStates; ++i) {
        const State s = decode(i);
        const int32_t here = loc_index(s.row, s.col);
        t[static_cast<std::size_t>(i)] = {static_cast<int8_t>(s.row < 4),
                                          static_cast<int8_t>(s.row > 0),
                                          static_cast<int8_t>(s.col < 4 && open(s.row + 1, 2 * s.col + 2)),
                                          static_cast<int8_t>(s.col > 0 && open(s.row + 1, 2 * s.col)),
                                          static_cast<int8_t>(s.pass < 4 && here == s.pass),
                                          static_cast<int8_t>(s.pass == 4 && here >= 0)};
      }
      return t;
    }();
    return table;
  }

  bool fickle_passenger_;
  double fickle_probability_;
  std::shared_ptr<const toy_text::Model> model_;
  int32_t s_ = 0;
  int32_t orientation_ = 0;  // the taxi's heading in frames: the last move since the reset
  double prob_ = 1.0;
  bool fickle_step_ = false;
};

AIOPOOL_REGISTER_ENV("Taxi-v4", Taxi, 200);

}  // namespace aiopool
