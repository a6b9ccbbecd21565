// xla(): how the XLA FFI handlers (xla_ffi.h) find a pool, and keep it while they use it.
//
// Threads: attach (GIL held) and detach (close, destruction) run on Python's threads; Use runs
// on the thread of a handler, which never holds the GIL. One registry per module (each module
// has its own pools); `mu_` guards the map and the use counts, `cv_` wakes a detach waiting
// for the last user of its pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "pool.h"

namespace aiopool {

class XlaRegistry {
 public:
  static XlaRegistry& get() {
    static XlaRegistry r;  // one per module: each module's pools are its own
    return r;
  }
  // `state`: bytes a caller keeps per pool beside the pool's own (the EnvPool drop-in's Atari
  // per-life bookkeeping), read and written by the state_get / state_set handlers; the pool's
  // owner keeps them alive until detach().
  void attach(uint64_t id, Pool* pool, std::byte* state, std::size_t state_bytes) {
    const std::lock_guard<std::mutex> lock(mu_);
    pools_[id] = Entry{pool, state, state_bytes, 0};
  }
  // Remove every id of `pool`, once no handler uses it (handlers leave a closed pool at once).
  void detach(Pool* pool) {
    std::unique_lock<std::mutex> lock(mu_);
    auto in_use = [&] {
      for (const auto& [id, e] : pools_)
        if (e.pool == pool && e.users > 0) return true;
      return false;
    };
    cv_.wait(lock, [&] { return !in_use(); });
    std::erase_if(pools_, [&](const auto& kv) { return kv.second.pool == pool; });
  }

  // A handler's use of a pool: null if the id is unknown (the pool was closed or destroyed).
  class Use {
   public:
    explicit Use(uint64_t id) : id_(id) {
      XlaRegistry& r = XlaRegistry::get();
      const std::lock_guard<std::mutex> lock(r.mu_);
      auto it = r.pools_.find(id);
      if (it == r.pools_.end()) return;
      ++it->second.users;
      pool_ = it->second.pool;
      state_ = it->second.state;
      state_bytes_ = it->second.state_bytes;
    }
    ~Use() {
      if (pool_ == nullptr) return;
      XlaRegistry& r = XlaRegistry::get();
      const std::lock_guard<std::mutex> lock(r.mu_);
      --r.pools_.at(id_).users;
      r.cv_.notify_all();
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    Pool* pool() const { return pool_; }
    std::byte* state() const { return state_; }
    std::size_t state_bytes() const { return state_bytes_; }

   private:
    uint64_t id_;
    Pool* pool_ = nullptr;
    std::byte* state_ = nullptr;
    std::size_t state_bytes_ = 0;
  };

 private:
  struct Entry {
    Pool* pool;
    std::byte* state;
    std::size_t state_bytes;
    int users;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Entry> pools_;
};

}  // namespace aiopool
