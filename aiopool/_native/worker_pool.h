// ② Worker threads: pop a ticket, run it, repeat. A worker that finds the queue empty spins
// for `spin_ns` (waking a sleeping thread costs ~20 µs on a VM, far more than a cheap env step),
// then sleeps on the queue's futex. Workers never touch a Python object.
//
// Shutdown: stop() sets the stop flag and wakes every sleeper; a worker finishes the ticket in
// its hands and exits the next time the queue looks empty to it. Tickets still queued are
// dropped: the pool is closed, nobody will receive their rows.
#pragma once

#include <atomic>
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
    for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { loop(); });
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
  void loop() {
    Ticket t;
    while (queue_.pop_wait(t, spin_ns_, stop_)) {
      if (stop_.load(std::memory_order_relaxed)) return;
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
