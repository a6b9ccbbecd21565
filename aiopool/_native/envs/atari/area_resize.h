// OpenCV's `cv::resize(..., INTER_AREA)` for 8-bit images shrunk by non-integer factors,
// reproduced bit for bit: ale-py's AtariVectorEnv resizes its frames with OpenCV 4.10 (linked
// into its wheel), so equal observations need equal arithmetic.
//
// OpenCV's generic area path (`computeResizeAreaTab` + `ResizeArea_Invoker<uchar, float>`):
// along each axis, output cell d covers source interval [d*scale, (d+1)*scale), scale =
// 1/((double)dst/src); every source pixel the cell touches gets weight overlap/cell width (as a
// float). A source row is first collapsed horizontally (buf[dx] = sum of S[sx]*alpha, in source
// order), then the rows of one output row are summed with their vertical weights (sum =
// beta0*buf0, then sum += beta*buf, in source order), and rounded half to even with saturation.
//
// Same results, less work: OpenCV collapses a source row once per vertical table entry, and the
// rows on cell borders belong to two output rows; here each source row is collapsed once, and
// kept: a caller that knows which source rows changed since its last call (consecutive Atari
// frames share most rows) has only those collapsed again. Every output value is still
// accumulated with the same operands in the same order, in float, so the results are identical;
// the including module must be compiled with -ffp-contract=off (a fused multiply-add rounds
// differently).
//
// Only shrinking with a non-integer factor on at least one axis takes this path in OpenCV; equal
// sizes are a copy (ale-py copies); integer factors on both axes and enlarging take other
// OpenCV paths, which AreaResize refuses (AreaResize::supported).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace aiopool::atari {

class AreaResize {
 public:
  AreaResize() = default;
  AreaResize(int src_h, int src_w, int dst_h, int dst_w, int channels)
      : dst_h_(dst_h), dst_w_(dst_w), cn_(channels) {
    if (const char* why = unsupported(src_h, src_w, dst_h, dst_w)) throw std::invalid_argument(why);
    columns_ = table(src_w, dst_w);
    rows_ = table(src_h, dst_h);
    // Term k of every output value x (x = column * channels + channel), laid out term-major so
    // that the collapse loop runs over x without a dependency from one x to the next. Columns
    // with fewer terms are padded with zero weights: acc + s*0 == acc for the finite,
    // non-negative sums here, so the results do not change.
    const int width = dst_w * channels;
    std::vector<int> filled(static_cast<std::size_t>(dst_w), 0);
    for (const Term& t : columns_) terms_ = std::max(terms_, ++filled[static_cast<std::size_t>(t.dst)]);
    std::fill(filled.begin(), filled.end(), 0);
    col_src_.assign(static_cast<std::size_t>(terms_ * width), 0);
    col_alpha_.assign(static_cast<std::size_t>(terms_ * width), 0.0f);
    for (const Term& t : columns_) {
      const int k = filled[static_cast<std::size_t>(t.dst)]++;
      for (int c = 0; c < channels; ++c) {
        const auto x = static_cast<std::size_t>(k * width + t.dst * channels + c);
        col_src_[x] = t.src * channels + c;
        col_alpha_[x] = t.alpha;
      }
    }
    collapsed_.assign(static_cast<std::size_t>(src_h * width), 0.0f);
    sum_.assign(static_cast<std::size_t>(dst_w * channels), 0.0f);
  }

  // Why OpenCV would not take the generic area path for these sizes, or null if it would.
  static const char* unsupported(int src_h, int src_w, int dst_h, int dst_w) {
    if (dst_h < 1 || dst_w < 1 || dst_h > src_h || dst_w > src_w)
      return "INTER_AREA enlarging is not reproduced: img_height and img_width must be at most the screen's";
    const double sx = 1.0 / (static_cast<double>(dst_w) / src_w);
    const double sy = 1.0 / (static_cast<double>(dst_h) / src_h);
    const auto integral = [](double s) { return std::abs(s - std::round(s)) < 2.220446049250313e-16; };
    if (integral(sx) && integral(sy))
      return "shrinking by an integer factor on both axes takes OpenCV's fast area path, which is not "
             "reproduced: choose img_height and img_width so that at least one of 210/img_height and "
             "160/img_width is not an integer, or the full 210x160 screen";
    return nullptr;
  }

