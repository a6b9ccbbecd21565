// ② Worker threads: pop a ticket, run it, repeat. A worker that finds the queue empty spins
// for `spin_ns` (waking a sleeping thread costs ~20 µs on a VM, far more than a cheap env step),
// then sleeps on the queue's futex. The spin adapts, as recv's does: after kGiveUp waits in a
// row whose spin caught nothing (the consumer is slow, or shares a core with us and our spin
// only delays it), the worker sleeps at once and spins only every kProbeEvery-th wait; a
// spin that catches a ticket turns spinning back on. Workers never touch a Python object.
//
// Shutdown: stop() sets the stop flag and wakes every sleeper; a worker finishes the ticket in
// its hands and exits the next time the queue looks empty to it. Tickets still queued are
// dropped: the pool is closed, nobody will receive their rows.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "action_queue.h"
#include "runner.h"

namespace aiopool {

class WorkerPool {
 public:
  WorkerPool(ActionQueue& queue, Runner& runner, int num_threads, int64_t spin_ns)
      : queue_(queue), runner_(runner), spin_ns_(spin_ns) {
    threads_.reserve(static_cast<std::size_t>(num_threads));
    try {
      for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { loop(); });
    } catch (const std::system_error& e) {  // out of threads (ulimit -u, a container's pids.max)
      stop();  // join those started: a joinable std::thread destroyed would end the process
      throw std::runtime_error("could not start worker thread " + std::to_string(threads_.size() + 1) +
                               " of " + std::to_string(num_threads) + ": " + e.what());
    } catch (...) {
      stop();
      throw;
    }
  }
  ~WorkerPool() { stop(); }

  void stop() {
    stop_.store(true, std::memory_order_seq_cst);
    queue_.wake_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  std::size_t size() const { return threads_.size(); }

 private:
  static constexpr int kGiveUp = 8;
  static constexpr int kProbeEvery = 64;

  void loop() {
    Ticket t;
    int misses = 0;  // consecutive waits that slept (the spin caught nothing, or was skipped)
    for (;;) {
      const bool spin = misses < kGiveUp || misses % kProbeEvery == 0;
      ActionQueue::Wait how;
      if (!queue_.pop_wait(t, spin ? spin_ns_ : 0, stop_, &how)) return;
      if (stop_.load(std::memory_order_relaxed)) return;
      if (how == ActionQueue::Wait::kSpun) misses = 0;
      if (how == ActionQueue::Wait::kSlept) ++misses;
      runner_.run(t);
    }
  }

  ActionQueue& queue_;
  Runner& runner_;
  int64_t spin_ns_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace aiopool
