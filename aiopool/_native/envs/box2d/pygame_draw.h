#pragma once
// Bit-exact copies of the pygame-ce 2.5.8 drawing routines gymnasium's CarRacing uses, on an RGB
// surface laid out like pygame.Surface((w, h)) (32-bit XRGB8888: the X byte never reaches RGB).
// Sources (pygame-ce tag 2.5.8, src_c/): gfxdraw.c + SDL_gfx/SDL_gfxPrimitives.c (gfxdraw.*),
// draw.c + base.c (draw.*), math.c (Vector2.rotate_rad), transform.c + simd_transform_sse2.c
// (transform.flip, transform.smoothscale), font.c + SDL_ttf 2.24.0's SDL_ttf.c (Font.render,
// shaded) and rect_impl.h (Rect.center). Integer overflow in the C code (int32, Sint16, Uint16,
// Uint32 lanes) is reproduced as two's-complement wrap-around, as the compiled code behaves.
#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace aiopool::pygame_draw {

struct Rgb {
  uint8_t r, g, b;
};

// pygame.Surface((w, h)): starts black; px is row-major RGB, y down.
struct Surface {
  int w = 0, h = 0;
  std::vector<uint8_t> px;
  // Row y is stored at row h - 1 - y: drawing then pygame.transform.flip(surf, False, True)
  // in one pass (a flip only moves pixels; each one is computed as without it).
  bool flipped = false;
  Surface() = default;
  Surface(int w_, int h_)
      : w(w_), h(h_), px(static_cast<std::size_t>(w_) * static_cast<std::size_t>(h_) * 3) {}
  std::size_t offset(int x, int y) const {
    const std::size_t row = static_cast<std::size_t>(flipped ? h - 1 - y : y);
    return (row * static_cast<std::size_t>(w) + static_cast<std::size_t>(x)) * 3;
  }
  uint8_t* at(int x, int y) { return px.data() + offset(x, y); }
  const uint8_t* at(int x, int y) const { return px.data() + offset(x, y); }
  void set(int x, int y, Rgb c) {
    uint8_t* p = at(x, y);
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  // Pixels a..b (inclusive, inside the surface) of row y set to c: the spans every fill draws.
  void fill(int y, int a, int b, Rgb c) {
    uint8_t* p = at(a, y);
    uint8_t* const end = p + static_cast<std::size_t>(b - a + 1) * 3;
    if (c.r == c.g && c.g == c.b) {
      std::memset(p, c.r, static_cast<std::size_t>(end - p));
      return;
    }
    for (; p != end; p += 3) p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
};

namespace detail {

// Two's-complement int32 arithmetic (the C code's int overflow).
inline int32_t wrap32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}
inline int16_t wrap16(int64_t v) {
  return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint64_t>(v)));
}

// C's (int)double on x86-64 (cvttsd2si): truncation, INT_MIN when out of range or NaN.
inline int int_from_double(double v) {
  return (v > -2147483649.0 && v < 2147483648.0) ? static_cast<int>(v) : INT_MIN;
}
// C's (int)float on x86-64 (cvttss2si).
inline int int_from_float(float v) {
  return (v > -2147483904.0f && v < 2147483648.0f) ? static_cast<int>(v) : INT_MIN;
}

// gfxdraw.c Sint16FromObj for a Python float: int(v) (PyNumber_Long), then (Sint16). Python raises
// for NaN/inf (and above 2^63); those give 0 here.
inline int16_t sint16_from_double(double v) {
  if (!std::isfinite(v)) return 0;
  const double m = std::fmod(std::trunc(v), 65536.0);
  return wrap16(static_cast<int64_t>(m));
}

// ---- SDL_gfxPrimitives.c, for a 32-bit XRGB8888 surface, clip rect = whole surface ----

// _putPixelAlpha, DEFAULT_ALPHA_PIXEL_ROUTINE, case 4 (Uint32 arithmetic with its wrap-around).
inline void gfx_put_pixel_alpha(Surface& s, int x, int y, Rgb c, uint32_t alpha) {
  if (x < 0 || x > s.w - 1 || y < 0 || y > s.h - 1) return;
  uint8_t* p = s.at(x, y);
  if (alpha == 255) {
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
    return;
  }
  const uint8_t src[3] = {c.r, c.g, c.b};
  for (int k = 0; k < 3; ++k) {
    const uint32_t shift = 16u - 8u * static_cast<uint32_t>(k), mask = 0xffu << shift;
    const uint32_t dc = static_cast<uint32_t>(p[k]) << shift, cc = static_cast<uint32_t>(src[k]) << shift;
    const uint32_t v = (dc + ((((cc - dc) >> shift) * alpha >> 8) << shift)) & mask;
    p[k] = static_cast<uint8_t>(v >> shift);
  }
}

// pixelColorWeightNolock with an opaque colour: alpha = (255 * weight) >> 8.
inline void gfx_pixel_weight(Surface& s, int16_t x, int16_t y, Rgb c, uint32_t weight) {
  gfx_put_pixel_alpha(s, x, y, c, (255u * weight) >> 8);
}

// hlineColor, opaque colour.
inline void gfx_hline(Surface& s, int16_t x1, int16_t x2, int16_t y, Rgb c) {
  if (x1 > x2) std::swap(x1, x2);
  if (x2 < 0 || x1 > s.w - 1 || y < 0 || y > s.h - 1) return;
  s.fill(y, std::max<int>(x1, 0), std::min<int>(x2, s.w - 1), c);
}

// vlineColor, opaque colour.
inline void gfx_vline(Surface& s, int16_t x, int16_t y1, int16_t y2, Rgb c) {
  if (y1 > y2) std::swap(y1, y2);
  if (x < 0 || x > s.w - 1 || y2 < 0 || y1 > s.h - 1) return;
  const int a = std::max<int>(y1, 0), b = std::min<int>(y2, s.h - 1);
  for (int y = a; y <= b; ++y) s.set(x, y, c);
}

