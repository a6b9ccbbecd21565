// The model the tabular toy-text envs share (FrozenLake, CliffWalking, Taxi): gymnasium's `P`
// table, s -> a -> [(prob, next state, reward, terminated)], and its `categorical_sample`.
//
// gymnasium draws every transition, deterministic or not, as
//   np.argmax(np.cumsum(probs) > np_random.random())
// so each step and reset takes one double from the stream; the cumulative sums here are
// numpy's (a sequential float64 sum in list order), the comparison the same, and the argmax of
// an all-False array is 0 as numpy's. A model is built once per config and shared, read-only,
// by the envs of a pool (workers only read it).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../env.h"
#include "../../rng.h"

namespace aiopool::toy_text {

struct Transition {
  double prob;    // as gymnasium's tuple has it (reported as info["prob"])
  double cum;     // np.cumsum of the probs up to this one
  int32_t next;   // the next state
  double reward;  // gymnasium's reward (ints there: exact in a double)
  bool terminated;
};

struct Model {
  int32_t num_states = 0;
  int32_t num_actions = 0;
  std::vector<std::array<Transition, 3>> table;  // [s * num_actions + a], `count` used
  std::vector<uint8_t> count;
  std::vector<double> initial_cum;  // np.cumsum(initial_state_distrib)

  Model(int32_t states, int32_t actions)
      : num_states(states),
        num_actions(actions),
        table(static_cast<std::size_t>(states) * static_cast<std::size_t>(actions)),
        count(table.size(), 0) {}

  // Appends (prob, next, reward, terminated) to P[s][a], keeping np.cumsum's running sum.
  void add(int32_t s, int32_t a, double prob, int32_t next, double reward, bool terminated) {
    const std::size_t k =
        static_cast<std::size_t>(s) * static_cast<std::size_t>(num_actions) + static_cast<std::size_t>(a);
    uint8_t& n = count[k];
    if (n == 3) throw std::logic_error("a toy-text transition list holds at most 3 outcomes");
    const double cum = n == 0 ? prob : table[k][n - 1].cum + prob;
    table[k][n++] = {prob, cum, next, reward, terminated};
  }

  // gymnasium: initial_state_distrib = weights / weights.sum() (weights are small integers, so
  // the sum is exact in any order), then the cumulative sum categorical_sample takes.
  void set_initial(const std::vector<double>& weights) {
    double total = 0.0;
    for (double w : weights) total += w;
    if (!(total > 0.0)) throw std::invalid_argument("the map has no start state");
    initial_cum.resize(weights.size());
    double acc = 0.0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      acc = i == 0 ? weights[i] / total : acc + weights[i] / total;
      initial_cum[i] = acc;
    }
  }

  // categorical_sample(initial_state_distrib, np_random): the first state whose cumulative
  // probability exceeds the draw (the sums never decrease), else 0.
  int32_t sample_initial(Rng& rng) const {
    const double u = rng.next_double();
    auto it = std::upper_bound(initial_cum.begin(), initial_cum.end(), u);
    return it == initial_cum.end() ? 0 : static_cast<int32_t>(it - initial_cum.begin());
  }

  // categorical_sample over P[s][a]: the transition taken.
  const Transition& sample(int32_t s, int64_t a, Rng& rng) const {
    const std::size_t k =
        static_cast<std::size_t>(s) * static_cast<std::size_t>(num_actions) + static_cast<std::size_t>(a);
    const double u = rng.next_double();
    const std::array<Transition, 3>& t = table[k];
    const uint8_t n = count[k];
    for (uint8_t i = 0; i < n; ++i)
      if (t[i].cum > u) return t[i];
    return t[0];
  }
};

// Where a table-driven env is: its model, its state and the probability of the transition that
// led there (gymnasium's info["prob"]: 1 after a reset). FrozenLake and CliffWalking are one.
struct Walk {
  std::shared_ptr<const Model> model;
  int32_t s = 0;
  double prob = 1.0;

  void reset(Rng& rng) {
    s = model->sample_initial(rng);
    prob = 1.0;
  }

  StepResult step(int64_t action, Rng& rng) {
    const Transition& t = model->sample(s, action, rng);
    s = t.next;
    prob = t.prob;
    return {t.reward, t.terminated, false};
  }

  void write(Row& row) const {
    *row.obs_as<int64_t>() = s;
    *row.info_as<double>(0) = prob;
  }
};

// The model for `key`, built by `build` the first time a live pool asks for it: the envs of a
// pool (and of pools made with the same kwargs) share one table instead of one each.
template <class Build>
std::shared_ptr<const Model> shared_model(const std::string& key, Build build) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const Model>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::weak_ptr<const Model>& slot = cache[key];
  std::shared_ptr<const Model> model = slot.lock();
  if (!model) {
    model = std::make_shared<const Model>(build());
    slot = model;
  }
  return model;
}

}  // namespace aiopool::toy_text
