// ④ Batch blocks: rows claimed in finish order; the last writer publishes.
//
// A block holds batch_size rows of every field (obs, reward, ..., family extras) as one array
// per field, laid out by `Layout`. A worker claims rows with one fetch_add on `next_row_` once
// the envs of its ticket have stepped (one row per env; a ticket names 1 env for costly envs,
// up to 15 for cheap ones), writes them in place, and counts them in `rows_done` once per
// block; the writer that brings the count to batch_size owns the finished block and hands it
// to the ReadyQueue.
//
// Blocks live in a BlockStore shared (shared_ptr) by the pool and by every numpy view handed
// out: a block returns to the free list only when the last view of it dies, so a batch kept by
// the user is never overwritten, even after the pool is closed.
//
// Ring of slots: row index i belongs to block sequence s = i / batch_size, which lives in slot
// s % R. A slot is tagged with the sequence it currently serves (`seq`, release on refill,
// acquire in block_for). The last writer of block s refills its slot with a fresh block for
// s + R. A writer whose slot still serves an older block waits (rare: it needs an earlier
// block's writer to be descheduled mid-row). Every earlier row is already claimed by a running
// writer, and a writer commits each block before it asks for the next, so the wait ends.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "action_queue.h"
#include "env.h"

namespace aiopool {

struct FieldLayout {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // per row
  std::size_t row_bytes;
  std::size_t offset;  // of row 0 in the block
};

// Index of each field the runner fills, by name; env extras follow in spec order.
struct Layout {
  std::vector<FieldLayout> fields;
  std::size_t block_bytes = 0;
  int batch_size = 0;
  int obs, reward, terminated, truncated, env_id, elapsed_step, episode_return, episode_length;
  int info_first;             // first env extra; spec.info.size() of them
  int final_obs = -1;         // same_step only: terminal observation
  int final_info_first = -1;  // same_step only: elapsed_step then the env extras at the end
  int num_info = 0;

  Layout(const EnvSpec& spec, int batch, bool with_final) : batch_size(batch) {
    const auto& os = spec.observation_space;
    obs = add("obs", os.dtype, os.shape);
    reward = add("reward", DType::kFloat64, {});
    terminated = add("terminated", DType::kBool, {});
    truncated = add("truncated", DType::kBool, {});
    env_id = add("env_id", DType::kInt32, {});
    elapsed_step = add("elapsed_step", DType::kInt32, {});
    episode_return = add("episode_return", DType::kFloat64, {});
    episode_length = add("episode_length", DType::kInt32, {});
    num_info = static_cast<int>(spec.info.size());
    info_first = static_cast<int>(fields.size());
    for (const Field& f : spec.info) add(f.name, f.dtype, f.shape);
    if (with_final) {
      final_obs = add("final_obs", os.dtype, os.shape);
      final_info_first = add("final_info.elapsed_step", DType::kInt32, {});
      for (const Field& f : spec.info) add("final_info." + f.name, f.dtype, f.shape);
    }
  }

 private:
  int add(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    std::size_t row = dtype_size(dtype);
    for (int64_t d : shape) row *= static_cast<std::size_t>(d);
    block_bytes = (block_bytes + 63) & ~std::size_t(63);
    fields.push_back({name, dtype, std::move(shape), row, block_bytes});
    block_bytes += row * static_cast<std::size_t>(batch_size);
    return static_cast<int>(fields.size()) - 1;
  }
};

struct Block {
  std::byte* data = nullptr;
  std::atomic<int> rows_done{0};
  int rows = 0;  // rows handed out: batch_size, or fewer for a block cut short (BlockRing::cut)