// _clipEncode / _clipLine (Cohen-Sutherland in float, results cast to Sint16).
inline int gfx_clip_encode(int x, int y, int left, int top, int right, int bottom) {
  int code = 0;
  if (x < left)
    code |= 1;
  else if (x > right)
    code |= 2;
  if (y < top)
    code |= 8;
  else if (y > bottom)
    code |= 4;
  return code;
}
inline bool gfx_clip_line(const Surface& s, int16_t& x1, int16_t& y1, int16_t& x2, int16_t& y2) {
  const int left = 0, right = s.w - 1, top = 0, bottom = s.h - 1;
  for (int guard = 0; guard < 1000; ++guard) {
    int code1 = gfx_clip_encode(x1, y1, left, top, right, bottom);
    int code2 = gfx_clip_encode(x2, y2, left, top, right, bottom);
    if (!(code1 | code2)) return true;
    if (code1 & code2) return false;
    if (!code1) {
      std::swap(x1, x2);
      std::swap(y1, y2);
      std::swap(code1, code2);
    }
    const float m = (x2 != x1) ? static_cast<float>(y2 - y1) / static_cast<float>(x2 - x1) : 1.0f;
    if (code1 & 1) {
      y1 = wrap16(y1 + wrap16(int_from_float(static_cast<float>(left - x1) * m)));
      x1 = static_cast<int16_t>(left);
    } else if (code1 & 2) {
      y1 = wrap16(y1 + wrap16(int_from_float(static_cast<float>(right - x1) * m)));
      x1 = static_cast<int16_t>(right);
    } else if (code1 & 4) {
      if (x2 != x1) x1 = wrap16(x1 + wrap16(int_from_float(static_cast<float>(bottom - y1) / m)));
      y1 = static_cast<int16_t>(bottom);
    } else if (code1 & 8) {
      if (x2 != x1) x1 = wrap16(x1 + wrap16(int_from_float(static_cast<float>(top - y1) / m)));
      y1 = static_cast<int16_t>(top);
    }
  }
  return false;
}

// _aalineColor(dst, x1, y1, x2, y2, color, draw_endpoint = 0), opaque colour (Wu's algorithm).
inline void gfx_aaline_no_endpoint(Surface& s, int16_t x1, int16_t y1, int16_t x2, int16_t y2, Rgb c) {
  if (!gfx_clip_line(s, x1, y1, x2, y2)) return;
  int32_t xx0 = x1, yy0 = y1, xx1 = x2, yy1 = y2;
  if (yy0 > yy1) {
    std::swap(yy0, yy1);
    std::swap(xx0, xx1);
  }
  int dx = xx1 - xx0, dy = yy1 - yy0;
  if (dx == 0) {
    if (dy > 0)
      gfx_vline(s, x1, wrap16(yy0), wrap16(yy0 + dy), c);
    else
      gfx_put_pixel_alpha(s, x1, y1, c, 255);
    return;
  }
  if (dy == 0) {
    gfx_hline(s, wrap16(xx0), wrap16(xx0 + dx), y1, c);
    return;
  }
  int xdir = 1;
  if (dx < 0) {
    xdir = -1;
    dx = -dx;
  }
  uint32_t erracc = 0;
  gfx_put_pixel_alpha(s, x1, y1, c, 255);
  if (dy > dx) {
    const uint32_t erradj = static_cast<uint32_t>((dx << 16) / dy) << 16;
    int x0pxdir = xx0 + xdir;
    while (--dy) {
      const uint32_t tmp = erracc;
      erracc += erradj;
      if (erracc <= tmp) {
        xx0 = x0pxdir;
        x0pxdir += xdir;
      }
      yy0++;
      const uint32_t wgt = (erracc >> 24) & 255;
      gfx_pixel_weight(s, wrap16(xx0), wrap16(yy0), c, 255 - wgt);
      gfx_pixel_weight(s, wrap16(x0pxdir), wrap16(yy0), c, wgt);
    }
  } else {
    const uint32_t erradj = static_cast<uint32_t>((dy << 16) / dx) << 16;
    int y0p1 = yy0 + 1;
    while (--dx) {
      const uint32_t tmp = erracc;
      erracc += erradj;
      if (erracc <= tmp) {
        yy0 = y0p1;
        y0p1++;
      }
      xx0 += xdir;
      const uint32_t wgt = (erracc >> 24) & 255;
      gfx_pixel_weight(s, wrap16(xx0), wrap16(yy0), c, 255 - wgt);
      gfx_pixel_weight(s, wrap16(xx0), wrap16(y0p1), c, wgt);
    }
  }
}

// qsort(v, n, sizeof(int), cmp) with the C comparators `return a - b;` (int overflow included, so
// the order can be inconsistent): glibc's qsort, a top-down merge sort (msort.c msort_with_tmp).
inline void sort_ints_c(std::vector<int32_t>& v, std::size_t n) {
  std::array<int32_t, 16> small;  // a scanline crosses a few edges: no allocation per scanline
  std::vector<int32_t> large(n > small.size() ? n : 0);
  int32_t* const tmp = n > small.size() ? large.data() : small.data();
  const auto cmp = [](int32_t a, int32_t b) { return wrap32(static_cast<int64_t>(a) - b); };
  const auto msort = [&](const auto& self, int32_t* b, std::size_t len) -> void {
    if (len <= 1) return;
    std::size_t n1 = len / 2, n2 = len - n1;
    int32_t *b1 = b, *b2 = b + n1, *t = tmp;
    self(self, b1, n1);
    self(self, b2, n2);
    while (n1 > 0 && n2 > 0) {
      if (cmp(*b1, *b2) <= 0)
        *t++ = *b1++, --n1;
      else
        *t++ = *b2++, --n2;
    }
    while (n1 > 0) *t++ = *b1++, --n1;
    std::copy(tmp, t, b);
  };
  msort(msort, v.data(), n);
}

