// numpy's legacy RandomState (MT19937) stream, reproduced exactly: the Control Suite's tasks
// draw from it (dm_control seeds each task's RandomState), and Meta-World's task vectors come
// from the legacy global `np.random` (metaworld seeds it while it builds a benchmark's tasks).
// Plain arithmetic on 32-bit draws, the same on every CPU; tests/test_rng.py holds it to numpy's.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace aiopool {

class RandomState {
 public:
  // RandomState(seed) for 0 <= seed < 2**32: MT19937's init_genrand (numpy's mt19937_seed).
  void seed(uint32_t s) {
    for (int i = 0; i < kN; ++i) {
      key_[i] = s;
      s = 1812433253U * (s ^ (s >> 30)) + static_cast<uint32_t>(i) + 1U;
    }
    pos_ = kN;
    has_gauss_ = false;
    gauss_ = 0.0;
  }

  uint32_t next_uint32() {
    if (pos_ == kN) generate();
    uint32_t y = key_[pos_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= y >> 18;
    return y;
  }

  // random_sample(): 53 bits from two draws.
  double random_sample() {
    const double a = next_uint32() >> 5, b = next_uint32() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

  // uniform(low, high): low + (high - low) * random_sample(), elementwise for arrays.
  double uniform(double low, double high) { return low + (high - low) * random_sample(); }

  // randint(high) for 0 < high <= 2**32: legacy RandomState's masked rejection on 32-bit draws
  // (numpy's buffered_bounded_masked_uint32): the draw's low bits up to high - 1's width,
  // drawn again while above high - 1.
  int64_t randint(int64_t high) {
    const auto top = static_cast<uint32_t>(high - 1);
    if (top == 0) return 0;
    uint32_t mask = top;
    for (int shift = 1; shift < 32; shift *= 2) mask |= mask >> shift;
    uint32_t value;
    do value = next_uint32() & mask;
    while (value > top);
    return value;
  }

  // standard_normal() / randn(): the legacy polar method, which keeps its second value.
  double standard_normal() {
    if (has_gauss_) {
      has_gauss_ = false;
      const double g = gauss_;
      gauss_ = 0.0;
      return g;
    }
    double x1, x2, r2;
    do {
      x1 = 2.0 * random_sample() - 1.0;
      x2 = 2.0 * random_sample() - 1.0;
      r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    const double f = std::sqrt(-2.0 * std::log(r2) / r2);
    gauss_ = f * x1;
    has_gauss_ = true;
    return f * x2;
  }

 private:
  static constexpr int kN = 624, kM = 397;
  void generate() {
    constexpr uint32_t kUpper = 0x80000000U, kLower = 0x7fffffffU, kMatrix = 0x9908b0dfU;
    auto twist = [&](uint32_t a, uint32_t b, uint32_t c) {
      const uint32_t y = (a & kUpper) | (b & kLower);
      return c ^ (y >> 1) ^ ((0U - (y & 1U)) & kMatrix);
    };
    int i = 0;
    for (; i < kN - kM; ++i) key_[i] = twist(key_[i], key_[i + 1], key_[i + kM]);
    for (; i < kN - 1; ++i) key_[i] = twist(key_[i], key_[i + 1], key_[i + kM - kN]);
    key_[kN - 1] = twist(key_[kN - 1], key_[0], key_[kM - 1]);
    pos_ = 0;
  }

  std::array<uint32_t, kN> key_{};
  int pos_ = kN;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

}  // namespace aiopool
