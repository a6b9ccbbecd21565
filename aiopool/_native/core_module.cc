// `aiopool._native._core`: the engine with the envs that need no simulator library (classic
// control and the Counting test env).
#include <atomic>
#include <cstdint>

#include "envs/classic_control/acrobot.h"
#include "envs/classic_control/cartpole.h"
#include "envs/classic_control/mountain_car.h"
#include "envs/classic_control/mountain_car_continuous.h"
#include "envs/classic_control/pendulum.h"
#include "envs/testing/counting.h"
#include "module.h"

namespace {

// Sequentially consistent int64 operations on shared memory, for aiopool's worker-process
// backend (aiopool/_process): the parent and its worker processes map the same memfd, and
// Python has no atomics of its own. `addr` is an 8-byte-aligned address inside that mapping.
std::atomic_ref<int64_t> at(std::uintptr_t addr) {
  return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(addr));
}

}  // namespace

NB_MODULE(_core, m) {
  aiopool::define_pool_module(m,
                              "aiopool's native engine: worker threads, batch blocks, the eventfd doorbell.");
  m.def("_atomic_add", [](std::uintptr_t addr, int64_t delta) { return at(addr).fetch_add(delta); });
  m.def("_atomic_load", [](std::uintptr_t addr) { return at(addr).load(); });
  m.def("_atomic_store", [](std::uintptr_t addr, int64_t value) { at(addr).store(value); });
}