inline void gfx_points(const std::vector<std::array<double, 2>>& pts, std::vector<int16_t>& vx,
                       std::vector<int16_t>& vy) {
  vx.resize(pts.size());
  vy.resize(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    vx[i] = sint16_from_double(pts[i][0]);
    vy[i] = sint16_from_double(pts[i][1]);
  }
}

// ---- draw.c (pygame.draw), clip rect = whole surface ----

// drawhorzlineclipbounding
inline void draw_hline_clip(Surface& s, Rgb c, int x1, int y, int x2) {
  if (y < 0 || y >= s.h) return;
  if (x2 < x1) std::swap(x1, x2);
  x1 = std::max(x1, 0);
  x2 = std::min(x2, s.w - 1);
  if (x2 < 0 || x1 >= s.w || x1 > x2) return;
  s.fill(y, x1, x2, c);
}

// draw_filltri (3 points)
inline void draw_filltri(Surface& s, const int* xs, const int* ys, Rgb c) {
  int p0x = xs[0], p1x = xs[1], p2x = xs[2], p0y = ys[0], p1y = ys[1], p2y = ys[2];
  if (p1y < p0y) std::swap(p1x, p0x), std::swap(p1y, p0y);
  if (p2y < p1y) {
    std::swap(p1x, p2x), std::swap(p1y, p2y);
    if (p1y < p0y) std::swap(p1x, p0x), std::swap(p1y, p0y);
  }
  if (p0y == p1y && p1y == p2y && p0x == p1x && p1x != p2x) std::swap(p1x, p2x), std::swap(p1y, p2y);
  const auto slope = [](int num, int den) {
    return static_cast<float>(static_cast<double>(num) / (static_cast<double>(den) + 1e-17));
  };
  const float d1 = slope(wrap32(static_cast<int64_t>(p2x) - p0x), wrap32(static_cast<int64_t>(p2y) - p0y));
  const float d2 = slope(wrap32(static_cast<int64_t>(p1x) - p0x), wrap32(static_cast<int64_t>(p1y) - p0y));
  const float d3 = slope(wrap32(static_cast<int64_t>(p2x) - p1x), wrap32(static_cast<int64_t>(p2y) - p1y));
  const int64_t ylo = std::max<int64_t>(p0y, 0), yhi = std::min<int64_t>(p2y, s.h - 1);
  for (int64_t yy = ylo; yy <= yhi; ++yy) {
    const int y = static_cast<int>(yy);
    const int x1 =
        wrap32(p0x + static_cast<int64_t>(int_from_float(static_cast<float>(wrap32(yy - p0y)) * d1)));
    const int x2 =
        y < p1y
            ? wrap32(p0x + static_cast<int64_t>(int_from_float(static_cast<float>(wrap32(yy - p0y)) * d2)))
            : wrap32(p1x + static_cast<int64_t>(int_from_float(static_cast<float>(wrap32(yy - p1y)) * d3)));
    draw_hline_clip(s, c, x1, y, x2);
  }
}

// draw_fillpoly (4+ points)
inline void draw_fillpoly(Surface& s, const std::vector<int>& px, const std::vector<int>& py, Rgb c) {
  const std::size_t n = px.size();
  const int miny = *std::min_element(py.begin(), py.end()), maxy = *std::max_element(py.begin(), py.end());
  if (miny == maxy) {
    draw_hline_clip(s, c, *std::min_element(px.begin(), px.end()), miny,
                    *std::max_element(px.begin(), px.end()));
    return;
  }
  std::vector<int32_t> xi(n + 1);
  const int64_t ylo = std::max<int64_t>(miny, 0), yhi = std::min<int64_t>(maxy, s.h - 1);
  for (int64_t yy = ylo; yy <= yhi; ++yy) {
    const int y = static_cast<int>(yy);
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t ip = i ? i - 1 : n - 1;
      int y1 = py[ip], y2 = py[i], x1, x2;
      if (y1 < y2) {
        x1 = px[ip], x2 = px[i];
      } else if (y1 > y2) {
        y2 = py[ip], y1 = py[i], x2 = px[ip], x1 = px[i];
      } else {
        continue;
      }
      if ((y >= y1 && y < y2) || (y == maxy && y2 == maxy)) {
        const int32_t num = wrap32(static_cast<int64_t>(wrap32(static_cast<int64_t>(y) - y1)) *
                                   wrap32(static_cast<int64_t>(x2) - x1));
        float t = static_cast<float>(num) / static_cast<float>(wrap32(static_cast<int64_t>(y2) - y1));
        t = (k % 2 == 0) ? static_cast<float>(std::floor(static_cast<double>(t)))
                         : static_cast<float>(std::ceil(static_cast<double>(t)));
        xi[k++] = wrap32(static_cast<int64_t>(int_from_float(t)) + x1);
      }
    }
    sort_ints_c(xi, k);
    for (std::size_t i = 0; i + 1 < k; i += 2) draw_hline_clip(s, c, xi[i], y, xi[i + 1]);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t ip = i ? i - 1 : n - 1;
    const int y = py[i];
    if (miny < y && py[ip] == y && y < maxy) draw_hline_clip(s, c, px[i], y, px[ip]);
  }
}

