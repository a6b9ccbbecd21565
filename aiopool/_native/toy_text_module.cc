// `aiopool._native._toy_text`: gymnasium's toy-text envs (FrozenLake, CliffWalking, Taxi,
// Blackjack), plain C++ on numpy's random stream (rng.h).
#include <nanobind/stl/array.h>

#include "envs/toy_text/blackjack.h"
#include "envs/toy_text/cliff_walking.h"
#include "envs/toy_text/frozen_lake.h"
#include "envs/toy_text/taxi.h"
#include "module.h"

NB_MODULE(_toy_text, m) {
  // For tests/test_rng.py: from a PCG64 state (state_hi, state_lo, inc_hi, inc_lo), the draws
  // Generator.integers(0, n) makes for each n of `bounds` in turn, on one stream.
  m.def("_integers_draws", [](std::array<uint64_t, 4> s, const std::vector<int64_t>& bounds) {
    aiopool::Rng rng(s[0], s[1], s[2], s[3]);
    std::vector<int64_t> out;
    out.reserve(bounds.size());
    for (int64_t n : bounds) out.push_back(rng.integers(n));
    return out;
  });
  aiopool::define_pool_module(
      m, "aiopool's toy-text envs: gymnasium's FrozenLake, CliffWalking, Taxi and Blackjack.");
}
