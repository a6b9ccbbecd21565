// Blackjack-v1: gymnasium 1.4's BlackjackEnv (toy_text/blackjack.py), bit for bit, with its kwargs
// natural and sab (gymnasium registers the id with sab=True).
//
// The observation is gymnasium's Tuple(Discrete(32), Discrete(11), Discrete(2)): the player's
// sum, the dealer's face-up card and whether the player holds a usable ace, three int64 parts
// of one row (EnvSpec::obs_parts). Cards come from an infinite deck as gymnasium draws them,
// np_random.choice(deck) over 13 values (Rng::integers(13)); a reset also draws the face-up
// card's suit (choice of 4) and, for a 10, its face (choice of J/Q/K), which only the rendering
// shows but which move the stream. A hand is kept as what the rules read of it: its sum, whether
// it holds an ace and its size (a natural is two cards, an ace and a ten). No time limit.
#pragma once

#include <cstdint>
#include <vector>

#include "../../env.h"
#include "../../registry.h"

namespace aiopool {

class Blackjack {
 public:
  using Action = int64_t;

  static std::vector<ConfigKey> config_keys() {
    return {{"natural", ConfigKey::Kind::kBool, 0.0}, {"sab", ConfigKey::Kind::kBool, 1.0}};
  }

  static EnvSpec spec(const Config&) {
    EnvSpec s;
    s.observation_space = {Space::Kind::kBox, DType::kInt64, {3}, {0, 0, 0}, {31, 10, 1}};
    s.obs_parts = {{"0", discrete(32)}, {"1", discrete(11)}, {"2", discrete(2)}};
    s.action_space = discrete(2);
    s.chunk = 32;
    return s;
  }

  explicit Blackjack(const Config& config)
      : natural_(config.get_bool("natural")), sab_(config.get_bool("sab")) {}

  void reset(Rng& rng) {
    dealer_ = draw_hand(rng);
    player_ = draw_hand(rng);
    suit_ = static_cast<int32_t>(rng.integers(4));
    face_ = dealer_.first == 10 ? 11 + static_cast<int32_t>(rng.integers(3)) : dealer_.first;
  }

  StepResult step(const Action* action, Rng& rng) {
    if (*action != 0) {  // hit
      player_.add(draw_card(rng));
      return player_.bust() ? StepResult{-1.0, true, false} : StepResult{0.0, false, false};
    }
    while (dealer_.value() < 17) dealer_.add(draw_card(rng));  // stick: the dealer plays out
    const int32_t mine = player_.score(), theirs = dealer_.score();
    double reward = static_cast<double>(mine > theirs) - static_cast<double>(mine < theirs);
    if (sab_ && player_.natural() && !dealer_.natural())
      reward = 1.0;
    else if (!sab_ && natural_ && player_.natural() && reward == 1.0)
      reward = 1.5;
    return {reward, true, false};
  }

  void write(Row& row) const {
    int64_t* obs = row.obs_as<int64_t>();
    obs[0] = player_.value();
    obs[1] = dealer_.first;
    obs[2] = player_.usable_ace() ? 1 : 0;
  }

  // What gymnasium's render() reads: the observation, and the face-up card's face (1 ace, 2-10,
  // 11-13 J, Q, K) and suit (0-3: C, D, H, S).
  std::vector<double> render_state() const {
    return {static_cast<double>(player_.value()), static_cast<double>(dealer_.first),
            player_.usable_ace() ? 1.0 : 0.0, static_cast<double>(face_), static_cast<double>(suit_)};
  }

 private:
  struct Hand {
    int32_t sum = 0, cards = 0, first = 0;
    bool ace = false;

    void add(int32_t card) {
      if (cards++ == 0) first = card;
      sum += card;
      ace = ace || card == 1;
    }
    bool usable_ace() const { return ace && sum + 10 <= 21; }
    int32_t value() const { return usable_ace() ? sum + 10 : sum; }  // sum_hand
    bool bust() const { return value() > 21; }
    int32_t score() const { return bust() ? 0 : value(); }
    bool natural() const { return cards == 2 && ace && sum == 11; }  // sorted(hand) == [1, 10]
  };

  static Space discrete(int64_t n) { return {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, n}; }

  // deck = [1, 2, ..., 9, 10, 10, 10, 10]; np_random.choice(deck)
  static int32_t draw_card(Rng& rng) {
    const int64_t i = rng.integers(13);
    return i < 9 ? static_cast<int32_t>(i) + 1 : 10;
  }
  static Hand draw_hand(Rng& rng) {
    Hand h;
    h.add(draw_card(rng));
    h.add(draw_card(rng));
    return h;
  }

  bool natural_, sab_;
  Hand dealer_, player_;
  int32_t suit_ = 0, face_ = 1;
};

AIOPOOL_REGISTER_ENV("Blackjack-v1", Blackjack, 0);

}  // namespace aiopool