// draw_line (width 1, Bresenham)
inline void draw_line1(Surface& s, int x1, int y1, int x2, int y2, Rgb c) {
  const auto put = [&](int x, int y) {
    if (x >= 0 && x < s.w && y >= 0 && y < s.h) s.set(x, y, c);
  };
  if (x1 == x2 && y1 == y2) return put(x1, y1);
  if (y1 == y2) {
    const int d = x1 < x2 ? 1 : -1;
    for (int k = 0; k <= std::abs(x1 - x2); ++k) put(x1 + d * k, y1);
    return;
  }
  if (x1 == x2) {
    const int d = y1 < y2 ? 1 : -1;
    for (int k = 0; k <= std::abs(y1 - y2); ++k) put(x1, y1 + d * k);
    return;
  }
  const int dx = std::abs(x2 - x1), sx = x1 < x2 ? 1 : -1, dy = std::abs(y2 - y1), sy = y1 < y2 ? 1 : -1;
  int err = (dx > dy ? dx : -dy) / 2;
  while (x1 != x2 || y1 != y2) {
    put(x1, y1);
    const int e2 = err;
    if (e2 > -dx) err -= dy, x1 += sx;
    if (e2 < dy) err += dx, y1 += sy;
  }
  put(x2, y2);
}

// draw_line_width
inline void draw_line_width(Surface& s, int x1, int y1, int x2, int y2, int width, Rgb c) {
  if (width < 1) return;
  if (width == 1) return draw_line1(s, x1, y1, x2, y2, c);
  const int end_x = s.w - 1, end_y = s.h - 1, extra = 1 - (width % 2);
  width /= 2;
  const bool xinc = std::abs(x1 - x2) <= std::abs(y1 - y2);
  {  // clip_line: reject only
    int left = std::min(x1, x2), right = std::max(x1, x2), top = std::min(y1, y2), bottom = std::max(y1, y2);
    if (xinc)
      left -= width, right += width;
    else
      top -= width, bottom += width;
    if (0 > right || 0 > bottom || s.w <= left || s.h <= top) return;
  }
  const auto hspan = [&](int cx, int y) {
    const int a = std::max(cx - width + extra, 0), b = std::min(end_x, cx + width);
    for (int x = a; x <= b; ++x) s.set(x, y, c);
  };
  const auto vspan = [&](int x, int cy) {
    const int a = std::max(cy - width + extra, 0), b = std::min(end_y, cy + width);
    for (int y = a; y <= b; ++y) s.set(x, y, c);
  };
  if (x1 == x2 && y1 == y2) {
    if (y1 >= 0 && y1 <= end_y) hspan(x1, y1);
    return;
  }
  const int dx = std::abs(x2 - x1), dy = std::abs(y2 - y1), sx = x2 > x1 ? 1 : -1, sy = y2 > y1 ? 1 : -1;
  int err = (dx > dy ? dx : -dy) / 2;
  if (xinc) {
    while (y1 != y2 + sy) {
      if (0 <= y1 && y1 <= end_y) hspan(x1, y1);
      const int e2 = err;
      if (e2 > -dx) err -= dy, x1 += sx;
      if (e2 < dy) err += dx, y1 += sy;
    }
  } else {
    while (x1 != x2 + sx) {
      if (0 <= x1 && x1 <= end_x) vspan(x1, y1);
      const int e2 = err;
      if (e2 > -dx) err -= dy, x1 += sx;
      if (e2 < dy) err += dx, y1 += sy;
    }
  }
}

// ---- simd_transform_sse2.c smoothscale filters, on 3 channels (each channel is independent) ----
// mulhi_epu16 / packus_epi16 / 16-bit lane wrap-around written out per lane.

inline uint16_t mulhi_u16(uint32_t a, uint32_t b) {
  return static_cast<uint16_t>(((a & 0xffffu) * (b & 0xffffu)) >> 16);
}
inline uint8_t packus16(uint16_t v) {
  const int16_t sv = static_cast<int16_t>(v);
  return static_cast<uint8_t>(sv < 0 ? 0 : (sv > 255 ? 255 : sv));
}

// filter_shrink_X_SSE2, one row after another: src/dst hold `rows` rows of sw / dw RGB pixels.
inline void shrink_x_rows(const uint8_t* src, uint8_t* dst, int rows, int sw, int dw) {
  const int xspace = 0x04000 * sw / dw;
  const uint16_t xrecip = static_cast<uint16_t>(0x40000000 / xspace);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* sp = src + static_cast<std::size_t>(y) * sw * 3;
    uint8_t* dp = dst + static_cast<std::size_t>(y) * dw * 3;
    uint16_t acc[3] = {0, 0, 0};
    int xcounter = xspace;
    for (int x = 0; x < sw; ++x, sp += 3) {
      if (xcounter > 0x04000) {
        for (int k = 0; k < 3; ++k) acc[k] = static_cast<uint16_t>(acc[k] + sp[k]);
        xcounter -= 0x04000;
      } else {
        const int xfrac = 0x04000 - xcounter;
        for (int k = 0; k < 3; ++k) {
          const uint32_t s4 = static_cast<uint32_t>(sp[k]) << 2;
          const uint16_t d = static_cast<uint16_t>(mulhi_u16(s4, static_cast<uint32_t>(xcounter)) + acc[k]);
          acc[k] = mulhi_u16(s4, static_cast<uint32_t>(xfrac));
          *dp++ = packus16(mulhi_u16(d, xrecip));
        }
        xcounter = xspace - xfrac;
      }
    }
  }
}