  // src: src_h x src_w x channels bytes; dst: dst_h x dst_w x channels bytes. Each source row
  // is collapsed once, and only where `changed` (one flag per source row) says it changed since
  // the last call: the collapsed rows are kept (the first call must flag every row).
  void operator()(const uint8_t* src, int src_w, uint8_t* dst, const uint8_t* changed) {
    const std::size_t width = static_cast<std::size_t>(dst_w_ * cn_);
    const std::size_t src_stride = static_cast<std::size_t>(src_w * cn_);
    int handled = -1;  // the last source row collapsed (or kept) in this call
    int prev_dst = rows_.front().dst;
    std::fill(sum_.begin(), sum_.end(), 0.0f);
    for (const Term& r : rows_) {
      const auto row = static_cast<std::size_t>(r.src);
      if (r.src != handled && changed[row]) collapse(src + row * src_stride, collapsed_.data() + row * width);
      handled = r.src;
      const float beta = r.alpha;
      float* __restrict sum = sum_.data();
      const float* __restrict buf = collapsed_.data() + row * width;
      if (r.dst != prev_dst) {
        store(dst + static_cast<std::size_t>(prev_dst) * width);
        for (std::size_t x = 0; x < width; ++x) sum[x] = beta * buf[x];
        prev_dst = r.dst;
      } else {
        for (std::size_t x = 0; x < width; ++x) sum[x] += beta * buf[x];
      }
    }
    store(dst + static_cast<std::size_t>(prev_dst) * width);
  }

 private:
  struct Term {
    int dst, src;
    float alpha;
  };

  // OpenCV's computeResizeAreaTab for one axis (channels are applied by the caller).
  static std::vector<Term> table(int ssize, int dsize) {
    const double scale = 1.0 / (static_cast<double>(dsize) / ssize);
    std::vector<Term> tab;
    for (int dx = 0; dx < dsize; ++dx) {
      const double fsx1 = dx * scale;
      const double fsx2 = fsx1 + scale;
      const double cell = std::min(scale, ssize - fsx1);
      int sx1 = static_cast<int>(std::ceil(fsx1));
      int sx2 = static_cast<int>(std::floor(fsx2));
      sx2 = std::min(sx2, ssize - 1);
      sx1 = std::min(sx1, sx2);
      if (sx1 - fsx1 > 1e-3) tab.push_back({dx, sx1 - 1, static_cast<float>((sx1 - fsx1) / cell)});
      for (int sx = sx1; sx < sx2; ++sx) tab.push_back({dx, sx, static_cast<float>(1.0 / cell)});
      if (fsx2 - sx2 > 1e-3)
        tab.push_back({dx, sx2, static_cast<float>(std::min(std::min(fsx2 - sx2, 1.), cell) / cell)});
    }
    return tab;
  }

  // buf[x] = ((0 + S[a]*alpha_a) + S[b]*alpha_b) + ..., per channel, as OpenCV's horizontal pass;
  // with SSE2 four x at a time (the same float operations, in the same order).
  void collapse(const uint8_t* s, float* __restrict buf) {
    const std::size_t width = sum_.size();
    const auto terms = static_cast<std::size_t>(terms_);
    const int* __restrict src = col_src_.data();
    const float* __restrict alpha = col_alpha_.data();
    std::size_t x = 0;
#if defined(__SSE2__)
    for (; x + 4 <= width; x += 4) {
      __m128 acc = _mm_setzero_ps();
      for (std::size_t k = 0; k < terms; ++k) {
        const int* si = src + k * width + x;
        const __m128i v = _mm_setr_epi32(s[si[0]], s[si[1]], s[si[2]], s[si[3]]);
        acc = _mm_add_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(v), _mm_loadu_ps(alpha + k * width + x)));
      }
      _mm_storeu_ps(buf + x, acc);
    }
#endif
    for (; x < width; ++x) {
      float acc = 0.0f;
      for (std::size_t k = 0; k < terms; ++k)
        acc += static_cast<float>(s[src[k * width + x]]) * alpha[k * width + x];
      buf[x] = acc;
    }
  }

  // OpenCV's saturate_cast<uchar>(float): cvRound (half to even, the default rounding mode),
  // then clamp to [0, 255]. SSE2's cvtps2dq rounds the same way and the packs saturate.
  void store(uint8_t* d) const {
    const std::size_t n = sum_.size();
    std::size_t x = 0;
#if defined(__SSE2__)
    for (; x + 4 <= n; x += 4) {
      const __m128i i32 = _mm_cvtps_epi32(_mm_loadu_ps(sum_.data() + x));
      const __m128i u8 = _mm_packus_epi16(_mm_packs_epi32(i32, i32), _mm_setzero_si128());
      const int four = _mm_cvtsi128_si32(u8);
      std::memcpy(d + x, &four, 4);
    }
#endif
    for (; x < n; ++x) d[x] = static_cast<uint8_t>(std::clamp<long>(std::lrint(sum_[x]), 0, 255));
  }

  int dst_h_ = 0, dst_w_ = 0, cn_ = 1, terms_ = 0;
  std::vector<Term> columns_, rows_;
  std::vector<int> col_src_;
  std::vector<float> col_alpha_;
  std::vector<float> collapsed_, sum_;  // collapsed_: src_h rows of dst_w * channels
};

}  // namespace aiopool::atari
