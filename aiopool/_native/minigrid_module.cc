// `aiopool._native._minigrid`: minigrid 3.2.0's MiniGrid envs, seed for seed, on numpy's random
// stream (rng.h). The engine is envs/minigrid/minigrid_env.h; one header per env class.
#include <nanobind/stl/array.h>

#include "envs/minigrid/crossing.h"
#include "envs/minigrid/distshift.h"
#include "envs/minigrid/doorkey.h"
#include "envs/minigrid/dynamic_obstacles.h"
#include "envs/minigrid/empty.h"
#include "envs/minigrid/fetch.h"
#include "envs/minigrid/fourrooms.h"
#include "envs/minigrid/gotodoor.h"
#include "envs/minigrid/gotoobject.h"
#include "envs/minigrid/keycorridor.h"
#include "envs/minigrid/lavagap.h"
#include "envs/minigrid/lockedroom.h"
#include "envs/minigrid/memory.h"
#include "envs/minigrid/multiroom.h"
#include "envs/minigrid/obstructedmaze.h"
#include "envs/minigrid/playground.h"
#include "envs/minigrid/putnear.h"
#include "envs/minigrid/redbluedoors.h"
#include "envs/minigrid/unlock.h"
#include "module.h"

NB_MODULE(_minigrid, m) {
  // For tests/test_rng.py: from a PCG64 state (state_hi, state_lo, inc_hi, inc_lo), numpy's
  // random_interval(max) for each of `maxima` in turn, on one stream.
  m.def("_interval_draws", [](std::array<uint64_t, 4> s, const std::vector<uint64_t>& maxima) {
    aiopool::Rng rng(s[0], s[1], s[2], s[3]);
    std::vector<uint64_t> out;
    out.reserve(maxima.size());
    for (uint64_t n : maxima) out.push_back(rng.random_interval(n));
    return out;
  });
  // Generator.shuffle of list(range(n)) for each n of `sizes` in turn, on one stream.
  m.def("_shuffles", [](std::array<uint64_t, 4> s, const std::vector<int64_t>& sizes) {
    aiopool::Rng rng(s[0], s[1], s[2], s[3]);
    std::vector<std::vector<int64_t>> out;
    for (int64_t n : sizes) {
      std::vector<int64_t> x(static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = i;
      rng.shuffle(x.data(), x.size());
      out.push_back(std::move(x));
    }
    return out;
  });
  aiopool::define_pool_module(m, "aiopool's MiniGrid envs: minigrid 3.2.0's, seed for seed.");
}