#if defined(__SSE2__)
// The same filter on 8 rows at once, for speed: the rows' bytes are transposed so that each
// 16-bit lane holds one row's byte, then each source pixel takes the steps above on all 8 lanes
// (the same integer operations, so the same bytes: tests/test_parity_classic_control.py's
// CarRacing frames check it). Each step's weights depend only on the pixel's x, planned once:
// `emit_at[e]` is the source pixel that ends output pixel e.
struct ShrinkPlan {
  uint16_t recip = 0;
  std::vector<int> emit_at;
  std::vector<uint16_t> wc, wf;  // the ending pixel's weights: xcounter, xfrac

  ShrinkPlan(int sw, int dw) {
    const int xspace = 0x04000 * sw / dw;
    recip = static_cast<uint16_t>(0x40000000 / xspace);
    int xcounter = xspace;
    for (int x = 0; x < sw; ++x) {
      if (xcounter > 0x04000) {
        xcounter -= 0x04000;
        continue;
      }
      const int xfrac = 0x04000 - xcounter;
      emit_at.push_back(x);
      wc.push_back(static_cast<uint16_t>(xcounter));
      wf.push_back(static_cast<uint16_t>(xfrac));
      xcounter = xspace - xfrac;
    }
  }
};

// Rows src[0..7] (`n` bytes each, `in_stride` apart) as n vectors of 8 lanes: lane k of cols[j]
// is byte j of row k.
inline void transpose_rows8(const uint8_t* src, std::size_t n, std::size_t in_stride, __m128i* cols) {
  const __m128i zero = _mm_setzero_si128();
  for (std::size_t j = 0; j < n; j += 16) {
    __m128i r[8];
    const std::size_t m = std::min<std::size_t>(16, n - j);
    for (std::size_t k = 0; k < 8; ++k) {
      if (m == 16) {
        r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k * in_stride + j));
      } else {
        alignas(16) uint8_t tail[16] = {};
        std::memcpy(tail, src + k * in_stride + j, m);
        r[k] = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
      }
    }
    // Bytes of rows (0,1), (2,3), ... interleaved; then 4 rows; then 8 rows per byte.
    const __m128i a0 = _mm_unpacklo_epi8(r[0], r[1]), b0 = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i a1 = _mm_unpacklo_epi8(r[2], r[3]), b1 = _mm_unpackhi_epi8(r[2], r[3]);
    const __m128i a2 = _mm_unpacklo_epi8(r[4], r[5]), b2 = _mm_unpackhi_epi8(r[4], r[5]);
    const __m128i a3 = _mm_unpacklo_epi8(r[6], r[7]), b3 = _mm_unpackhi_epi8(r[6], r[7]);
    const __m128i c0 = _mm_unpacklo_epi16(a0, a1), c1 = _mm_unpackhi_epi16(a0, a1);
    const __m128i c2 = _mm_unpacklo_epi16(b0, b1), c3 = _mm_unpackhi_epi16(b0, b1);
    const __m128i d0 = _mm_unpacklo_epi16(a2, a3), d1 = _mm_unpackhi_epi16(a2, a3);
    const __m128i d2 = _mm_unpacklo_epi16(b2, b3), d3 = _mm_unpackhi_epi16(b2, b3);
    const __m128i e[8] = {_mm_unpacklo_epi32(c0, d0), _mm_unpackhi_epi32(c0, d0), _mm_unpacklo_epi32(c1, d1),
                          _mm_unpackhi_epi32(c1, d1), _mm_unpacklo_epi32(c2, d2), _mm_unpackhi_epi32(c2, d2),
                          _mm_unpacklo_epi32(c3, d3), _mm_unpackhi_epi32(c3, d3)};
    for (std::size_t q = 0; 2 * q < m; ++q) {
      cols[j + 2 * q] = _mm_unpacklo_epi8(e[q], zero);
      if (2 * q + 1 < m) cols[j + 2 * q + 1] = _mm_unpackhi_epi8(e[q], zero);
    }
  }
}

// filter_shrink_X_SSE2 on rows src[0..7] into dst[0..7].
inline void shrink_x_rows8(const uint8_t* src, uint8_t* dst, int sw, int dw, const ShrinkPlan& plan,
                           __m128i* cols) {
  const std::size_t n = static_cast<std::size_t>(sw) * 3, out_stride = static_cast<std::size_t>(dw) * 3;
  transpose_rows8(src, n, n, cols);
  const __m128i zero = _mm_setzero_si128(), recip = _mm_set1_epi16(static_cast<short>(plan.recip));
  __m128i acc[3] = {zero, zero, zero};
  const __m128i* c = cols;
  int x = 0;
  for (std::size_t e = 0; e < plan.emit_at.size(); ++e, ++x, c += 3) {
    for (const int end = plan.emit_at[e]; x < end; ++x, c += 3)
      for (int k = 0; k < 3; ++k) acc[k] = _mm_add_epi16(acc[k], c[k]);
    const __m128i wc = _mm_set1_epi16(static_cast<short>(plan.wc[e]));
    const __m128i wf = _mm_set1_epi16(static_cast<short>(plan.wf[e]));
    uint8_t* dp = dst + e * 3;
    for (int k = 0; k < 3; ++k) {
      const __m128i s4 = _mm_slli_epi16(c[k], 2);
      const __m128i d = _mm_add_epi16(_mm_mulhi_epu16(s4, wc), acc[k]);
      acc[k] = _mm_mulhi_epu16(s4, wf);
      uint64_t bytes =
          static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_packus_epi16(_mm_mulhi_epu16(d, recip), zero)));
      for (std::size_t row = 0; row < 8; ++row, bytes >>= 8)
        dp[row * out_stride + k] = static_cast<uint8_t>(bytes);
    }
  }
}
#endif

