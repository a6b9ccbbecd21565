// ③ Stepping envs on worker threads (and on a sync caller's, Pool::help) and writing their rows.
//
// `Runner` is what a worker sees: run(ticket) steps or resets every env the ticket names. The
// per-env orders (step or reset, the action bytes, a new seed) were staged by the Python thread
// before the ticket was pushed. `EnvRunner<E>` is the one place that knows an env's class: it
// keeps the per-env state (env, rng, time limit, episode statistics, autoreset bookkeeping).
// A ticket runs in two phases: (1) advance every env it names; (2) claim that many rows with
// one fetch_add (finish order, per ticket), let each env write obs + extras into its row, fill
// the runner's own fields and commit each block once. Workers touch env i only while holding
// its ticket; nothing here touches Python.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
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

// Where finished rows go: the block ring, then the ready queue. `written_rows` counts committed
// rows (in the ring's row-index space) for Pool::flush; the writer that brings it level with
// the rows claimed wakes a flush waiting for that (seq_cst both sides: see ReadyQueue).
struct Output {
  BlockRing* ring = nullptr;
  ReadyQueue* ready = nullptr;
  std::atomic<uint64_t>* written_rows = nullptr;
  const Layout* layout = nullptr;

  void commit(Block* block, uint64_t seq, int rows) {
    if (Block* done = ring->commit(block, seq, rows)) ready->push(done);
    const uint64_t written = written_rows->fetch_add(static_cast<uint64_t>(rows), std::memory_order_seq_cst) +
                             static_cast<uint64_t>(rows);
    if (ready->flush_waiting() && written == ring->claimed()) ready->wake_waiters();
  }
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run(const Ticket& ticket) = 0;
  // The env's last error message, for envs that report one (MuJoCo); "" otherwise.
  virtual std::string env_error(int) const { return {}; }
  // The env's current frame into `rgb` (EnvSpec::render_shape bytes), where the env renders in
  // C++; false otherwise. Only for an env nobody steps meanwhile (Pool::render checks).
  virtual bool render(int, uint8_t*) const { return false; }
  // The state a Python renderer draws from (see env.h), or empty. Drawing may change the env
  // where the reference's render() does (LunarLander's particles age): the pool claims it.
  virtual std::vector<double> render_state(int) { return {}; }
  // The simulator's state into a Python renderer's own (see env.h); false where there is none.
  virtual bool export_data(int, void*) const { return false; }
  // The env's own simulator model into the renderer's (same sizes); false where there is none.
  virtual bool export_model(int, void*) const { return false; }
  Orders orders;
  Output out;
};

template <class E>
class EnvRunner final : public Runner {
 public:
  EnvRunner(const Config& config, const EnvSpec& spec, int num_envs, AutoReset mode)
      : spec_(spec), mode_(mode) {
    if (spec.info.size() > kMaxInfoFields) throw std::invalid_argument("too many info fields");
    std::size_t final_bytes = 0;
    if (mode == AutoReset::kSameStep) {
      final_bytes = spec.observation_space.nbytes();
      for (const Field& f : spec.info) final_bytes += f.nbytes();
    }
    states_.reserve(static_cast<std::size_t>(num_envs));
    for (int i = 0; i < num_envs; ++i) states_.emplace_back(config, final_bytes);
    const std::size_t n = static_cast<std::size_t>(num_envs);
    orders.action_bytes = spec.action_space.nbytes();
    orders.reset.assign(n, 0);
    orders.reseed.assign(n, 0);
    orders.seeds.resize(n);
    orders.actions.assign(n * orders.action_bytes, std::byte{0});
  }

  std::string env_error(int id) const override {
    if constexpr (requires(const E& e) { e.error(); })
      return states_[static_cast<std::size_t>(id)].env.error();
    return {};
  }

  bool render(int id, uint8_t* rgb) const override {
    if constexpr (requires(const E& e, uint8_t* p) { e.render(p); }) {
      states_[static_cast<std::size_t>(id)].env.render(rgb);
      return true;
    }
    return false;
  }

  bool export_data(int id, void* dest) const override {
    if constexpr (requires(const E& e, void* p) { e.export_data(p); }) {
      states_[static_cast<std::size_t>(id)].env.export_data(dest);
      return true;
    }
    return false;
  }

  bool export_model(int id, void* dest) const override {
    if constexpr (requires(const E& e, void* p) { e.export_model(p); }) {
      states_[static_cast<std::size_t>(id)].env.export_model(dest);
      return true;
    }
    return false;
  }

  std::vector<double> render_state(int id) override {
    if constexpr (requires(E& e) { e.render_state(); })
      return states_[static_cast<std::size_t>(id)].env.render_state();
    return {};
  }

  void run(const Ticket& ticket) override {
    std::array<Outcome, kTicketEnvs> outcomes;
    const uint32_t n = ticket.count;
    for (uint32_t i = 0; i < n; ++i) outcomes[i] = advance(static_cast<int>(ticket.env_ids[i]));

    const Layout& L = *out.layout;
    const auto b = static_cast<uint64_t>(L.batch_size);
    const uint64_t first = out.ring->claim(n);
    uint64_t seq = first / b;
    int row = static_cast<int>(first % b);
    int in_block = 0;
    Block* block = out.ring->block_for(seq);
    for (uint32_t i = 0; i < n; ++i) {
      write(static_cast<int>(ticket.env_ids[i]), outcomes[i], *block, row);
      ++in_block;
      if (++row == L.batch_size) {
        out.commit(block, seq, in_block);  // before asking for the next block: see BlockRing
        ++seq;
        row = 0;
        in_block = 0;
        if (i + 1 < n) block = out.ring->block_for(seq);
      }
    }
    if (in_block > 0) out.commit(block, seq, in_block);
  }

