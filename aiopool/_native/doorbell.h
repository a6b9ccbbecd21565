// ⑤ The ready queue and its doorbell. Workers push finished blocks; only threads holding the
// GIL (the asyncio loop thread, or a thread in recv_blocking) take them.
//
// The queue holds the truth; the eventfd is only a doorbell. It is rung (one 8-byte write,
// counter mode, EFD_NONBLOCK | EFD_CLOEXEC) only when a consumer has set `armed_`:
//   consumer: armed_.store(true); re-check the queue;      -> await the fd if still empty
//   producer: push under mu_ (count_ seq_cst); if armed_.exchange(false): write(fd)
// Both sides write one location then read the other, all seq_cst (Dekker): either the
// consumer's re-check sees the block or the producer sees the armed flag. The loop's callback
// drains the counter once, then takes blocks until the queue is empty; it must tolerate
// finding nothing (a fast-path take may have got there first).
//
// recv_blocking waits on `cv_` under `mu_`, the mutex the producer pushes under, so it needs
// no flag of its own.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>

#include "batch_block.h"

namespace aiopool {

class ReadyQueue {
 public:
  ReadyQueue() {
    fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("eventfd failed: errno " + std::to_string(errno));
  }
  // The fd closes only here, never in Pool::close(): a loop thread may still be in drain()
  // while another thread closes the pool, and a closed-then-reused fd number would make that
  // drain read someone else's eventfd. (The Python side removes its reader before close.)
  ~ReadyQueue() {
    if (fd_ >= 0) ::close(fd_);
  }
  ReadyQueue(const ReadyQueue&) = delete;
  ReadyQueue& operator=(const ReadyQueue&) = delete;

  // Worker side.
  void push(Block* b) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks_.push_back(b);
      count_.fetch_add(1, std::memory_order_seq_cst);
      if (blocking_waiters_ > 0) cv_.notify_all();
    }
    if (armed_.load(std::memory_order_seq_cst) && armed_.exchange(false, std::memory_order_seq_cst)) ring();
  }

  // Consumer side. ~2 ns when empty.
  Block* try_take() {
    if (count_.load(std::memory_order_seq_cst) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (blocks_.empty()) return nullptr;
    Block* b = blocks_.front();
    blocks_.pop_front();
    count_.fetch_sub(1, std::memory_order_relaxed);
    return b;
  }

  // Busy-poll for up to spin_ns (the bounded spin of the wait ladder).
  Block* spin_take(int64_t spin_ns) {
    if (Block* b = try_take()) return b;
    const int64_t until = now_ns() + spin_ns;
    while (now_ns() < until) {
      for (int i = 0; i < 8; ++i) cpu_relax();
      if (count_.load(std::memory_order_seq_cst) != 0) {
        if (Block* b = try_take()) return b;
      }
    }
    return nullptr;
  }

  // Ask for the doorbell; the caller must re-check with try_take() afterwards.
  void arm() { armed_.store(true, std::memory_order_seq_cst); }

  // Reset the eventfd counter; returns how many rings it had counted.
  uint64_t drain() {
    uint64_t n = 0;
    if (fd_ >= 0 && ::read(fd_, &n, sizeof n) != sizeof n) n = 0;
    return n;
  }

  // Block (call without the GIL) until a block is ready, the deadline passes, or close.
  // Returns true if a block is ready; the caller takes it with the GIL held.
  bool wait(double timeout_s, const std::atomic<bool>& closed) {
    std::unique_lock<std::mutex> lock(mu_);
    ++blocking_waiters_;
    auto ready = [&] { return !blocks_.empty() || closed.load(std::memory_order_acquire); };
    if (timeout_s < 0) {
      cv_.wait(lock, ready);
    } else {
      // Capped: a huge duration overflows in the conversion to the clock's nanoseconds and
      // would return at once. The caller loops on the time it has left.
      cv_.wait_for(lock, std::chrono::duration<double>(std::min(timeout_s, 1e6)), ready);
    }
    --blocking_waiters_;
    return !blocks_.empty();
  }

  // Block (without the GIL) until `written` reaches `target`, the deadline passes, or close;
  // true if it did. The writer adds to `written` then checks flush_waiting(); we count
  // ourselves in, then check `written` under mu_ (seq_cst both sides): no lost wake-up.
  bool wait_written(const std::atomic<uint64_t>& written, uint64_t target, double timeout_s,
                    const std::atomic<bool>& closed) {
    flush_waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock<std::mutex> lock(mu_);
    auto done = [&] {
      return written.load(std::memory_order_seq_cst) >= target || closed.load(std::memory_order_acquire);
    };
    if (timeout_s < 0)
      cv_.wait(lock, done);
    else
      cv_.wait_for(lock, std::chrono::duration<double>(std::min(timeout_s, 1e6)), done);
    flush_waiters_.fetch_sub(1, std::memory_order_seq_cst);
    return written.load(std::memory_order_seq_cst) >= target;
  }
  bool flush_waiting() const { return flush_waiters_.load(std::memory_order_seq_cst) > 0; }

  void wake_waiters() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

  // Blocks nobody took (at close); the caller returns them to the store.
  std::deque<Block*> take_all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<Block*> out;
    out.swap(blocks_);
    count_.store(0, std::memory_order_relaxed);
    return out;
  }

  int fd() const { return fd_; }
  std::size_t size() const { return count_.load(std::memory_order_seq_cst); }

 private:
  void ring() {
    const uint64_t one = 1;
    if (fd_ >= 0) {
      [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Block*> blocks_;
  int blocking_waiters_ = 0;
  alignas(64) std::atomic<std::size_t> count_{0};
  alignas(64) std::atomic<bool> armed_{false};
  std::atomic<int> flush_waiters_{0};
  int fd_ = -1;
};

}  // namespace aiopool