// pygame's filter_shrink_X: src/dst hold `rows` rows of sw / dw RGB pixels.
inline void shrink_x(const uint8_t* src, uint8_t* dst, int rows, int sw, int dw) {
  int y = 0;
#if defined(__SSE2__)
  if (rows >= 8) {
    const ShrinkPlan plan(sw, dw);
    struct Lanes {
      __m128i v;
    };
    thread_local std::vector<Lanes> cols;
    cols.resize(static_cast<std::size_t>(sw) * 3);
    for (; y + 8 <= rows; y += 8)
      shrink_x_rows8(src + static_cast<std::size_t>(y) * sw * 3, dst + static_cast<std::size_t>(y) * dw * 3,
                     sw, dw, plan, &cols.data()->v);
  }
#endif
  shrink_x_rows(src + static_cast<std::size_t>(y) * sw * 3, dst + static_cast<std::size_t>(y) * dw * 3,
                rows - y, sw, dw);
}

// filter_shrink_Y_SSE2: src has sh rows, dst dh rows, both `cols` RGB pixels wide.
inline void shrink_y(const uint8_t* src, uint8_t* dst, int cols, int sh, int dh) {
  const int yspace = 0x04000 * sh / dh;
  const uint16_t yrecip = static_cast<uint16_t>(static_cast<int16_t>(0x40000000 / yspace));
  const std::size_t n = static_cast<std::size_t>(cols) * 3;
  std::vector<uint16_t> acc(n, 0);
  int ycounter = yspace;
  for (int y = 0; y < sh; ++y) {
    const uint8_t* sp = src + static_cast<std::size_t>(y) * n;
    if (ycounter > 0x04000) {
      for (std::size_t i = 0; i < n; ++i) acc[i] = static_cast<uint16_t>(acc[i] + sp[i]);
      ycounter -= 0x04000;
    } else {
      const int yfrac = 0x04000 - ycounter;
      for (std::size_t i = 0; i < n; ++i) {
        const uint32_t s4 = static_cast<uint32_t>(sp[i]) << 2;
        const uint16_t d = static_cast<uint16_t>(mulhi_u16(s4, static_cast<uint32_t>(ycounter)) + acc[i]);
        acc[i] = mulhi_u16(s4, static_cast<uint32_t>(yfrac));
        *dst++ = packus16(mulhi_u16(d, yrecip));
      }
      ycounter = yspace - yfrac;
    }
  }
}

// filter_expand_X_SSE2 (8-bit weights)
inline void expand_x(const uint8_t* src, uint8_t* dst, int rows, int sw, int dw) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* row = src + static_cast<std::size_t>(y) * sw * 3;
    for (int x = 0; x < dw; ++x) {
      const int m1 = 0x100 * ((x * (sw - 1)) % dw) / dw, m0 = 0x100 - m1;
      const uint8_t* p = row + static_cast<std::size_t>(x * (sw - 1) / dw) * 3;
      for (int k = 0; k < 3; ++k) {
        const uint16_t v =
            static_cast<uint16_t>(static_cast<uint16_t>(p[k] * m0) + static_cast<uint16_t>(p[k + 3] * m1));
        *dst++ = packus16(static_cast<uint16_t>(v >> 8));
      }
    }
  }
}

// filter_expand_Y_SSE2 (8-bit weights)
inline void expand_y(const uint8_t* src, uint8_t* dst, int cols, int sh, int dh) {
  const std::size_t n = static_cast<std::size_t>(cols) * 3;
  for (int y = 0; y < dh; ++y) {
    const int m1 = 0x100 * ((y * (sh - 1)) % dh) / dh, m0 = 0x100 - m1;
    const uint8_t* r0 = src + static_cast<std::size_t>(y * (sh - 1) / dh) * n;
    const uint8_t* r1 = r0 + n;
    for (std::size_t i = 0; i < n; ++i) {
      const uint16_t v =
          static_cast<uint16_t>(static_cast<uint16_t>(r0[i] * m0) + static_cast<uint16_t>(r1[i] * m1));
      *dst++ = packus16(static_cast<uint16_t>(v >> 8));
    }
  }
}

inline uint32_t read_u32(const std::string& b, std::size_t& at) {
  if (at + 4 > b.size()) throw std::invalid_argument("pygame_draw::Glyphs: truncated table");
  const auto* p = reinterpret_cast<const unsigned char*>(b.data() + at);
  at += 4;
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace detail

// pygame.math.Vector2((x, y)).rotate_rad(angle): math.c _vector2_rotate_helper (epsilon 1e-6).
inline std::array<double, 2> rotate_rad(double x, double y, double angle) {
  constexpr double kPi = 3.14159265358979323846, kTwoPi = 2. * kPi, kHalfPi = kPi / 2.0, kEps = 1e-6;
  angle = std::fmod(angle, kTwoPi);
  if (angle < 0) angle += kTwoPi;
  if (std::fmod(angle + kEps, kHalfPi) < 2 * kEps) {
    switch (static_cast<int>((angle + kEps) / kHalfPi)) {
      case 1:
        return {-y, x};
      case 2:
        return {-x, -y};
      case 3:
        return {y, -x};
      default:
        return {x, y};  // 0 or 4
    }
  }
  const double s = std::sin(angle), c = std::cos(angle);
  return {c * x - s * y, s * x + c * y};
}

// pygame.gfxdraw.filled_polygon(surf, points, color): gfxdraw.c _gfx_filledpolygoncolor ->
// SDL_gfxPrimitives.c filledPolygonColorMT (16.16 fixed-point scanline fill).
inline void gfx_filled_polygon(Surface& s, const std::vector<std::array<double, 2>>& pts, Rgb c) {
  using detail::wrap32;
  const std::size_t n = pts.size();
  if (n < 3) return;
  thread_local std::vector<int16_t> vx, vy;  // kept: a frame fills hundreds of polygons
  detail::gfx_points(pts, vx, vy);
  int miny = vy[0], maxy = vy[0];
  for (std::size_t i = 1; i < n; ++i) {
    if (vy[i] < miny)
      miny = vy[i];
    else if (vy[i] > maxy)
      maxy = vy[i];
  }
  thread_local std::vector<int32_t> ints;
  ints.resize(n);
  const int ylo = std::max(miny, 0), yhi = std::min(maxy, s.h - 1);
  for (int y = ylo; y <= yhi; ++y) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t i1 = i ? i - 1 : n - 1, i2 = i;
      int y1 = vy[i1], y2 = vy[i2], x1, x2;
      if (y1 < y2) {
        x1 = vx[i1], x2 = vx[i2];
      } else if (y1 > y2) {
        y2 = vy[i1], y1 = vy[i2], x2 = vx[i1], x1 = vx[i2];
      } else {
        continue;
      }
      if ((y >= y1 && y < y2) || (y == maxy && y > y1 && y <= y2)) {
        const int32_t q = wrap32(static_cast<int64_t>(65536) * (y - y1)) / (y2 - y1);
        ints[k++] = wrap32(static_cast<int64_t>(wrap32(static_cast<int64_t>(q) * (x2 - x1))) +
                           wrap32(static_cast<int64_t>(65536) * x1));
      }
    }
    detail::sort_ints_c(ints, k);
    for (std::size_t i = 0; i + 1 < k; i += 2) {
      int32_t xa = wrap32(static_cast<int64_t>(ints[i]) + 1),
              xb = wrap32(static_cast<int64_t>(ints[i + 1]) - 1);
      xa = (xa >> 16) + ((xa & 32768) >> 15);
      xb = (xb >> 16) + ((xb & 32768) >> 15);
      detail::gfx_hline(s, detail::wrap16(xa), detail::wrap16(xb), static_cast<int16_t>(y), c);
    }
  }
}

