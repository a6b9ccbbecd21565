// Standalone tests of the native engine (no Python, no nanobind): the action queue ①, the
// block ring ④ with the ready queue ⑤, and the whole Pool driving the Counting env, with real
// threads. Built three ways by build_and_run.sh (plain, ASan+UBSan, TSan).
//
// Usage: test_core [substring]   runs the test cases whose name contains `substring`.
// AIOPOOL_NATIVE_SCALE=k divides every iteration count by k (sanitizer builds pick their own).
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../../aiopool/_native/envs/testing/counting.h"
#include "../../aiopool/_native/envs/toy_text/cliff_walking.h"
#include "../../aiopool/_native/envs/toy_text/frozen_lake.h"
#include "../../aiopool/_native/envs/toy_text/taxi.h"
#include "../../aiopool/_native/pool.h"

using namespace aiopool;

namespace {

// ---------------------------------------------------------------------------------------------
// Harness: CHECK macros, a watchdog that turns a deadlock into a failure, iteration scaling.

const char* g_test = "";
std::atomic<int64_t> g_deadline_ns{INT64_MAX};

[[noreturn]] void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: FAILED in %s: %s\n", file, line, g_test, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

#define CHECK(cond)                                            \
  do {                                                         \
    if (!(cond)) fail(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)

#define CHECK_EQ(a, b)                                                                         \
  do {                                                                                         \
    const auto va_ = (a);                                                                      \
    const auto vb_ = (b);                                                                      \
    if (!(va_ == vb_))                                                                         \
      fail(__FILE__, __LINE__,                                                                 \
           "CHECK_EQ(" #a ", " #b "): " + std::to_string(va_) + " != " + std::to_string(vb_)); \
  } while (0)

// Passes if `stmt` throws exactly `Exc`; fails on any other outcome.
#define CHECK_THROWS(Exc, stmt)                                                                \
  do {                                                                                         \
    bool thrown_ = false;                                                                      \
    try {                                                                                      \
      stmt;                                                                                    \
    } catch (const Exc&) {                                                                     \
      thrown_ = true;                                                                          \
    } catch (const std::exception& e_) {                                                       \
      fail(__FILE__, __LINE__, #stmt " threw the wrong exception: " + std::string(e_.what())); \
    }                                                                                          \
    if (!thrown_) fail(__FILE__, __LINE__, #stmt " did not throw " #Exc);                      \
  } while (0)

#if defined(__SANITIZE_THREAD__)
constexpr int kBuildScale = 4;
#elif defined(__SANITIZE_ADDRESS__)
constexpr int kBuildScale = 2;
#else
constexpr int kBuildScale = 1;
#endif

int scale() {
  static const int s = [] {
    const char* e = std::getenv("AIOPOOL_NATIVE_SCALE");
    const int v = e ? std::atoi(e) : 0;
    return v > 0 ? v : kBuildScale;
  }();
  return s;
}

// n divided by the scale, at least `floor`.
int scaled(int n, int floor = 1) { return std::max(floor, n / scale()); }

// Seconds a single blocking wait may take before we call it a lost wake-up.
constexpr double kStuckS = 30.0;

void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (now_ns() > g_deadline_ns.load()) {
      std::fprintf(stderr, "FAILED in %s: no progress before the deadline (deadlock or lost wake-up)\n",
                   g_test);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
}

uint64_t checksum(const std::byte* p, std::size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint64_t>(p[i])) * 1099511628211ull;
  return h;
}

Config counting_config(int episode_length, int num_actions = 1000, int64_t step_ns = 0, int64_t jitter_ns = 0,
                       int chunk = 1) {
  return Config({{"episode_length", static_cast<double>(episode_length)},
                 {"num_actions", static_cast<double>(num_actions)},
                 {"step_ns", static_cast<double>(step_ns)},
                 {"jitter_ns", static_cast<double>(jitter_ns)},
                 {"chunk", static_cast<double>(chunk)}});
}

const EnvEntry& counting() { return Registry::get().find("Counting-v0"); }

// ---------------------------------------------------------------------------------------------
// ① ActionQueue: one producer (as Pool::send), several consumers (as workers). With spin_ns = 0
// every idle consumer goes through the futex sleep path, so a lost wake-up hangs the test (the
// watchdog fails it). Each ticket carries its number in all 15 slots; it must be popped exactly
// once and arrive untorn.

void action_queue_case(int consumers, std::size_t capacity, int tickets, int pause_every,
                       int64_t spin_ns = 0) {
  ActionQueue q(capacity);
  std::atomic<bool> stop{false};
  std::vector<std::atomic<uint8_t>> seen(static_cast<std::size_t>(tickets));
  std::atomic<int> done{0};
  std::atomic<int> torn{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&] {
      Ticket t;
      while (q.pop_wait(t, spin_ns, stop)) {
        const uint32_t id = t.env_ids[0];
        if (t.count != 1 + id % kTicketEnvs) torn.fetch_add(1);
        for (int k = 1; k < kTicketEnvs; ++k)
          if (t.env_ids[k] != id * 31 + static_cast<uint32_t>(k)) torn.fetch_add(1);
        if (id < seen.size()) seen[id].fetch_add(1);
        done.fetch_add(1, std::memory_order_release);
      }
    });
  }
  std::mt19937 rng(12345);
  const std::size_t cap = [&] {
    std::size_t c = 2;
    while (c < capacity) c <<= 1;
    return c;
  }();
  int pushed = 0;
  while (pushed < tickets) {
    // The pool's rule (one ticket per env, at most num_envs envs): never more than capacity
    // tickets in flight, so push_wait() must never give up (push() alone may briefly see a cell
    // still held by a preempted consumer). Like Pool::dispatch, a burst of pushes is followed
    // by one wake().
    const int burst =
        std::min(1 + static_cast<int>(rng() % 8), std::min(static_cast<int>(cap), tickets - pushed));
    while (static_cast<std::size_t>(pushed + burst - done.load(std::memory_order_acquire)) > cap)
      std::this_thread::yield();
    int in_burst = 0;
    for (; in_burst < burst; ++in_burst) {
      Ticket t;
      const auto id = static_cast<uint32_t>(pushed);
      t.count = 1 + id % kTicketEnvs;
      t.env_ids[0] = id;
      for (int k = 1; k < kTicketEnvs; ++k) t.env_ids[k] = id * 31 + static_cast<uint32_t>(k);
      if (!q.push_wait(t, 5'000'000'000))
        fail(__FILE__, __LINE__,
             "ActionQueue::push_wait() reported a full ring although at most " + std::to_string(cap) +
                 " tickets were queued (ticket " + std::to_string(pushed) + ", " +
                 std::to_string(pushed - done.load()) + " not yet consumed now)");
      ++pushed;
    }
    q.wake(in_burst);
    // Pause now and then so every consumer runs dry and goes to sleep on the futex.
    if (pause_every > 0 && pushed % pause_every == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(50 + rng() % 200));
  }
  while (done.load(std::memory_order_acquire) < tickets) std::this_thread::yield();
  stop.store(true, std::memory_order_seq_cst);
  q.wake_all();
  for (auto& t : threads) t.join();
  CHECK_EQ(torn.load(), 0);
  for (int i = 0; i < tickets; ++i) CHECK_EQ(static_cast<int>(seen[static_cast<std::size_t>(i)].load()), 1);
  Ticket t;
  CHECK(!q.try_pop(t));
}

void test_action_queue_stress() {
  action_queue_case(/*consumers=*/2, /*capacity=*/2, scaled(200'000, 2000), /*pause_every=*/0);
  action_queue_case(3, 8, scaled(200'000, 2000), 0);
  action_queue_case(4, 64, scaled(200'000, 2000), 0);
}

// More spinning consumers than cores: one is regularly preempted between claiming a cell (its
// head_ CAS) and releasing it (its seq store) while the others lap the ring. The pool never has
// more than num_envs <= capacity tickets queued, so push() must still succeed.
void test_action_queue_preempted_consumer() {
  action_queue_case(/*consumers=*/6, /*capacity=*/4, scaled(300'000, 20'000), 0, /*spin_ns=*/200'000);
  action_queue_case(3, 8, scaled(300'000, 20'000), 0, 200'000);
}

void test_action_queue_sleep_path() {
  action_queue_case(/*consumers=*/3, /*capacity=*/16, scaled(20'000, 500), /*pause_every=*/7);
  action_queue_case(1, 2, scaled(20'000, 500), 1);
}

// Consumers asleep on the futex leave promptly when stopped, even with nothing queued.
void test_action_queue_stop_wakes_sleepers() {
  for (int round = 0; round < scaled(200, 20); ++round) {
    ActionQueue q(4);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int c = 0; c < 3; ++c)
      threads.emplace_back([&] {
        Ticket t;
        while (q.pop_wait(t, 0, stop)) {
        }
      });
    if (round % 2) std::this_thread::sleep_for(std::chrono::microseconds(200));
    stop.store(true, std::memory_order_seq_cst);
    q.wake_all();
    for (auto& t : threads) t.join();
  }
}

// ---------------------------------------------------------------------------------------------
// ④ + ⑤ BlockRing and ReadyQueue: writer threads claim rows, write their global row index and
// commit; the consumer takes blocks through the wait ladder (take, arm, re-check, poll the
// eventfd, drain). Every row index lands in exactly one block exactly once.

EnvSpec two_int64_spec() {
  EnvSpec s;
  s.observation_space = {Space::Kind::kBox, DType::kInt64, {2}, {}, {}, 0};
  s.action_space = {Space::Kind::kDiscrete, DType::kInt64, {}, {}, {}, 2};
  return s;
}

void test_doorbell_rings_only_when_armed() {
  auto store = std::make_shared<BlockStore>(Layout(two_int64_spec(), 1, false));
  ReadyQueue ready;
  Block* a = store->acquire();
  Block* b = store->acquire();
  CHECK_EQ(ready.drain(), uint64_t{0});
  ready.push(a);  // not armed: no ring
  CHECK_EQ(ready.drain(), uint64_t{0});
  CHECK(ready.try_take() == a);
  CHECK(ready.try_take() == nullptr);
  ready.arm();
  ready.push(a);  // armed: one ring, and the flag is consumed
  ready.push(b);
  CHECK_EQ(ready.drain(), uint64_t{1});
  CHECK_EQ(ready.drain(), uint64_t{0});
  CHECK_EQ(ready.size(), std::size_t{2});
  CHECK(ready.try_take() == a);
  CHECK(ready.try_take() == b);
  ready.arm();
  ready.arm();  // arming twice still rings once
  ready.push(a);
  CHECK_EQ(ready.drain(), uint64_t{1});
  std::atomic<bool> closed{false};
  CHECK(ready.wait(0.0, closed));
  CHECK(ready.spin_take(1000) == a);
  CHECK(!ready.wait(0.001, closed));
  store->release(a);
  store->release(b);
}

void ring_case(int writers, int batch, int slots, int blocks) {
  auto store = std::make_shared<BlockStore>(Layout(two_int64_spec(), batch, false));
  const Layout& L = store->layout();
  auto ring = std::make_unique<BlockRing>(store, slots);
  ReadyQueue ready;
  const int64_t rows = static_cast<int64_t>(batch) * blocks;
  std::atomic<int64_t> to_claim{rows};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w * 7919 + 1));
      for (;;) {
        // Claim 1-3 rows at once, as a worker claims a ticket's rows; they may span blocks.
        int64_t k = 1 + static_cast<int64_t>(rng() % 3);
        const int64_t left = to_claim.fetch_sub(k, std::memory_order_relaxed);
        if (left <= 0) break;
        k = std::min(k, left);
        const uint64_t first = ring->claim(static_cast<uint32_t>(k));
        uint64_t seq = first / static_cast<uint64_t>(batch);
        int row = static_cast<int>(first % static_cast<uint64_t>(batch));
        int in_block = 0;
        Block* block = ring->block_for(seq);
        for (int64_t i = 0; i < k; ++i) {
          CHECK(row >= 0 && row < batch);
          // Sometimes get descheduled mid-row, so later rows overtake this one.
          if (rng() % 64 == 0) std::this_thread::yield();
          int64_t* obs = block->at<int64_t>(L, L.obs, row);
          obs[0] = static_cast<int64_t>(seq) * batch + row;
          obs[1] = w;
          *block->at<int32_t>(L, L.env_id, row) = row;
          ++in_block;
          if (++row == batch) {
            if (Block* done = ring->commit(block, seq, in_block)) ready.push(done);
            ++seq;
            row = 0;
            in_block = 0;
            if (i + 1 < k) block = ring->block_for(seq);
          }
        }
        if (in_block > 0) {
          if (Block* done = ring->commit(block, seq, in_block)) ready.push(done);
        }
      }
    });
  }

  std::vector<uint8_t> seen(static_cast<std::size_t>(rows), 0);
  int taken = 0;
  uint64_t arms = 0, rings = 0;
  std::deque<Block*> held;  // keep a few blocks so the store must hand out fresh ones
  std::mt19937 rng(99);
  while (taken < blocks) {
    Block* b = ready.try_take();
    if (b == nullptr) {
      ready.arm();
      ++arms;
      b = ready.try_take();
    }
    if (b == nullptr) {
      pollfd p{ready.fd(), POLLIN, 0};
      const int n = ::poll(&p, 1, static_cast<int>(kStuckS * 1000));
      if (n != 1) fail(__FILE__, __LINE__, "the doorbell did not ring for a pushed block (lost wake-up)");
      rings += ready.drain();
      continue;  // the queue holds the truth: the block may already have been taken
    }
    CHECK_EQ(b->rows_done.load(), batch);
    const int64_t first = b->at<int64_t>(L, L.obs, 0)[0];
    CHECK(first >= 0 && first < rows && first % batch == 0);
    for (int r = 0; r < batch; ++r) {
      const int64_t idx = b->at<int64_t>(L, L.obs, r)[0];
      CHECK_EQ(idx, first + r);
      CHECK_EQ(*b->at<int32_t>(L, L.env_id, r), r);
      CHECK_EQ(static_cast<int>(seen[static_cast<std::size_t>(idx)]), 0);
      seen[static_cast<std::size_t>(idx)] = 1;
    }
    ++taken;
    held.push_back(b);
    if (held.size() > rng() % 4) {
      store->release(held.front());
      held.pop_front();
    }
  }
  for (auto& t : threads) t.join();
  rings += ready.drain();
  CHECK(rings <= arms);
  CHECK(ready.try_take() == nullptr);
  for (int64_t i = 0; i < rows; ++i) CHECK_EQ(static_cast<int>(seen[static_cast<std::size_t>(i)]), 1);
  ring.reset();  // returns its slot blocks to the store while we still hold some
  for (Block* b : held) store->release(b);
}

void test_block_ring_stress() {
  ring_case(/*writers=*/4, /*batch=*/1, /*slots=*/2, scaled(100'000, 1000));
  ring_case(3, 3, 2, scaled(50'000, 500));
  ring_case(2, 7, 4, scaled(20'000, 200));
  ring_case(4, 64, 3, scaled(2'000, 50));
  ring_case(1, 5, 2, scaled(20'000, 200));
}

// ---------------------------------------------------------------------------------------------
// ③ + the Pool: a per-env model of the Counting env predicts every row exactly.

struct PoolCase {
  int num_envs, batch_size, num_threads;
  AutoReset mode = AutoReset::kNextStep;
  int episode_length = 10;
  int max_episode_steps = -1;  // -1: the registered limit (none for Counting-v0)
  int chunk = 1;
  int steps_per_env = 1000;
  int64_t worker_spin_ns = 50'000;
  int64_t take_spin_ns = 0;
  bool use_eventfd = true;  // else wait()
  std::size_t hold = 0;     // blocks the consumer keeps before releasing the oldest
  int64_t step_ns = 0, jitter_ns = 0;
  int max_spinners = 1 << 20;  // workers allowed to spin at once
  bool caller_helps = false;   // the consumer runs queued tickets before it waits
};

const char* mode_name(AutoReset m) {
  return m == AutoReset::kNextStep ? "next_step" : m == AutoReset::kSameStep ? "same_step" : "disabled";
}

struct EnvModel {
  int64_t events = 0, episode = -1, elapsed = 0;
  double ret = 0.0, draw = 0.0;
  bool ended = false, busy = false, pending_reset = false;
  int64_t action = 0;
  int sent = 0;  // sends + resets after the first reset
  Rng rng;
};

Rng seed_for(int env, int generation) {
  return Rng(0x9e3779b97f4a7c15ull * static_cast<uint64_t>(env + 1), static_cast<uint64_t>(generation), 0,
             2 * static_cast<uint64_t>(env) + 1);
}

// Take the next block, through the eventfd ladder (take, arm, re-check, poll, drain) or through
// wait(); a wait that outlasts kStuckS fails the test.
int64_t g_helped = 0;  // tickets the consumer ran itself (next_block with `helps`)

Block* next_block(Pool& pool, bool use_eventfd, int64_t take_spin_ns = 0, bool helps = false) {
  for (;;) {
    if (helps) g_helped += pool.help();
    if (Block* b = pool.take(take_spin_ns)) return b;
    if (use_eventfd) {
      pool.arm();
      if (Block* b = pool.take(0)) return b;
      pollfd p{pool.fd(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(kStuckS * 1000)) != 1)
        fail(__FILE__, __LINE__, "the doorbell did not ring while rows were in flight");
      pool.drain();
    } else if (!pool.wait(kStuckS)) {
      fail(__FILE__, __LINE__, "wait() timed out while rows were in flight");
    }
  }
}

void check_row(const Pool& pool, const PoolCase& c, Block* b, int r, EnvModel& m) {
  const Layout& L = pool.layout();
  const int64_t* obs = b->at<int64_t>(L, L.obs, r);
  auto expect_reset_obs = [&](const int64_t* o) {
    CHECK_EQ(o[0], m.events);
    CHECK_EQ(o[1], m.episode);
    CHECK_EQ(o[2], int64_t{0});
    CHECK_EQ(o[3], int64_t{-1});
  };
  auto model_reset = [&] {
    ++m.events;
    ++m.episode;
    m.elapsed = 0;
    m.ret = 0.0;
    m.ended = false;
    m.draw = m.rng.next_double();
  };
  const bool reset_row = m.pending_reset || (m.ended && c.mode == AutoReset::kNextStep);
  if (reset_row) {
    model_reset();
    expect_reset_obs(obs);
    CHECK_EQ(*b->at<double>(L, L.reward, r), 0.0);
    CHECK(!*b->at<bool>(L, L.terminated, r));
    CHECK(!*b->at<bool>(L, L.truncated, r));
    CHECK_EQ(*b->at<int32_t>(L, L.elapsed_step, r), 0);
    CHECK_EQ(*b->at<double>(L, L.episode_return, r), 0.0);
    CHECK_EQ(*b->at<int32_t>(L, L.episode_length, r), 0);
  } else {
    CHECK(!m.ended);  // disabled: the pool must have refused to step an ended env
    if (c.jitter_ns > 0) m.rng.next_double();
    ++m.events;
    ++m.elapsed;
    m.ret += static_cast<double>(m.action);
    const bool terminated = m.elapsed >= c.episode_length;
    const bool truncated = c.max_episode_steps > 0 && m.elapsed >= c.max_episode_steps;
    CHECK_EQ(*b->at<double>(L, L.reward, r), static_cast<double>(m.action));
    CHECK_EQ(*b->at<bool>(L, L.terminated, r), terminated);
    CHECK_EQ(*b->at<bool>(L, L.truncated, r), truncated);
    CHECK_EQ(*b->at<double>(L, L.episode_return, r), m.ret);
    CHECK_EQ(*b->at<int32_t>(L, L.episode_length, r), static_cast<int32_t>(m.elapsed));
    if ((terminated || truncated) && c.mode == AutoReset::kSameStep) {
      // final_obs / final_info hold the terminal step; obs / info hold the reset that followed.
      const int64_t* fin = b->at<int64_t>(L, L.final_obs, r);
      CHECK_EQ(fin[0], m.events);
      CHECK_EQ(fin[1], m.episode);
      CHECK_EQ(fin[2], m.elapsed);
      CHECK_EQ(fin[3], m.action);
      CHECK_EQ(*b->at<int32_t>(L, L.final_info_first, r), static_cast<int32_t>(m.elapsed));
      CHECK_EQ(*b->at<double>(L, L.final_info_first + 1, r), m.draw);
      CHECK_EQ(*b->at<int32_t>(L, L.final_info_first + 2, r), static_cast<int32_t>(m.events % 2));
      model_reset();
      expect_reset_obs(obs);
      CHECK_EQ(*b->at<int32_t>(L, L.elapsed_step, r), 0);
    } else {
      CHECK_EQ(obs[0], m.events);
      CHECK_EQ(obs[1], m.episode);
      CHECK_EQ(obs[2], m.elapsed);
      CHECK_EQ(obs[3], m.action);
      CHECK_EQ(*b->at<int32_t>(L, L.elapsed_step, r), static_cast<int32_t>(m.elapsed));
      m.ended = terminated || truncated;
    }
  }
  CHECK_EQ(*b->at<double>(L, L.info_first, r), m.draw);
  CHECK_EQ(*b->at<int32_t>(L, L.info_first + 1, r), static_cast<int32_t>(m.events % 2));
  m.pending_reset = false;
  m.busy = false;
}

void run_pool_case(const PoolCase& c, uint32_t seed) {
  PoolOptions o;
  o.num_envs = c.num_envs;
  o.batch_size = c.batch_size;
  o.num_threads = c.num_threads;
  o.autoreset = c.mode;
  o.worker_spin_ns = c.worker_spin_ns;
  o.max_episode_steps = c.max_episode_steps;
  o.max_spinners = c.max_spinners;
  Pool pool(counting(), counting_config(c.episode_length, 1000, c.step_ns, c.jitter_ns, c.chunk), o);
  pool.set_caller_helps(c.caller_helps);
  const Layout& L = pool.layout();
  CHECK_EQ(L.final_obs >= 0, c.mode == AutoReset::kSameStep);
  std::mt19937 rng(seed);
  std::vector<EnvModel> env(static_cast<std::size_t>(c.num_envs));

  // Seed every other env before its first reset; the rest keep the default stream.
  std::vector<int32_t> ids;
  std::vector<uint64_t> states;
  for (int i = 0; i < c.num_envs; i += 2) {
    const Rng s = seed_for(i, 0);
    ids.push_back(i);
    states.insert(states.end(), {s.state_hi(), s.state_lo(), 0, 2 * static_cast<uint64_t>(i) + 1});
    env[static_cast<std::size_t>(i)].rng = s;
  }
  pool.stage_seeds(ids.data(), ids.size(), states.data());

  ids.clear();
  for (int i = 0; i < c.num_envs; ++i) ids.push_back(i);
  std::shuffle(ids.begin(), ids.end(), rng);
  pool.reset(ids.data(), ids.size());
  for (auto& m : env) m.busy = m.pending_reset = true;

  // Dispatch the idle envs that still have steps to go: a few explicit resets (required for
  // ended envs when autoreset is disabled), the rest as sends of random actions in random groups.
  auto dispatch = [&](std::vector<int32_t>& idle) {
    std::shuffle(idle.begin(), idle.end(), rng);
    std::vector<int32_t> to_reset, to_send;
    for (int32_t i : idle) {
      EnvModel& m = env[static_cast<std::size_t>(i)];
      if (m.sent >= c.steps_per_env) continue;
      ++m.sent;
      m.busy = true;
      if ((m.ended && c.mode == AutoReset::kDisabled) || rng() % 100 == 0) {
        m.pending_reset = true;
        to_reset.push_back(i);
      } else {
        m.action = static_cast<int64_t>(rng() % 1000);
        to_send.push_back(i);
      }
    }
    if (!to_reset.empty()) {
      std::vector<int32_t> reseed;
      std::vector<uint64_t> st;
      for (int32_t i : to_reset) {
        if (rng() % 2) continue;
        EnvModel& m = env[static_cast<std::size_t>(i)];
        const Rng s = seed_for(i, m.sent);
        m.rng = s;
        reseed.push_back(i);
        st.insert(st.end(), {s.state_hi(), s.state_lo(), 0, 2 * static_cast<uint64_t>(i) + 1});
      }
      pool.stage_seeds(reseed.data(), reseed.size(), st.data());
      pool.reset(to_reset.data(), to_reset.size());
    }
    for (std::size_t j = 0; j < to_send.size();) {
      const std::size_t k = std::min<std::size_t>(to_send.size() - j, 1 + rng() % 20);
      std::vector<int64_t> actions;
      for (std::size_t q = 0; q < k; ++q)
        actions.push_back(env[static_cast<std::size_t>(to_send[j + q])].action);
      pool.send(reinterpret_cast<const std::byte*>(actions.data()), k * sizeof(int64_t), to_send.data() + j,
                k);
      j += k;
    }
  };

  std::deque<std::pair<Block*, uint64_t>> held;
  uint64_t rows = 0;
  std::vector<int32_t> idle;
  while (pool.rows_in_flight() >= c.batch_size) {
    g_deadline_ns.store(now_ns() + static_cast<int64_t>(2 * kStuckS * 1e9));
    Block* b = next_block(pool, c.use_eventfd, c.take_spin_ns, c.caller_helps);
    CHECK_EQ(b->rows_done.load(), c.batch_size);
    idle.clear();
    for (int r = 0; r < c.batch_size; ++r) {
      const int32_t id = *b->at<int32_t>(L, L.env_id, r);
      CHECK(id >= 0 && id < c.num_envs);
      EnvModel& m = env[static_cast<std::size_t>(id)];
      CHECK(m.busy);  // exactly once: a row for an idle env would be a duplicate
      check_row(pool, c, b, r, m);
      idle.push_back(id);
    }
    rows += static_cast<uint64_t>(c.batch_size);
    // A batch the consumer keeps is never overwritten, however many steps run meanwhile.
    held.emplace_back(b, checksum(b->data, L.block_bytes));
    while (held.size() > c.hold) {
      CHECK_EQ(checksum(held.front().first->data, L.block_bytes), held.front().second);
      pool.store()->release(held.front().first);
      held.pop_front();
    }
    // A send naming an env with an action in flight is refused without side effects.
    if (rng() % 64 == 0) {
      for (int32_t i = 0; i < c.num_envs; ++i) {
        if (!env[static_cast<std::size_t>(i)].busy) continue;
        const int64_t a = 0;
        CHECK_THROWS(std::invalid_argument,
                     pool.send(reinterpret_cast<const std::byte*>(&a), sizeof a, &i, 1));
        break;
      }
    }
    // Disabled autoreset: stepping an ended env is refused until it is reset.
    if (c.mode == AutoReset::kDisabled) {
      for (int32_t i : idle) {
        if (!env[static_cast<std::size_t>(i)].ended) continue;
        const int64_t a = 1;
        CHECK_THROWS(std::invalid_argument,
                     pool.send(reinterpret_cast<const std::byte*>(&a), sizeof a, &i, 1));
        break;
      }
    }
    dispatch(idle);
  }
  for (auto& [b, sum] : held) {
    CHECK_EQ(checksum(b->data, L.block_bytes), sum);
    pool.store()->release(b);
  }

  // Fewer rows in flight than a batch: they stay unpublished. Everything else arrived.
  // Each env's first reset plus every later send or reset is one row, less the one in flight.
  int64_t busy = 0;
  uint64_t expected_rows = 0;
  for (const EnvModel& m : env) {
    if (m.busy) {
      ++busy;
    } else {
      CHECK_EQ(m.sent, c.steps_per_env);
    }
    expected_rows += static_cast<uint64_t>(m.sent + 1 - (m.busy ? 1 : 0));
  }
  CHECK_EQ(busy, pool.rows_in_flight());
  CHECK(busy < c.batch_size);
  CHECK_EQ(rows, expected_rows);
  CHECK(pool.take(0) == nullptr);
  const int64_t until = now_ns() + static_cast<int64_t>(kStuckS * 1e9);
  while (pool.rows_unwritten() != 0 && now_ns() < until) std::this_thread::yield();
  CHECK_EQ(pool.rows_unwritten(), 0);
  CHECK(pool.take(0) == nullptr);
  pool.close();
  CHECK(pool.closed());
}

void run_pool_table(const std::vector<PoolCase>& cases) {
  uint32_t seed = 1;
  for (const PoolCase& c : cases) {
    std::printf("    %d/%d/%d %s L=%d max=%d chunk=%d steps=%d spin=%lld %s hold=%zu\n", c.num_envs,
                c.batch_size, c.num_threads, mode_name(c.mode), c.episode_length, c.max_episode_steps,
                c.chunk, c.steps_per_env, static_cast<long long>(c.worker_spin_ns),
                c.use_eventfd ? "eventfd" : "wait", c.hold);
    std::fflush(stdout);
    run_pool_case(c, seed++);
  }
}

// Steps per env so that each case makes about `rows` rows.
int steps_for(int num_envs, int rows) { return std::max(20, scaled(rows) / num_envs); }

std::vector<PoolCase> shapes(AutoReset mode, int rows) {
  std::vector<PoolCase> out;
  auto add = [&](int n, int b, int t) {
    PoolCase c{n, b, t};
    c.mode = mode;
    c.steps_per_env = steps_for(n, rows);
    out.push_back(c);
    return &out.back();
  };
  PoolCase* c = add(1, 1, 1);
  c->steps_per_env = std::min(c->steps_per_env, scaled(5000, 200));
  c->worker_spin_ns = 0;  // every step crosses the futex
  c = add(8, 4, 2);
  c->episode_length = 7;
  c->use_eventfd = false;
  c->hold = 3;
  c = add(64, 16, 3);
  c->chunk = 4;
  c->max_episode_steps = 5;  // truncation before termination
  c->take_spin_ns = 20'000;
  c->max_spinners = 1;  // two of three workers sleep; sends wake only what the spinner can't take
  c = add(37, 5, 2);
  c->episode_length = 3;
  c->worker_spin_ns = 0;
  c->hold = 2;
  c = add(48, 12, 2);
  c->chunk = 3;
  c->max_spinners = 1;  // as on a 2-core machine with 2 workers
  c->worker_spin_ns = 2'000;
  c = add(256, 128, 2);
  c->chunk = 15;
  c->episode_length = 50;
  c->max_episode_steps = 50;  // terminated and truncated on the same step
  c->use_eventfd = false;
  return out;
}

void test_pool_next_step() { run_pool_table(shapes(AutoReset::kNextStep, 600'000)); }
void test_pool_same_step() { run_pool_table(shapes(AutoReset::kSameStep, 300'000)); }
void test_pool_disabled() { run_pool_table(shapes(AutoReset::kDisabled, 300'000)); }

// Slow, jittered steps shuffle the finish order; rows still arrive in order per env.
void test_pool_jittered_steps() {
  PoolCase c{12, 4, 2};
  c.step_ns = 2'000;
  c.jitter_ns = 20'000;
  c.steps_per_env = scaled(1500, 60);
  c.worker_spin_ns = 0;
  c.hold = 2;
  run_pool_table({c});
  c.mode = AutoReset::kSameStep;
  c.use_eventfd = false;
  run_pool_table({c});
}

// The consumer steps queued envs itself before it waits (Pool::help, the sync adapters' path):
// the same rows, in every mode, with workers stepping the other envs at the same time.
void test_pool_caller_helps() {
  for (AutoReset mode : {AutoReset::kNextStep, AutoReset::kSameStep, AutoReset::kDisabled}) {
    for (int threads : {1, 2}) {
      PoolCase c{12, 12, threads};
      c.mode = mode;
      c.caller_helps = true;
      c.steps_per_env = scaled(1500, 60);
      c.jitter_ns = 5'000;
      c.hold = 1;
      g_helped = 0;
      run_pool_table({c});
      CHECK(g_helped > 0);
      c.batch_size = 4;  // several blocks a send: the consumer helps while others are ready
      c.use_eventfd = threads == 2;
      g_helped = 0;
      run_pool_table({c});
      CHECK(g_helped > 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// send / reset validation: every refusal throws std::invalid_argument and leaves no trace.

void send1(Pool& p, std::vector<int32_t> ids, std::vector<int64_t> actions) {
  p.send(reinterpret_cast<const std::byte*>(actions.data()), actions.size() * sizeof(int64_t), ids.data(),
         ids.size());
}

// Take exactly `n` blocks and return the env ids in them.
std::vector<int32_t> take_blocks(Pool& p, int n) {
  std::vector<int32_t> ids;
  const Layout& L = p.layout();
  for (int k = 0; k < n; ++k) {
    Block* b = next_block(p, /*use_eventfd=*/false);
    for (int r = 0; r < L.batch_size; ++r) ids.push_back(*b->at<int32_t>(L, L.env_id, r));
    p.store()->release(b);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

void test_send_validation() {
  PoolOptions o;
  o.num_envs = 8;
  o.batch_size = 4;
  o.num_threads = 2;
  Pool p(counting(), counting_config(10, /*num_actions=*/5), o);
  using IA = std::invalid_argument;
  CHECK_THROWS(IA, send1(p, {0}, {1}));  // never reset
  std::vector<int32_t> all{0, 1, 2, 3, 4, 5, 6, 7};
  p.reset(all.data(), all.size());
  CHECK_THROWS(IA, p.reset(all.data(), 1));  // reset while its reset is in flight
  CHECK_THROWS(IA, send1(p, {3}, {1}));      // in flight
  CHECK(take_blocks(p, 2) == all);
  CHECK_EQ(p.rows_in_flight(), int64_t{0});

  CHECK_THROWS(IA, send1(p, {-1}, {1}));
  CHECK_THROWS(IA, send1(p, {8}, {1}));
  CHECK_THROWS(IA, send1(p, {2, 2}, {1, 1}));
  CHECK_THROWS(IA, send1(p, {1, 2}, {1, 5}));  // Discrete(5): 5 is out of range
  CHECK_THROWS(IA, send1(p, {1, 2}, {-1, 0}));
  CHECK_THROWS(IA, send1(p, {1, 2}, {1}));  // one action for two envs
  std::vector<int32_t> bad{0, 9};
  CHECK_THROWS(IA, p.reset(bad.data(), bad.size()));
  std::vector<int32_t> twice{4, 4};
  CHECK_THROWS(IA, p.reset(twice.data(), twice.size()));
  std::vector<uint64_t> st(8, 1);
  std::vector<int32_t> dup{5, 5};
  CHECK_THROWS(IA, p.stage_seeds(dup.data(), 2, st.data()));
  CHECK_EQ(p.rows_in_flight(), int64_t{0});

  send1(p, {0, 1}, {4, 3});
  CHECK_THROWS(IA, send1(p, {2, 1}, {1, 1}));  // 1 in flight: 2 must not be dispatched either
  send1(p, {2, 3}, {2, 1});                    // ...so 2 is still idle
  CHECK_EQ(p.rows_in_flight(), int64_t{4});
  // The refused calls left every env idle and usable.
  CHECK(take_blocks(p, 1) == (std::vector<int32_t>{0, 1, 2, 3}));
  send1(p, {7, 6, 5, 4, 3, 2, 1, 0}, {0, 1, 2, 3, 4, 4, 4, 4});
  CHECK(take_blocks(p, 2) == all);
  p.close();
  CHECK_THROWS(std::runtime_error, send1(p, {0}, {1}));
  CHECK_THROWS(std::runtime_error, p.reset(all.data(), 1));
  CHECK(p.take(0) == nullptr);
}

// ---------------------------------------------------------------------------------------------
// close(): workers mid-step, a thread blocked in wait(), batches outliving the pool.

std::unique_ptr<Pool> busy_pool(int num_envs, int batch, int threads, int64_t spin_ns) {
  PoolOptions o;
  o.num_envs = num_envs;
  o.batch_size = batch;
  o.num_threads = threads;
  o.worker_spin_ns = spin_ns;
  return std::make_unique<Pool>(counting(), counting_config(5, 1000, 20'000, 100'000), o);
}

// A thread blocked in wait() with nothing able to complete a batch is released by close().
void test_close_releases_waiter() {
  for (int round = 0; round < scaled(400, 40); ++round) {
    auto p = busy_pool(8, 4, 2, round % 2 ? 0 : 50'000);
    std::vector<int32_t> ids{0, 1, 2};  // 3 rows can never fill a batch of 4
    p->reset(ids.data(), ids.size());
    std::atomic<int> result{-1};
    std::thread waiter([&] { result.store(p->wait(-1.0) ? 1 : 0); });
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (round % 5)));
    p->close();
    waiter.join();
    CHECK_EQ(result.load(), 0);
    CHECK(p->take(0) == nullptr);
    CHECK_EQ(p->drain(), uint64_t{0});
    CHECK(p->closed());
    p->close();  // idempotent
  }
}

// The consumer runs flat out (wait, take, send) while another thread closes the pool at a
// random moment; the consumer may hold a batch across close() and the pool's destruction, as
// a numpy view does (its capsule holds the store's shared_ptr, see module.h BlockHandle).
void test_close_while_busy() {
  std::mt19937 rng(7);
  for (int round = 0; round < scaled(500, 50); ++round) {
    auto p = busy_pool(16, 4, 2, round % 3 == 0 ? 0 : 50'000);
    const Layout layout = p->layout();
    std::vector<int32_t> all(16);
    for (int i = 0; i < 16; ++i) all[static_cast<std::size_t>(i)] = i;
    p->reset(all.data(), all.size());
    std::shared_ptr<BlockStore> store;  // what a BlockOwner holds
    Block* kept = nullptr;
    uint64_t kept_sum = 0;
    std::atomic<bool> started{false};
    std::thread consumer([&] {
      Pool& pool = *p;
      for (int k = 0;; ++k) {
        if (!pool.wait(-1.0)) return;  // closed
        Block* b = pool.take(0);
        if (b == nullptr) continue;  // close() took it back
        std::vector<int32_t> ids;
        for (int r = 0; r < layout.batch_size; ++r) ids.push_back(*b->at<int32_t>(layout, layout.env_id, r));
        if (kept == nullptr && k >= 1) {
          store = pool.store();
          kept = b;
          kept_sum = checksum(b->data, layout.block_bytes);
        } else {
          pool.store()->release(b);
        }
        started.store(true);
        std::vector<int64_t> actions(ids.size(), 1);
        try {
          send1(pool, ids, actions);
        } catch (const std::runtime_error&) {
          return;  // closed between take and send
        }
      }
    });
    while (!started.load()) std::this_thread::yield();
    if (round % 4) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    p->close();
    consumer.join();
    if (round % 2) p->close();
    p.reset();  // destroy the pool; `kept` is still ours
    if (kept != nullptr) {
      CHECK_EQ(checksum(kept->data, layout.block_bytes), kept_sum);
      store->release(kept);
    }
    store.reset();
  }
}

// Destroying a pool without close(), mid-step, with batches still held and rows half-written
// in the ring; the held batch is released after the pool is gone.
void test_destroy_with_blocks_held() {
  for (int round = 0; round < scaled(400, 40); ++round) {
    auto p = busy_pool(9, 2, 3, round % 2 ? 0 : 50'000);
    const Layout layout = p->layout();
    std::vector<int32_t> all{0, 1, 2, 3, 4, 5, 6, 7, 8};
    p->reset(all.data(), all.size());
    Block* first = next_block(*p, /*use_eventfd=*/round % 2 == 0);
    Block* second = next_block(*p, /*use_eventfd=*/round % 2 == 0);
    const uint64_t s1 = checksum(first->data, layout.block_bytes);
    std::vector<int32_t> ids;
    for (int r = 0; r < 2; ++r) ids.push_back(*second->at<int32_t>(layout, layout.env_id, r));
    send1(*p, ids, {3, 4});
    auto owner = std::make_shared<std::pair<std::shared_ptr<BlockStore>, Block*>>(p->store(), first);
    p->store()->release(second);
    p.reset();  // no close(): the destructor closes, joins busy workers, returns ring blocks
    CHECK_EQ(checksum(owner->second->data, layout.block_bytes), s1);
    owner->first->release(owner->second);
    owner.reset();
  }
}

// The toy-text envs under the sanitizers: four threads build their envs at once (the shared
// model cache, FrozenLake's per-env random maps) and step them with random actions, resetting
// (some re-seeded) when an episode ends or runs 200 steps; every state stays in its space.
template <class E>
void toy_text_case(const Config& config) {
  const int64_t states = E::spec(config).observation_space.n;
  const int64_t actions = E::spec(config).action_space.n;
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<E> envs;
      std::vector<Rng> rngs;
      for (uint64_t i = 0; i < 4; ++i) {
        envs.emplace_back(config);
        rngs.emplace_back(0, t * 4 + i, 0, 2 * (t * 4 + i) + 1, static_cast<int64_t>(t * 4 + i));
      }
      std::mt19937 gen(static_cast<uint32_t>(t));
      int64_t obs = 0;
      double prob = 0.0;
      int8_t mask[8] = {};
      void* info[2] = {&prob, mask};
      Row row{&obs, info};
      for (std::size_t i = 0; i < envs.size(); ++i) envs[i].reset(rngs[i]);
      for (int step = 0, n = scaled(20'000, 500); step < n; ++step) {
        const std::size_t i = static_cast<std::size_t>(step) % envs.size();
        const int64_t a = static_cast<int64_t>(gen() % static_cast<uint32_t>(actions));
        const StepResult r = envs[i].step(&a, rngs[i]);
        if (r.terminated || step % 200 == 199) {
          if (gen() % 4 == 0) rngs[i] = Rng(0, gen(), 0, 2 * gen() + 1, static_cast<int64_t>(gen() % 1000));
          envs[i].reset(rngs[i]);
        }
        envs[i].write(row);
        CHECK(obs >= 0 && obs < states);
        CHECK(prob > 0.0 && prob <= 1.0);
      }
    });
  for (std::thread& th : threads) th.join();
}

void test_toy_text_envs() {
  toy_text_case<FrozenLake>(Config({{"is_slippery", 1.0}, {"success_rate", 1.0 / 3.0}}, {{"map_name", "8x8"}},
                                   {{"reward_schedule", {1.0, 0.0, 0.0}}}));
  toy_text_case<FrozenLake>(  // desc=None, map_name=None: a random map per env and re-seed
      Config({{"is_slippery", 0.0}, {"success_rate", 0.5}}, {}, {{"reward_schedule", {1.0, -1.0, 0.0}}}));
  toy_text_case<CliffWalking>(Config({{"is_slippery", 1.0}}));
  toy_text_case<Taxi>(Config({{"is_rainy", 1.0},
                              {"fickle_passenger", 1.0},
                              {"rainy_probability", 0.8},
                              {"fickle_probability", 0.3}}));
}

struct TestCase {
  const char* name;
  void (*fn)();
};

const TestCase kTests[] = {
    {"action_queue_stress", test_action_queue_stress},
    {"action_queue_preempted_consumer", test_action_queue_preempted_consumer},
    {"action_queue_sleep_path", test_action_queue_sleep_path},
    {"action_queue_stop_wakes_sleepers", test_action_queue_stop_wakes_sleepers},
    {"doorbell_rings_only_when_armed", test_doorbell_rings_only_when_armed},
    {"block_ring_stress", test_block_ring_stress},
    {"pool_next_step", test_pool_next_step},
    {"pool_same_step", test_pool_same_step},
    {"pool_disabled", test_pool_disabled},
    {"pool_jittered_steps", test_pool_jittered_steps},
    {"pool_caller_helps", test_pool_caller_helps},
    {"send_validation", test_send_validation},
    {"close_releases_waiter", test_close_releases_waiter},
    {"close_while_busy", test_close_while_busy},
    {"destroy_with_blocks_held", test_destroy_with_blocks_held},
    {"toy_text_envs", test_toy_text_envs},
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::thread(watchdog).detach();
  const std::string filter = argc > 1 ? argv[1] : "";
  int passed = 0;
  const int64_t start = now_ns();
  for (const TestCase& t : kTests) {
    if (!filter.empty() && std::string(t.name).find(filter) == std::string::npos) continue;
    g_test = t.name;
    std::printf("  %s ...\n", t.name);
    const int64_t t0 = now_ns();
    g_deadline_ns.store(t0 + static_cast<int64_t>(4 * kStuckS * 1e9));
    try {
      t.fn();
    } catch (const std::exception& e) {
      fail(__FILE__, __LINE__, std::string("uncaught exception: ") + e.what());
    }
    g_deadline_ns.store(INT64_MAX);
    std::printf("  ok %s (%.2f s)\n", t.name, static_cast<double>(now_ns() - t0) / 1e9);
    ++passed;
  }
  std::printf("  total %.1f s, iteration scale 1/%d\n", static_cast<double>(now_ns() - start) / 1e9, scale());
  std::printf("native: %d passed, 0 failed\n", passed);
  return 0;
}
