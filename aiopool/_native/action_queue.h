// ① Tickets in. `send()` runs on the Python thread (one producer at a time: it holds the GIL)
// and pushes tickets; worker threads pop them. A ticket names up to kTicketEnvs envs; the
// action (or reset) for each env was staged in the pool's per-env arrays before the push, and
// the push/pop pair orders those writes before the worker reads them.
//
// The queue is Dmitry Vyukov's bounded MPMC ring (one sequence number per cell). Capacity is
// at least 2 * num_envs: every ticket names >= 1 env and an env has at most one ticket in
// flight. A cell can still look full for a moment: a worker that won the head CAS but was
// preempted before releasing the cell holds it while the producer laps the ring (other envs'
// tickets come and go meanwhile). The producer then waits for that worker (push_wait), never
// for a consumer of results.
//
// Sleeping: a worker that finds the ring empty spins for `spin_ns` (at most `max_spinners_`
// workers spin at once; the others sleep at once, so a core stays free for the Python thread
// when there are as many workers as cores), then announces itself in `sleepers_`, re-checks
// the ring and futex-waits on `epoch_`. The producer pushes, then reads `spinning_` and
// `sleepers_`, and bumps `epoch_` + wakes only the sleepers that idle spinners cannot cover.
// Both sides put a seq_cst fence between their write and their read (Dekker): either the
// sleeper's re-check sees the ticket or the producer sees the sleeper. A spinner the producer
// counted either pops again (this ticket, or another and then comes back) or stops spinning
// after the producer's read, and then re-checks the ring before it sleeps: no lost wake-up.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <thread>

namespace aiopool {

inline constexpr int kTicketEnvs = 15;

struct Ticket {
  uint32_t count = 0;
  uint32_t env_ids[kTicketEnvs];
};
static_assert(sizeof(Ticket) == 64, "a ticket is one cache line");

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

inline void futex_wake(std::atomic<uint32_t>* addr, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

class ActionQueue {
 public:
  explicit ActionQueue(std::size_t num_envs) {
    std::size_t cap = 2;
    while (cap < 2 * num_envs) cap <<= 1;
    mask_ = cap - 1;
    cells_ = std::make_unique<Cell[]>(cap);
    for (std::size_t i = 0; i < cap; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  // Producer side (one thread at a time): push, waiting out a cell still held by a worker
  // between its head CAS and its release. Returns false only after `timeout_ns` (a bug).
  bool push_wait(const Ticket& t, int64_t timeout_ns = 10'000'000'000) {
    if (push(t)) return true;
    const int64_t until = now_ns() + timeout_ns;
    for (int spins = 0; !push(t); ++spins) {
      if (spins < 64) {
        cpu_relax();
      } else {
        std::this_thread::yield();
        if (now_ns() > until) return false;
      }
    }
    return true;
  }

  // Returns false if the cell at the tail is not free yet.
  bool push(const Ticket& t) {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const std::size_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.ticket = t;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  void set_max_spinners(int n) { max_spinners_ = n < 1 ? 1 : n; }

  // After a burst of `n` tickets: wake the sleepers that idle spinners will not cover.
  void wake(int n) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
    const int need = n - static_cast<int>(spinning_.load(std::memory_order_seq_cst));
    if (need <= 0) return;
    epoch_.fetch_add(1, std::memory_order_relaxed);
    futex_wake(&epoch_, need);
  }

  bool try_pop(Ticket& out) {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const std::size_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos + 1);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          out = c.ticket;
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  // Worker side: pop a ticket, spinning up to spin_ns and then sleeping. Returns false once
  // `stop` is set (checked whenever the ring is empty: queued tickets are still drained first
  // only if they are already visible, which close() does not rely on). `how` says how the
  // ticket came: at once, caught by the spin, or after a sleep.
  enum class Wait : uint8_t { kAtOnce, kSpun, kSlept };
  bool pop_wait(Ticket& out, int64_t spin_ns, const std::atomic<bool>& stop, Wait* how = nullptr) {
    Wait ignored;
    Wait& w = how != nullptr ? *how : ignored;
    w = Wait::kAtOnce;
    if (try_pop(out)) return true;
    if (spin_ns > 0 && start_spinning()) {
      const int64_t until = now_ns() + spin_ns;
      bool got = false;
      do {
        for (int i = 0; i < 16; ++i) cpu_relax();
        got = try_pop(out);
      } while (!got && !stop.load(std::memory_order_relaxed) && now_ns() < until);
      spinning_.fetch_sub(1, std::memory_order_seq_cst);
      w = Wait::kSpun;
      if (got) return true;
      if (stop.load(std::memory_order_relaxed)) return false;
    }
    w = Wait::kSlept;
    for (;;) {
      sleepers_.fetch_add(1, std::memory_order_relaxed);
      const uint32_t e = epoch_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      const bool got = try_pop(out);
      const bool stopping = stop.load(std::memory_order_acquire);
      if (!got && !stopping) futex_wait(&epoch_, e);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      if (got) return true;
      if (stopping) return false;
      if (try_pop(out)) return true;
    }
  }

  bool start_spinning() {
    uint32_t s = spinning_.load(std::memory_order_relaxed);
    while (s < static_cast<uint32_t>(max_spinners_))
      if (spinning_.compare_exchange_weak(s, s + 1, std::memory_order_seq_cst)) return true;
    return false;
  }

  // close(): set `stop` first, then call this so every sleeper wakes and sees it.
  void wake_all() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    epoch_.fetch_add(1, std::memory_order_relaxed);
    futex_wake(&epoch_, INT_MAX);
  }

 private:
  struct alignas(64) Cell {
    std::atomic<std::size_t> seq;
    Ticket ticket;
  };
  std::unique_ptr<Cell[]> cells_;
  std::size_t mask_ = 0;
  alignas(64) std::atomic<std::size_t> tail_{0};
  alignas(64) std::atomic<std::size_t> head_{0};
  alignas(64) std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<uint32_t> spinning_{0};  // workers in their spin, not holding a ticket
  int max_spinners_ = 1 << 20;
};

}  // namespace aiopool