// pygame.gfxdraw.aapolygon(surf, points, color): gfxdraw.c _gfx_aapolygoncolor -> SDL_gfxPrimitives.c
// aapolygonColor (each edge by _aalineColor without its end point, the closing edge last).
inline void gfx_aapolygon(Surface& s, const std::vector<std::array<double, 2>>& pts, Rgb c) {
  const std::size_t n = pts.size();
  if (n < 3) return;
  thread_local std::vector<int16_t> vx, vy;
  detail::gfx_points(pts, vx, vy);
  for (std::size_t i = 1; i < n; ++i)
    detail::gfx_aaline_no_endpoint(s, vx[i - 1], vy[i - 1], vx[i], vy[i], c);
  detail::gfx_aaline_no_endpoint(s, vx[n - 1], vy[n - 1], vx[0], vy[0], c);
}

// pygame.draw.polygon(surf, color, points) (width 0): draw.c polygon -> draw_filltri (3 points) or
// draw_fillpoly; float coordinates become ints by base.c's (int) cast.
inline void draw_polygon(Surface& s, const std::vector<std::array<double, 2>>& pts, Rgb c) {
  const std::size_t n = pts.size();
  if (n < 3) return;
  std::vector<int> px(n), py(n);
  for (std::size_t i = 0; i < n; ++i)
    px[i] = detail::int_from_double(pts[i][0]), py[i] = detail::int_from_double(pts[i][1]);
  if (n == 3)
    detail::draw_filltri(s, px.data(), py.data(), c);
  else
    detail::draw_fillpoly(s, px, py, c);
}

// pygame.draw.lines(surf, color, False, points, width): draw.c lines -> draw_line_width per segment.
inline void draw_lines(Surface& s, const std::vector<std::array<double, 2>>& pts, Rgb c, int width) {
  if (pts.size() < 2 || width < 1) return;
  for (std::size_t i = 1; i < pts.size(); ++i)
    detail::draw_line_width(s, detail::int_from_double(pts[i - 1][0]), detail::int_from_double(pts[i - 1][1]),
                            detail::int_from_double(pts[i][0]), detail::int_from_double(pts[i][1]), width, c);
}

// pygame.transform.smoothscale(src, (dst.w, dst.h)) into dst: transform.c scalesmooth with the
// SSE2 filters of simd_transform_sse2.c, the backend pygame-ce picks on every x86-64 CPU (its
// plain-C "GENERIC" filters round differently).
inline void smoothscale(const Surface& src, Surface& dst) {
  const int sw = src.w, sh = src.h, dw = dst.w, dh = dst.h;
  if (dw <= 0 || dh <= 0) return;
  if (sw == dw && sh == dh) {
    dst.px = src.px;
    return;
  }
  std::vector<uint8_t> tmp;
  const uint8_t* rows = src.px.data();  // the X pass's output: sh rows of dw pixels
  if (dw != sw) {
    std::vector<uint8_t>& out = (sh == dh) ? dst.px : tmp;
    out.assign(static_cast<std::size_t>(dw) * static_cast<std::size_t>(sh) * 3, 0);
    if (dw < sw)
      detail::shrink_x(src.px.data(), out.data(), sh, sw, dw);
    else
      detail::expand_x(src.px.data(), out.data(), sh, sw, dw);
    rows = out.data();
  }
  if (dh < sh)
    detail::shrink_y(rows, dst.px.data(), dw, sh, dh);
  else if (dh > sh)
    detail::expand_y(rows, dst.px.data(), dw, sh, dh);
}

