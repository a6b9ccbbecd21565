// ③ Stepping envs on worker threads and writing their rows.
//
// `Runner` is what a worker sees: run(ticket) steps or resets every env the ticket names. The
// per-env orders (step or reset, the action bytes, a new seed) were staged by the Python thread
// before the ticket was pushed. `EnvRunner<E>` is the one place that knows an env's class: it
// keeps the per-env state (env, rng, time limit, episode statistics, autoreset bookkeeping),
// claims a row once the env has stepped (finish order), lets the env write obs + extras into
// it, fills the runner's own fields and commits. Workers touch env i only while holding its
// ticket; nothing here touches Python.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "action_queue.h"
#include "batch_block.h"
#include "doorbell.h"
#include "env.h"

namespace aiopool {

enum class AutoReset : uint8_t { kNextStep, kSameStep, kDisabled };

inline constexpr std::size_t kMaxInfoFields = 32;

// Staged by the Python thread, read by the worker that pops the env's ticket.
struct Orders {
  std::vector<uint8_t> reset;   // 1: reset the env, 0: step it with its action
  std::vector<uint8_t> reseed;  // 1: replace the env's rng with seeds[i] before resetting
  std::vector<Rng> seeds;
  std::vector<std::byte> actions;  // action_bytes per env
  std::size_t action_bytes = 0;
};

// Where finished rows go: the block ring, then the ready queue.
struct Output {
  BlockRing* ring = nullptr;
  ReadyQueue* ready = nullptr;
  std::atomic<uint64_t>* published_rows = nullptr;
  const Layout* layout = nullptr;

  void commit(const RowRef& ref) {
    if (Block* done = ring->commit(ref)) {
      ready->push(done);  // before the count: see Pool::rows_pending
      published_rows->fetch_add(static_cast<uint64_t>(layout->batch_size), std::memory_order_seq_cst);
    }
  }
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run(const Ticket& ticket) = 0;
  Orders orders;
  Output out;
};

template <class E>
class EnvRunner final : public Runner {
 public:
  EnvRunner(const Config& config, const EnvSpec& spec, int num_envs, AutoReset mode)
      : spec_(spec), mode_(mode) {
    if (spec.info.size() > kMaxInfoFields) throw std::invalid_argument("too many info fields");
    states_.reserve(static_cast<std::size_t>(num_envs));
    for (int i = 0; i < num_envs; ++i) states_.emplace_back(config);
    const std::size_t n = static_cast<std::size_t>(num_envs);
    orders.action_bytes = spec.action_space.nbytes();
    orders.reset.assign(n, 0);
    orders.reseed.assign(n, 0);
    orders.seeds.resize(n);
    orders.actions.assign(n * orders.action_bytes, std::byte{0});
  }

  void run(const Ticket& ticket) override {
    for (uint32_t i = 0; i < ticket.count; ++i) run_one(static_cast<int>(ticket.env_ids[i]));
  }

 private:
  struct State {
    explicit State(const Config& config) : env(config) {}
    E env;
    Rng rng;
    int elapsed = 0;
    int length = 0;
    double ret = 0.0;
    bool ended = false;  // the last step ended the episode (next_step resets on the next one)
  };

  void run_one(int id) {
    State& s = states_[static_cast<std::size_t>(id)];
    const std::size_t i = static_cast<std::size_t>(id);
    if (orders.reset[i] || (s.ended && mode_ == AutoReset::kNextStep)) {
      if (orders.reset[i] && orders.reseed[i]) {
        s.rng = orders.seeds[i];
        orders.reseed[i] = 0;
      }
      reset(s);
      const RowRef ref = out.ring->claim();
      write(s, ref, id, StepResult{});
      clear_final(ref);
      out.commit(ref);
      return;
    }
    const auto* action =
        reinterpret_cast<const typename E::Action*>(orders.actions.data() + i * orders.action_bytes);
    StepResult r = s.env.step(action, s.rng);
    ++s.elapsed;
    ++s.length;
    s.ret += r.reward;
    if (spec_.max_episode_steps > 0 && s.elapsed >= spec_.max_episode_steps) r.truncated = true;
    const bool ended = r.terminated || r.truncated;
    const RowRef ref = out.ring->claim();
    if (ended && mode_ == AutoReset::kSameStep) {
      const Layout& L = *out.layout;
      *ref.block->at<int32_t>(L, L.final_info_first, ref.row) = s.elapsed;
      write_env(s, ref, L.final_obs, L.final_info_first + 1);
      const double ret = s.ret;
      const int length = s.length;
      reset(s);
      write(s, ref, id, r, ret, length);
    } else {
      s.ended = ended;
      write(s, ref, id, r, s.ret, s.length);
      clear_final(ref);
    }
    out.commit(ref);
  }

  // same_step only: rows that did not end an episode get zeros in final_obs / final_info
  // (blocks are recycled, so they would otherwise hold an older row's values).
  void clear_final(const RowRef& ref) {
    const Layout& L = *out.layout;
    if (L.final_obs < 0) return;
    for (std::size_t f = static_cast<std::size_t>(L.final_obs); f < L.fields.size(); ++f)
      std::memset(ref.block->at(L, static_cast<int>(f), ref.row), 0, L.fields[f].row_bytes);
  }

  void reset(State& s) {
    s.env.reset(s.rng);
    s.elapsed = 0;
    s.length = 0;
    s.ret = 0.0;
    s.ended = false;
  }

  void write_env(const State& s, const RowRef& ref, int obs_field, int first_info) {
    const Layout& L = *out.layout;
    std::array<void*, kMaxInfoFields> info;
    for (int k = 0; k < L.num_info; ++k)
      info[static_cast<std::size_t>(k)] = ref.block->at(L, first_info + k, ref.row);
    Row row{ref.block->at(L, obs_field, ref.row), info.data()};
    s.env.write(row);
  }

  void write(const State& s, const RowRef& ref, int id, const StepResult& r) {
    write(s, ref, id, r, s.ret, s.length);
  }

  void write(const State& s, const RowRef& ref, int id, const StepResult& r, double ret, int length) {
    const Layout& L = *out.layout;
    write_env(s, ref, L.obs, L.info_first);
    Block& b = *ref.block;
    *b.at<double>(L, L.reward, ref.row) = r.reward;
    *b.at<bool>(L, L.terminated, ref.row) = r.terminated;
    *b.at<bool>(L, L.truncated, ref.row) = r.truncated;
    *b.at<int32_t>(L, L.env_id, ref.row) = id;
    *b.at<int32_t>(L, L.elapsed_step, ref.row) = s.elapsed;
    *b.at<double>(L, L.episode_return, ref.row) = ret;
    *b.at<int32_t>(L, L.episode_length, ref.row) = length;
  }

  EnvSpec spec_;
  AutoReset mode_;
  std::vector<State> states_;
};

}  // namespace aiopool
