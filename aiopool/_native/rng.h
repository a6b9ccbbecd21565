// numpy's random stream, reproduced exactly, so that an aiopool env seeded `s` draws what
// gymnasium's `np_random` seeded `s` draws.
//
// numpy's `PCG64` is the 128-bit LCG with the XSL-RR output function. The seeded state and
// increment come from `np.random.PCG64(np.random.SeedSequence(s)).state`, computed in Python
// at make()/async_reset(seed=...) time; after that the stream is advanced here only. Each env
// owns one Rng, touched only by the worker stepping that env. Checked bit for bit against
// numpy 2.4 (raw stream and Generator.uniform); tests/test_rng.py holds env resets to gymnasium's.
#pragma once

#include <cstdint>

namespace aiopool {

class Rng {
 public:
  __extension__ typedef unsigned __int128 u128;  // GCC/Clang builtin; __extension__ silences -Wpedantic

  Rng() = default;
  Rng(uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo, int64_t seed = -1)
      : state_((u128(state_hi) << 64) | state_lo), inc_((u128(inc_hi) << 64) | inc_lo), seed_(seed) {}

  // The integer this stream was seeded from (`seed + i`), once: then -1 until the next re-seed.
  // For envs whose reference seeds its own generators with that integer instead of drawing from
  // numpy (ALE: its emulator RNG and a std::mt19937), and re-seeds them only when the user
  // re-seeds. Envs that draw from the stream ignore it.
  int64_t take_seed() {
    const int64_t s = seed_;
    seed_ = -1;
    return s;
  }

  // numpy: pcg_setseq_128_xsl_rr_64_random_r (step, then output of the new state).
  uint64_t next_uint64() {
    state_ = state_ * kMultiplier + inc_;
    const uint64_t hi = static_cast<uint64_t>(state_ >> 64);
    const uint64_t lo = static_cast<uint64_t>(state_);
    const unsigned rot = static_cast<unsigned>(hi >> 58);
    const uint64_t x = hi ^ lo;
    return (x >> rot) | (x << ((64u - rot) & 63u));
  }

  // numpy: next_double = (next_uint64 >> 11) * 2^-53.
  double next_double() { return static_cast<double>(next_uint64() >> 11) * (1.0 / 9007199254740992.0); }

  // numpy: Generator.uniform(low, high) = random_uniform(low, high - low) = low + range * u.
  double uniform(double low, double high) {
    const double range = high - low;
    return low + range * next_double();
  }

  uint64_t state_hi() const { return static_cast<uint64_t>(state_ >> 64); }
  uint64_t state_lo() const { return static_cast<uint64_t>(state_); }

 private:
  static constexpr u128 kMultiplier = (u128(2549297995355413924ULL) << 64) | u128(4865540595714422341ULL);
  u128 state_ = 0;
  u128 inc_ = 1;
  int64_t seed_ = -1;
};

}  // namespace aiopool