  template <class T = std::byte>
  T* at(const Layout& layout, int field, int row) const {
    const FieldLayout& f = layout.fields[static_cast<std::size_t>(field)];
    return reinterpret_cast<T*>(data + f.offset + f.row_bytes * static_cast<std::size_t>(row));
  }
};

// Bumped in every fork() child. A store made before the fork may have had `mu_` locked by a
// worker thread that does not exist in the child, so there it must never lock it again.
inline std::atomic<uint64_t>& fork_generation() {
  static std::atomic<uint64_t> generation{0};
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { fork_generation().fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  return generation;
}

// Owns every block; the free list is touched by workers (acquire) and by whichever thread
// drops the last numpy view (release), under `mu_`.
class BlockStore {
 public:
  explicit BlockStore(Layout layout)
      : layout_(std::move(layout)), generation_(fork_generation().load(std::memory_order_relaxed)) {}
  ~BlockStore() {
    for (auto& b : all_) std::free(b->data);
  }
  const Layout& layout() const { return layout_; }

  Block* acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
      auto b = std::make_unique<Block>();
      const std::size_t bytes = (std::max<std::size_t>(layout_.block_bytes, 64) + 63) & ~63ul;
      b->data = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
      if (b->data == nullptr) throw std::bad_alloc();
      std::memset(b->data, 0, bytes);
      b->rows = layout_.batch_size;
      all_.push_back(std::move(b));
      return all_.back().get();
    }
    Block* b = free_.back();
    free_.pop_back();
    return b;
  }

  void release(Block* b) {
    // In a fork child a batch inherited from the parent is leaked, not recycled: its store has
    // no workers here and `mu_` may be held by a thread that was not copied.
    if (fork_generation().load(std::memory_order_relaxed) != generation_) return;
    b->rows_done.store(0, std::memory_order_relaxed);
    b->rows = layout_.batch_size;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
  }

  std::size_t allocated() {
    std::lock_guard<std::mutex> lock(mu_);
    return all_.size();
  }

 private:
  Layout layout_;
  const uint64_t generation_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Block>> all_;
  std::vector<Block*> free_;
};

class BlockRing {
 public:
  BlockRing(std::shared_ptr<BlockStore> store, int num_slots)
      : store_(std::move(store)), slots_(static_cast<std::size_t>(num_slots)) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].block = store_->acquire();
      slots_[i].seq.store(i, std::memory_order_relaxed);
    }
  }
  ~BlockRing() {
    for (auto& s : slots_) store_->release(s.block);
  }

  // Claim n consecutive row indices (one ticket's envs, once they have all stepped).
  uint64_t claim(uint32_t n) { return next_row_.fetch_add(n, std::memory_order_relaxed); }

  // The block serving sequence `seq`, once its slot has been refilled for it.
  Block* block_for(uint64_t seq) {
    Slot& slot = slots_[seq % slots_.size()];
    for (int spins = 0; slot.seq.load(std::memory_order_acquire) != seq; ++spins) {
      if (spins < 64)
        cpu_relax();
      else
        std::this_thread::yield();
    }
    return slot.block;
  }

  // Count `rows` written rows of block `seq`. Returns the block if they completed it (the
  // caller publishes it); its slot is then refilled for sequence seq + R.
  Block* commit(Block* block, uint64_t seq, int rows) {
    const int b = store_->layout().batch_size;
    if (block->rows_done.fetch_add(rows, std::memory_order_acq_rel) + rows != b) return nullptr;
    refill(seq);
    return block;
  }

  // Row indices claimed so far (cuts included).
  uint64_t claimed() const { return next_row_.load(std::memory_order_seq_cst); }

  // Hand out the partly filled current block with the rows it has (Block::rows), and move the
  // next claim to the following block. Only with every claimed row committed and nobody able
  // to claim (the GIL holder, with no env step in flight); nullptr if the block is empty.
  Block* cut() {
    const auto b = static_cast<uint64_t>(store_->layout().batch_size);
    const uint64_t next = next_row_.load(std::memory_order_acquire);
    if (next % b == 0) return nullptr;
    const uint64_t seq = next / b;
    Block* block = block_for(seq);
    block->rows = static_cast<int>(next % b);
    refill(seq);
    next_row_.store((seq + 1) * b, std::memory_order_release);
    return block;
  }

 private:
  void refill(uint64_t seq) {
    Slot& slot = slots_[seq % slots_.size()];
    slot.block = store_->acquire();
    slot.seq.store(seq + slots_.size(), std::memory_order_release);
  }

  struct alignas(64) Slot {
    std::atomic<uint64_t> seq{0};
    Block* block = nullptr;
  };
  std::shared_ptr<BlockStore> store_;
  std::vector<Slot> slots_;
  alignas(64) std::atomic<uint64_t> next_row_{0};
};

}  // namespace aiopool
