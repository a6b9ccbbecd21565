// Rng::standard_normal, drawn exactly as numpy's Generator.standard_normal draws it.
//
// numpy's ziggurat lives in its C distribution library, which numpy ships for C users
// (numpy/random/lib/libnpyrandom.a, BSD licence). The modules that need normal draws link it and
// drive it with our PCG64 through numpy's bitgen_t callbacks, so the draws are numpy's own code
// on numpy's stream. Only modules whose envs draw normals include this header (MuJoCo's Ant,
// HalfCheetah and InvertedDoublePendulum); the core module does not link libnpyrandom.
#pragma once

#include <numpy/random/bitgen.h>

#include <cstdint>

#include "rng.h"

extern "C" double random_standard_normal(bitgen_t* bitgen_state);

namespace aiopool {

inline double standard_normal(Rng& rng) {
  bitgen_t bitgen{};
  bitgen.state = &rng;
  bitgen.next_uint64 = [](void* s) { return static_cast<Rng*>(s)->next_uint64(); };
  // The ziggurat draws 64-bit words and doubles only; numpy's 32-bit buffering is not needed.
  bitgen.next_uint32 = [](void* s) { return static_cast<uint32_t>(static_cast<Rng*>(s)->next_uint64()); };
  bitgen.next_double = [](void* s) { return static_cast<Rng*>(s)->next_double(); };
  bitgen.next_raw = bitgen.next_uint64;
  return random_standard_normal(&bitgen);
}

}  // namespace aiopool