// The glyphs of pygame.font.Font(path, size).render(text, True, fg, bg) (SDL_ttf 2.24.0,
// TTF_RenderUTF8_Shaded_Wrapped with HarfBuzz): per character its 8-bit palette-index bitmap,
// left bearing and advance (26.6), per character pair the kerning (26.6), and the palette.
// Built by glyphs.py's build_glyph_table() from the installed pygame's font.
struct Glyphs {
  struct Glyph {
    int advance = 0;  // 26.6
    int left = 0;     // bitmap's first column relative to the pen position
    int width = 0;    // bitmap columns; rows = height
    std::vector<uint8_t> bitmap;
  };
  int height = 0;  // the rendered surface's height
  std::array<Rgb, 256> palette{};
  std::array<int, 256> slot{};  // character -> index into glyphs, -1 if absent
  std::vector<Glyph> glyphs;
  std::vector<int> kern;  // 26.6, [first slot * glyphs.size() + second slot]

  Glyphs() { slot.fill(-1); }
  // Table layout (little-endian uint32/int32): "PGG1", height, count, 256 x RGB bytes, then per
  // glyph: character, advance, left, width, width*height bitmap bytes (row-major); then
  // count*count kerning values.
  explicit Glyphs(const std::string& table) : Glyphs() {
    std::size_t at = 0;
    if (table.compare(0, 4, "PGG1") != 0) throw std::invalid_argument("pygame_draw::Glyphs: bad magic");
    at = 4;
    height = static_cast<int>(detail::read_u32(table, at));
    const uint32_t count = detail::read_u32(table, at);
    if (at + 768 > table.size()) throw std::invalid_argument("pygame_draw::Glyphs: truncated table");
    for (auto& p : palette) {
      p = Rgb{static_cast<uint8_t>(table[at]), static_cast<uint8_t>(table[at + 1]),
              static_cast<uint8_t>(table[at + 2])};
      at += 3;
    }
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t ch = detail::read_u32(table, at);
      Glyph g;
      g.advance = static_cast<int32_t>(detail::read_u32(table, at));
      g.left = static_cast<int32_t>(detail::read_u32(table, at));
      g.width = static_cast<int32_t>(detail::read_u32(table, at));
      const std::size_t size = static_cast<std::size_t>(g.width) * static_cast<std::size_t>(height);
      if (ch > 255 || g.width < 0 || at + size > table.size())
        throw std::invalid_argument("pygame_draw::Glyphs: bad glyph");
      g.bitmap.assign(table.begin() + static_cast<std::ptrdiff_t>(at),
                      table.begin() + static_cast<std::ptrdiff_t>(at + size));
      at += size;
      slot[ch] = static_cast<int>(i);
      glyphs.push_back(std::move(g));
    }
    kern.resize(static_cast<std::size_t>(count) * count);
    for (int& k : kern) k = static_cast<int32_t>(detail::read_u32(table, at));
  }

  // Font.render(text, True, fg, bg) as palette indices: a height x width image.
  std::vector<uint8_t> render(const std::string& text, int& width) const {
    const std::size_t n = text.size(), count = glyphs.size();
    std::vector<int> slots(n), pos(n);
    for (std::size_t i = 0; i < n; ++i) {
      slots[i] = slot[static_cast<unsigned char>(text[i])];
      if (slots[i] < 0) throw std::invalid_argument("pygame_draw::Glyphs: character not in table");
    }
    // TTF_Size_Internal: HarfBuzz pen positions (advance + pair kerning), bounding box in pixels.
    int x = 0, minx = 0, maxx = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Glyph& g = glyphs[static_cast<std::size_t>(slots[i])];
      pos[i] = x;
      x += g.advance;
      if (i + 1 < n)
        x += kern[static_cast<std::size_t>(slots[i]) * count + static_cast<std::size_t>(slots[i + 1])];
      const int left = (pos[i] >> 6) + g.left;
      minx = std::min(minx, left);
      maxx = std::max(maxx, left + g.width);
    }
    maxx = std::max(maxx, x >> 6);
    width = maxx - minx;
    std::vector<uint8_t> out(static_cast<std::size_t>(width) * static_cast<std::size_t>(height), 0);
    // Render_Line_Shaded: glyph bitmaps OR-ed into the 8-bit buffer.
    for (std::size_t i = 0; i < n; ++i) {
      const Glyph& g = glyphs[static_cast<std::size_t>(slots[i])];
      const int x0 = -minx + (pos[i] >> 6) + g.left;
      for (int r = 0; r < height; ++r)
        for (int c = 0; c < g.width; ++c) {
          const int xx = x0 + c;
          if (xx >= 0 && xx < width)
            out[static_cast<std::size_t>(r) * static_cast<std::size_t>(width) +
                static_cast<std::size_t>(xx)] |=
                g.bitmap[static_cast<std::size_t>(r) * static_cast<std::size_t>(g.width) +
                         static_cast<std::size_t>(c)];
        }
    }
    return out;
  }
};

// surf.blit(text_surface, rect) with rect = text_surface.get_rect(center=(center_x, center_y)),
// text_surface = Font.render(text, True, fg, bg) for the font and colours the table was built with.
// Rect.center takes (int) of each coordinate; the 8-bit surface blits as its palette colours.
inline void draw_text(Surface& s, const Glyphs& glyphs, const std::string& text, double center_x,
                      double center_y) {
  if (text.empty()) return;
  int w = 0;
  const std::vector<uint8_t> img = glyphs.render(text, w);
  const int x0 = detail::int_from_double(center_x) - w / 2,
            y0 = detail::int_from_double(center_y) - glyphs.height / 2;
  for (int r = 0; r < glyphs.height; ++r) {
    const int y = y0 + r;
    if (y < 0 || y >= s.h) continue;
    for (int c = 0; c < w; ++c) {
      const int x = x0 + c;
      if (x >= 0 && x < s.w)
        s.set(x, y,
              glyphs.palette[img[static_cast<std::size_t>(r) * static_cast<std::size_t>(w) +
                                 static_cast<std::size_t>(c)]]);
    }
  }
}

}  // namespace aiopool::pygame_draw