 private:
  struct State {
    State(const Config& config, std::size_t final_bytes) : env(config), final_row(final_bytes) {}
    E env;
    Rng rng;
    int64_t elapsed = 0;  // 64-bit: an env without a time limit may run for days
    int64_t length = 0;
    double ret = 0.0;
    bool ended = false;                // the last step ended the episode (next_step resets next)
    std::vector<std::byte> final_row;  // same_step: terminal obs + extras, until written
  };

  // What phase (1) leaves for phase (2), besides the env's own state.
  struct Outcome {
    StepResult r;
    double ret;
    int64_t length;
    int64_t final_elapsed;  // same_step: > 0 when the step ended the episode and the env reset
  };

  Outcome advance(int id) {
    const auto i = static_cast<std::size_t>(id);
    State& s = states_[i];
    if (orders.reset[i] || (s.ended && mode_ == AutoReset::kNextStep)) {
      if (orders.reset[i] && orders.reseed[i]) {
        s.rng = orders.seeds[i];
        orders.reseed[i] = 0;
      }
      reset(s);
      return {StepResult{}, 0.0, 0, 0};
    }
    const auto* action =
        reinterpret_cast<const typename E::Action*>(orders.actions.data() + i * orders.action_bytes);
    StepResult r = s.env.step(action, s.rng);
    if constexpr (requires { s.env.failed(); }) {
      if (s.env.failed()) r = StepResult{0.0, false, true};  // an error ends the episode here
    }
    ++s.elapsed;
    ++s.length;
    s.ret += r.reward;
    if (spec_.max_episode_steps > 0 && s.elapsed >= spec_.max_episode_steps) r.truncated = true;
    const bool ended = (r.terminated && !r.continues) || r.truncated;
    if (ended && mode_ == AutoReset::kSameStep) {
      const Outcome o{r, s.ret, s.length, s.elapsed};
      write_env(s, s.final_row.data(), final_info_ptrs(s.final_row.data()).data());
      reset(s);
      return o;
    }
    s.ended = ended;
    return {r, s.ret, s.length, 0};
  }

  void reset(State& s) {
    s.env.reset(s.rng);
    s.elapsed = 0;
    s.length = 0;
    s.ret = 0.0;
    s.ended = false;
  }

  // Pointers to the extras inside a final_row scratch buffer (laid out obs, then extras).
  std::array<void*, kMaxInfoFields> final_info_ptrs(std::byte* base) const {
    std::array<void*, kMaxInfoFields> p;
    std::size_t off = spec_.observation_space.nbytes();
    for (std::size_t k = 0; k < spec_.info.size(); ++k) {
      p[k] = base + off;
      off += spec_.info[k].nbytes();
    }
    return p;
  }

  void write_env(State& s, void* obs, void* const* info) const {
    if constexpr (requires(E& e, uint8_t* p, std::span<const std::byte> b) { e.write_pixels(p, b); }) {
      if (s.env.pixel_obs()) {  // the state observation to scratch, then the row from it
        thread_local std::vector<std::byte> state;
        state.resize(spec_.state_obs_bytes);
        Row row{state.data(), info};
        s.env.write(row);
        s.env.write_pixels(static_cast<uint8_t*>(obs), state);
        return;
      }
    }
    Row row{obs, info};
    s.env.write(row);
  }

  void write(int id, const Outcome& o, Block& b, int row) {
    const Layout& L = *out.layout;
    State& s = states_[static_cast<std::size_t>(id)];
    std::array<void*, kMaxInfoFields> info;
    for (int k = 0; k < L.num_info; ++k) info[static_cast<std::size_t>(k)] = b.at(L, L.info_first + k, row);
    write_env(s, b.at(L, L.obs, row), info.data());
    *b.at<double>(L, L.reward, row) = o.r.reward;
    *b.at<bool>(L, L.terminated, row) = o.r.terminated;
    *b.at<bool>(L, L.truncated, row) = o.r.truncated;
    *b.at<int32_t>(L, L.env_id, row) = id;
    *b.at<int32_t>(L, L.elapsed_step, row) = saturate(s.elapsed);
    *b.at<double>(L, L.episode_return, row) = o.ret;
    *b.at<int32_t>(L, L.episode_length, row) = saturate(o.length);
    if (L.final_obs >= 0) write_final(s, o, b, row);
  }

  // same_step: the terminal obs + extras where the episode ended, zeros elsewhere (blocks are
  // recycled, so the row would otherwise hold an older row's values).
  void write_final(const State& s, const Outcome& o, Block& b, int row) const {
    const Layout& L = *out.layout;
    *b.at<int32_t>(L, L.final_info_first, row) = saturate(o.final_elapsed);
    const std::byte* src = s.final_row.data();
    for (int f = L.final_obs; f < static_cast<int>(L.fields.size()); ++f) {
      if (f == L.final_info_first) continue;
      const std::size_t n = L.fields[static_cast<std::size_t>(f)].row_bytes;
      if (o.final_elapsed > 0)
        std::memcpy(b.at(L, f, row), src, n);
      else
        std::memset(b.at(L, f, row), 0, n);
      src += n;
    }
  }

  // The batch's int32 step counters stop at INT32_MAX instead of wrapping.
  static int32_t saturate(int64_t v) {
    return static_cast<int32_t>(std::min<int64_t>(v, std::numeric_limits<int32_t>::max()));
  }

  EnvSpec spec_;
  AutoReset mode_;
  std::vector<State> states_;
};

}  // namespace aiopool
