// Wires ①–⑤: the action queue, the workers, the runner, the block ring and the ready queue.
//
// Threads: send/reset/take/arm/drain run on a thread holding the GIL, or on a thread of XLA's
// running a jitted program's send or receive (xla_ffi.h), which does not hold it. The per-env
// bookkeeping they share (`busy_`, `needs_reset_`, `stamp_`, the row counts) is plain data
// under `state_mu_`, which each of them holds only while it changes that data (never while it
// waits). `wait()`, `help()` and `close()` run without the GIL. Workers, and a sync caller in
// `help()`, only see the runner, ring and ready queue.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "action_queue.h"
#include "batch_block.h"
#include "doorbell.h"
#include "registry.h"
#include "runner.h"
#include "worker_pool.h"

namespace aiopool {

struct PoolOptions {
  int num_envs = 1;
  int batch_size = 1;
  int num_threads = 1;
  AutoReset autoreset = AutoReset::kNextStep;
  int64_t worker_spin_ns = 50'000;
  int max_episode_steps = -1;  // -1: the registered time limit; 0: none
  int max_spinners = 1 << 20;  // workers allowed to spin at once (see ActionQueue)
};

class Pool {
 public:
  Pool(const EnvEntry& entry, const Config& config, const PoolOptions& opt)
      : opt_(opt),
        spec_(with_time_limit(entry.spec_for(config), opt.max_episode_steps)),
        store_(std::make_shared<BlockStore>(
            Layout(spec_, opt.batch_size, opt.autoreset == AutoReset::kSameStep))),
        ring_(store_, 2 * ((opt.num_envs + opt.batch_size - 1) / opt.batch_size) + 2),
        queue_(static_cast<std::size_t>(opt.num_envs)),
        runner_(entry.make_runner(config, spec_, opt.num_envs, opt.autoreset)) {
    const std::size_t n = static_cast<std::size_t>(opt.num_envs);
    busy_.assign(n, 0);
    rendering_.assign(n, 0);
    needs_reset_.assign(n, kNeverReset);
    stamp_.assign(n, 0);
    runner_->out = Output{&ring_, &ready_, &written_rows_, &store_->layout()};
    queue_.set_max_spinners(opt.max_spinners);
    workers_ = std::make_unique<WorkerPool>(queue_, *runner_, opt.num_threads, opt.worker_spin_ns);
  }
  ~Pool() { close(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const EnvSpec& spec() const { return spec_; }
  const Layout& layout() const { return store_->layout(); }
  const std::shared_ptr<BlockStore>& store() const { return store_; }
  const PoolOptions& options() const { return opt_; }
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // Stage a new seed for each env (applied at its next reset). Python computes the states, and
  // the integer seeds (seed + i) for envs that take those (Rng::take_seed; may be null).
  void stage_seeds(const int32_t* ids, std::size_t k, const uint64_t* states,
                   const int64_t* seeds = nullptr) {
    const std::lock_guard<std::mutex> lock(state_mu_);
    check_ids(ids, k, "seed", /*need_idle=*/true, /*need_reset_ok=*/false);
    for (std::size_t j = 0; j < k; ++j) {
      const auto i = static_cast<std::size_t>(ids[j]);
      const uint64_t* s = states + 4 * j;
      runner_->orders.seeds[i] = Rng(s[0], s[1], s[2], s[3], seeds ? seeds[j] : -1);
      runner_->orders.reseed[i] = 1;
    }
  }

  // What `reset` would refuse, checked before any of it is staged (seeds included).
  void check_reset(const int32_t* ids, std::size_t k) {
    const std::lock_guard<std::mutex> lock(state_mu_);
    check_ids(ids, k, "async_reset", /*need_idle=*/true, /*need_reset_ok=*/false);
  }

  void reset(const int32_t* ids, std::size_t k) {
    const std::lock_guard<std::mutex> lock(state_mu_);
    check_ids(ids, k, "async_reset", /*need_idle=*/true, /*need_reset_ok=*/false);
    for (std::size_t j = 0; j < k; ++j) {
      const auto i = static_cast<std::size_t>(ids[j]);
      runner_->orders.reset[i] = 1;
      needs_reset_[i] = kReady;
    }
    dispatch(ids, k);
  }

  // actions: k rows of the action space's dtype and shape, already cast by the Python side.
  void send(const std::byte* actions, std::size_t nbytes, const int32_t* ids, std::size_t k) {
    const std::size_t ab = runner_->orders.action_bytes;
    if (nbytes != k * ab)
      throw std::invalid_argument("actions hold " + std::to_string(nbytes) + " bytes, expected " +
                                  std::to_string(k * ab) + " (one action per env in env_ids)");
    const std::lock_guard<std::mutex> lock(state_mu_);
    check_ids(ids, k, "send", /*need_idle=*/true, /*need_reset_ok=*/true);
    check_actions(actions, k);
    for (std::size_t j = 0; j < k; ++j) {
      const auto i = static_cast<std::size_t>(ids[j]);
      std::memcpy(runner_->orders.actions.data() + i * ab, actions + j * ab, ab);
      runner_->orders.reset[i] = 0;
    }
    dispatch(ids, k);
  }

  // Take a ready block (spinning up to spin_ns), or nullptr. Updates per-env bookkeeping.
  Block* take(int64_t spin_ns) {
    Block* b = spin_ns > 0 ? ready_.spin_take(spin_ns) : ready_.try_take();
    if (b == nullptr) return nullptr;
    const std::lock_guard<std::mutex> lock(state_mu_);
    const Layout& L = layout();
    const bool disabled = opt_.autoreset == AutoReset::kDisabled;
    for (int r = 0; r < b->rows; ++r) {
      const auto i = static_cast<std::size_t>(*b->at<int32_t>(L, L.env_id, r));
      busy_[i] = 0;
      if (disabled && (*b->at<bool>(L, L.terminated, r) || *b->at<bool>(L, L.truncated, r)))
        needs_reset_[i] = kEnded;
    }
    taken_rows_ += static_cast<uint64_t>(L.batch_size);
    return b;
  }

  // Rows sent whose results the consumer has not taken yet (in flight or ready). Counted in
  // the ring's row-index space, like every row count here: a block cut short by flush() counts
  // batch_size rows, the rows it did not fill included. Only the GIL holder changes it, so
  // `rows_in_flight() / batch_size` is exactly the number of batches still to come.
  int64_t rows_in_flight() const {
    const std::lock_guard<std::mutex> lock(state_mu_);
    return static_cast<int64_t>(sent_rows_ - taken_rows_);
  }
  // Sent rows not yet written by a worker.
  int64_t rows_unwritten() const {
    const std::lock_guard<std::mutex> lock(state_mu_);
    return unwritten();
  }

  // Partial batches, step 1 (call without the GIL): wait until every row sent so far is written.
  bool wait_written(double timeout_s) {
    return ready_.wait_written(written_rows_, sent_rows_snapshot_, timeout_s, closed_);
  }
  void snapshot_sent() {
    const std::lock_guard<std::mutex> lock(state_mu_);
    sent_rows_snapshot_ = sent_rows_;
  }

  // Partial batches, step 2 (GIL held): if every sent row is written, publish the partly filled
  // block as a short batch. Returns its rows, 0 if there was none, -1 if rows are unwritten.
  int cut() {
    if (closed()) throw std::runtime_error("flush() on a closed pool");
    const std::lock_guard<std::mutex> lock(state_mu_);
    if (unwritten() != 0) return -1;
    Block* b = ring_.cut();
    if (b == nullptr) return 0;
    const auto pad = static_cast<uint64_t>(opt_.batch_size - b->rows);
    sent_rows_ += pad;  // the rows the cut block did not fill, in every count
    written_rows_.fetch_add(pad, std::memory_order_seq_cst);
    ready_.push(b);
    return b->rows;
  }
  std::size_t ready_count() const { return ready_.size(); }

  // Call without the GIL. A sync caller about to wait steps envs itself: it runs queued
  // tickets, as a worker would, until none is queued or a batch is ready. Its thread would
  // only spin or sleep otherwise, and the envs it steps leave their rows in its own cache.
  // Returns the tickets it ran. noexcept: a throw here ends the process, as it does on a
  // worker thread, instead of leaving a ticket's rows unclaimed and a receiver waiting forever.
  int help() noexcept {
    Ticket t;
    int n = 0;
    while (!closed() && ready_.size() == 0 && queue_.try_pop(t)) {
      runner_->run(t);
      ++n;
    }
    return n;
  }
  // With a helping caller (the sync adapters), a send's envs are cut into tickets for one
  // thread more than the workers.
  void set_caller_helps(bool on) { caller_helps_ = on; }
  bool caller_helps() const { return caller_helps_; }
  std::string env_error(int id) const {
    if (id < 0 || id >= opt_.num_envs)
      throw std::invalid_argument("env_id is " + std::to_string(id) + ", expected 0 <= env_id < " +
                                  std::to_string(opt_.num_envs));
    return runner_->env_error(id);
  }

  // Rendering: `claim_render` (GIL held) checks the envs and counts them as being drawn, so
  // that no send or reset reaches them while `render` draws (GIL released); `release_render`
  // uncounts them. Several renders of an env may be claimed at once (from several threads);
  // `render` draws one call at a time (an env's camera is shared by its frames).
  void claim_render(const int32_t* ids, std::size_t k) {
    const std::lock_guard<std::mutex> lock(state_mu_);
    check_ids(ids, k, "render", true, false);
    for (std::size_t j = 0; j < k; ++j)
      if (needs_reset_[static_cast<std::size_t>(ids[j])] == kNeverReset)
        throw std::invalid_argument("render: env " + std::to_string(ids[j]) +
                                    " has not been reset yet; call async_reset() and receive its row first");
    for (std::size_t j = 0; j < k; ++j) ++rendering_[static_cast<std::size_t>(ids[j])];
  }
  void release_render(const int32_t* ids, std::size_t k) {
    const std::lock_guard<std::mutex> lock(state_mu_);
    for (std::size_t j = 0; j < k; ++j) --rendering_[static_cast<std::size_t>(ids[j])];
  }
  bool render(const int32_t* ids, std::size_t k, uint8_t* out, std::size_t frame_bytes) {
    const std::lock_guard<std::mutex> lock(render_mutex_);
    for (std::size_t j = 0; j < k; ++j)
      if (!runner_->render(ids[j], out + j * frame_bytes)) return false;
    return true;
  }
  // A render claim for its lifetime (GIL held at both ends).
  class RenderClaim {
   public:
    RenderClaim(Pool& pool, const int32_t* ids, std::size_t k) : pool_(pool), ids_(ids), k_(k) {
      pool_.claim_render(ids_, k_);
    }
    ~RenderClaim() { pool_.release_render(ids_, k_); }
    RenderClaim(const RenderClaim&) = delete;
    RenderClaim& operator=(const RenderClaim&) = delete;

   private:
    Pool& pool_;
    const int32_t* ids_;
    std::size_t k_;
  };
  std::vector<double> render_state(int32_t id) {
    const RenderClaim claim(*this, &id, 1);
    return runner_->render_state(id);
  }
  // `dest`: the address of the renderer's mjData (its `_address`), of the same model.
  bool export_data(int32_t id, uintptr_t dest) {
    const RenderClaim claim(*this, &id, 1);
    return runner_->export_data(id, reinterpret_cast<void*>(dest));
  }
  // `dest`: the address of the renderer's mjModel, compiled from the same model (same sizes).
  bool export_model(int32_t id, uintptr_t dest) {
    const RenderClaim claim(*this, &id, 1);
    return runner_->export_model(id, reinterpret_cast<void*>(dest));
  }

  void arm() { ready_.arm(); }
  uint64_t drain() { return ready_.drain(); }
  int fd() const { return ready_.fd(); }
  bool wait(double timeout_s) { return ready_.wait(timeout_s, closed_); }

  // Call without the GIL. Joins workers; blocks nobody took go back to the store. The eventfd
  // stays open until the pool is destroyed (see ~ReadyQueue).
  void close() {
    if (closed_.exchange(true, std::memory_order_acq_rel)) return;
    ready_.wake_waiters();
    if (workers_) workers_->stop();
    for (Block* b : ready_.take_all()) store_->release(b);
  }

 private:
  enum : uint8_t { kReady = 0, kNeverReset = 1, kEnded = 2 };

  int64_t unwritten() const {
    return static_cast<int64_t>(sent_rows_ - written_rows_.load(std::memory_order_seq_cst));
  }

  static EnvSpec with_time_limit(EnvSpec spec, int max_episode_steps) {
    if (max_episode_steps >= 0) spec.max_episode_steps = max_episode_steps;
    return spec;
  }

  void check_ids(const int32_t* ids, std::size_t k, const char* what, bool need_idle, bool need_reset_ok) {
    if (closed()) throw std::runtime_error(std::string(what) + "() on a closed pool");
    const int n = opt_.num_envs;
    ++epoch_;
    for (std::size_t j = 0; j < k; ++j) {
      const int32_t id = ids[j];
      if (id < 0 || id >= n)
        throw std::invalid_argument(std::string(what) + ": env_ids[" + std::to_string(j) + "] is " +
                                    std::to_string(id) + ", expected 0 <= env_id < " + std::to_string(n));
      const auto i = static_cast<std::size_t>(id);
      if (stamp_[i] == epoch_)
        throw std::invalid_argument(std::string(what) + ": env_ids names env " + std::to_string(id) +
                                    " twice; give each env at most one action");
      stamp_[i] = epoch_;
      if (need_idle && busy_[i])
        throw std::invalid_argument(std::string(what) + ": env " + std::to_string(id) +
                                    " still has an action in flight; receive its result before " +
                                    (std::string(what) == "render" ? "rendering it" : "sending it another"));
      if (rendering_[i] && std::string_view(what) != "render")
        throw std::invalid_argument(std::string(what) + ": env " + std::to_string(id) +
                                    " is being rendered (a render() or arender() still draws it, a "
                                    "cancelled arender's too); " +
                                    what + " it once that returns");
      if (need_reset_ok && needs_reset_[i])
        throw std::invalid_argument(std::string(what) + ": env " + std::to_string(id) +
                                    (needs_reset_[i] == kEnded
                                         ? " ended its episode and autoreset is 'disabled'; call "
                                           "async_reset(env_ids=[...]) for it first"
                                         : " has not been reset yet; call async_reset() first"));
    }
  }

  void check_actions(const std::byte* actions, std::size_t k) const {
    const Space& a = spec_.action_space;
    const std::size_t per = static_cast<std::size_t>(a.size());
    if (a.kind == Space::Kind::kDiscrete) {
      if (a.dtype != DType::kInt64) return;
      const auto* v = reinterpret_cast<const int64_t*>(actions);
      for (std::size_t j = 0; j < k; ++j)
        if (v[j] < 0 || v[j] >= a.n)
          throw std::invalid_argument("actions[" + std::to_string(j) + "] is " + std::to_string(v[j]) +
                                      ", expected 0 <= action < " + std::to_string(a.n) + " (Discrete(" +
                                      std::to_string(a.n) + "))");
      return;
    }
    if (!spec_.rejects_nan_actions) return;
    auto check = [&](auto* v) {
      for (std::size_t j = 0; j < k * per; ++j)
        if (std::isnan(v[j]))
          throw std::invalid_argument("actions[" + std::to_string(j / per) +
                                      "] contains nan; this env's actions must not be NaN "
                                      "(out-of-range values and inf are clipped as the reference "
                                      "env clips them)");
    };
    if (a.dtype == DType::kFloat32) check(reinterpret_cast<const float*>(actions));
    if (a.dtype == DType::kFloat64) check(reinterpret_cast<const double*>(actions));
  }

  // Mark envs busy and push their tickets, `chunk` envs per ticket.
  void dispatch(const int32_t* ids, std::size_t k) {
    if (k == 0) return;
    for (std::size_t j = 0; j < k; ++j) busy_[static_cast<std::size_t>(ids[j])] = 1;
    sent_rows_ += k;
    const std::size_t threads = workers_->size() + (caller_helps_ ? 1 : 0);
    const std::size_t limit = static_cast<std::size_t>(std::clamp(spec_.chunk, 1, kTicketEnvs));
    const std::size_t chunk = std::clamp<std::size_t>((k + threads - 1) / threads, 1, limit);
    int tickets = 0;
    for (std::size_t j = 0; j < k; j += chunk) {
      Ticket t;
      t.count = static_cast<uint32_t>(std::min(chunk, k - j));
      for (uint32_t c = 0; c < t.count; ++c) t.env_ids[c] = static_cast<uint32_t>(ids[j + c]);
      if (!queue_.push_wait(t)) throw std::logic_error("action queue stuck full for 10 s: a worker died?");
      ++tickets;
    }
    queue_.wake(std::min<int>(tickets, static_cast<int>(workers_->size())));
  }

  PoolOptions opt_;
  EnvSpec spec_;
  std::shared_ptr<BlockStore> store_;
  BlockRing ring_;
  ReadyQueue ready_;
  ActionQueue queue_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<WorkerPool> workers_;
  std::atomic<uint64_t> written_rows_{0};
  std::atomic<bool> closed_{false};
  // The callers' state: the GIL holder's, and an XLA thread's in a jitted send or receive.
  mutable std::mutex state_mu_;
  std::vector<uint8_t> busy_, needs_reset_;
  std::vector<uint32_t> rendering_;  // renders claimed and not yet released, per env
  std::mutex render_mutex_;          // held while a render draws (GIL released)
  std::vector<uint64_t> stamp_;      // 64-bit: a wrapped epoch would match a stale stamp
  uint64_t epoch_ = 0;
  uint64_t sent_rows_ = 0;
  uint64_t sent_rows_snapshot_ = 0;  // what wait_written waits for
  uint64_t taken_rows_ = 0;
  bool caller_helps_ = false;
};

}  // namespace aiopool
