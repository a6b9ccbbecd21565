// numpy's random stream, reproduced exactly, so that an aiopool env seeded `s` draws what
// gymnasium's `np_random` seeded `s` draws.
//
// numpy's `PCG64` is the 128-bit LCG with the XSL-RR output function. The seeded state and
// increment come from `np.random.PCG64(np.random.SeedSequence(s)).state`, computed in Python
// at make()/async_reset(seed=...) time; after that the stream is advanced here only. Each env
// owns one Rng, touched only by the worker stepping that env. Checked bit for bit against
// numpy 2.4 (raw stream, Generator.uniform, integers and shuffle); tests/test_rng.py holds env
// resets to gymnasium's.
#pragma once

#include <cstddef>
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

  // numpy: pcg64_next32. A 32-bit draw takes the low half of a 64-bit word and keeps the high
  // half for the next 32-bit draw (numpy's `has_uint32` / `uinteger`); 64-bit draws and doubles
  // leave that buffer as it is.
  uint32_t next_uint32() {
    if (has_uint32_) {
      has_uint32_ = false;
      return uinteger_;
    }
    const uint64_t next = next_uint64();
    has_uint32_ = true;
    uinteger_ = static_cast<uint32_t>(next >> 32);
    return static_cast<uint32_t>(next & 0xffffffffu);
  }

  // numpy: Generator.integers(0, n) for 1 <= n <= 2^32 (the default int64 dtype, so also
  // Generator.choice(a) of a sequence of n items): random_bounded_uint64 with Lemire's
  // rejection on 32-bit draws (buffered_bounded_lemire_uint32). n = 1 draws nothing.
  int64_t integers(int64_t n) {
    const uint64_t rng = static_cast<uint64_t>(n) - 1;
    if (rng == 0) return 0;
    if (rng == 0xffffffffu) return next_uint32();
    const uint32_t rng_excl = static_cast<uint32_t>(rng) + 1;
    uint64_t m = static_cast<uint64_t>(next_uint32()) * rng_excl;
    uint32_t leftover = static_cast<uint32_t>(m & 0xffffffffu);
    if (leftover < rng_excl) {
      const uint32_t threshold = (0xffffffffu - static_cast<uint32_t>(rng)) % rng_excl;
      while (leftover < threshold) {
        m = static_cast<uint64_t>(next_uint32()) * rng_excl;
        leftover = static_cast<uint32_t>(m & 0xffffffffu);
      }
    }
    return static_cast<int64_t>(m >> 32);
  }

  // numpy: Generator.integers(low, high) for high - low <= 2^32.
  int64_t integers(int64_t low, int64_t high) { return low + integers(high - low); }

  // numpy: random_interval(max), a value in [0, max] by masked rejection: the smallest
  // all-ones mask >= max over 32-bit draws (64-bit ones for max >= 2^32) until one is <= max.
  // Generator.shuffle and permutation draw j = random_interval(i) for i = n-1 ... 1.
  uint64_t random_interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    for (unsigned shift = 1; shift < 64; shift <<= 1) mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xffffffffu) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }

  // numpy: Generator.shuffle(x) of a sequence (a list; a 1-d array draws the same): Fisher-Yates
  // from the end, swapping x[i] and x[random_interval(i)].
  template <class T>
  void shuffle(T* x, std::size_t n) {
    for (std::size_t i = n; i-- > 1;) {
      const std::size_t j = static_cast<std::size_t>(random_interval(i));
      T tmp = x[i];
      x[i] = x[j];
      x[j] = tmp;
    }
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
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

}  // namespace aiopool
