// scipy.ndimage.zoom(input, factor) with its defaults (a cubic spline, order=3; mode="constant";
// prefilter=True; grid_mode=False) on a 2-D float64 array, bit for bit: quadruped-escape smooths
// its random bumps with it. The arithmetic is scipy's (ndimage's ni_splines.c and
// ni_interpolation.c, in its operation order): the prefilter is the cubic B-spline's recursive
// filter along axis 0 and then axis 1 (mirror boundaries, the gain applied first); each output
// point sums its 4x4 neighbourhood of coefficients, row weight then column weight, indices past
// an edge mirrored, points that map outside the input the constant 0.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace aiopool::dmc {

class SplineZoom {
 public:
  // The output shape scipy gives: round(n * factor) along each axis (Python's round: half to
  // even, as nearbyint in the default rounding mode).
  static int output_size(int n, double factor) { return static_cast<int>(std::nearbyint(n * factor)); }

  // zoom(input [rows x cols], factor) into out [output_size(rows) x output_size(cols)].
  static void zoom(const double* input, int rows, int cols, double factor, double* out) {
    if (rows < 1 || cols < 1) throw std::invalid_argument("zoom: an empty input");
    std::vector<double> c(input, input + static_cast<std::size_t>(rows) * cols);
    prefilter(c.data(), rows, cols, cols, 1);  // along axis 0: the columns
    prefilter(c.data(), cols, rows, 1, cols);  // then along axis 1: the rows
    const Axis r(rows, output_size(rows, factor)), k(cols, output_size(cols, factor));
    std::size_t o = 0;
    for (int i = 0; i < r.out; ++i)
      for (int j = 0; j < k.out; ++j) {
        if (r.outside[i] || k.outside[j]) {
          out[o++] = 0.0;  // cval
          continue;
        }
        double t = 0.0;
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b) {
            double coeff = c[static_cast<std::size_t>(r.index[4 * i + a]) * cols + k.index[4 * j + b]];
            coeff *= r.weight[4 * i + a];
            coeff *= k.weight[4 * j + b];
            t += coeff;
          }
        out[o++] = t;
      }
  }

 private:
  static constexpr double kPole = -0.267949192431122706472553658494127633;  // sqrt(3) - 2

  // The cubic spline's coefficients along one axis of every line, in place: `len` points
  // `step` apart, lines `line_step` apart.
  static void prefilter(double* c, int len, int lines, std::ptrdiff_t step, std::ptrdiff_t line_step) {
    if (len < 2) return;
    std::vector<double> ln(static_cast<std::size_t>(len));
    const double z = kPole;
    const double gain = (1.0 - z) * (1.0 - 1.0 / z);
    for (int l = 0; l < lines; ++l) {
      double* p = c + l * line_step;
      for (int i = 0; i < len; ++i) ln[i] = p[i * step] * gain;
      // The causal pass, started as for a mirrored line.
      const double z_n_1 = std::pow(z, static_cast<double>(len - 1));
      double z_i = z;
      ln[0] = ln[0] + z_n_1 * ln[len - 1];
      for (int i = 1; i < len - 1; ++i) {
        ln[0] += z_i * (ln[i] + z_n_1 * ln[len - 1 - i]);
        z_i *= z;
      }
      ln[0] /= 1 - z_n_1 * z_n_1;
      for (int i = 1; i < len; ++i) ln[i] += z * ln[i - 1];
      // The anticausal pass.
      ln[len - 1] = (z * ln[len - 2] + ln[len - 1]) * z / (z * z - 1);
      for (int i = len - 2; i >= 0; --i) ln[i] = z * (ln[i + 1] - ln[i]);
      for (int i = 0; i < len; ++i) p[i * step] = ln[i];
    }
  }

  // Where each output point of one axis reads the coefficients, and with which weights.
  struct Axis {
    int out;
    std::vector<int> index;      // 4 per output point
    std::vector<double> weight;  // 4 per output point
    std::vector<bool> outside;   // maps outside the input: the constant

    Axis(int len, int out_len) : out(out_len), index(4 * out_len), weight(4 * out_len), outside(out_len) {
      const double zoom = out_len > 1 ? static_cast<double>(len - 1) / static_cast<double>(out_len - 1) : 1.0;
      for (int kk = 0; kk < out_len; ++kk) {
        double cc = static_cast<double>(kk);
        cc *= zoom;
        if (cc < 0 || cc > len - 1) {  // mode "constant": outside is the constant
          outside[kk] = true;
          continue;
        }
        const long start = static_cast<long>(std::floor(cc)) - 1;
        for (int h = 0; h < 4; ++h) index[4 * kk + h] = mirror(start + h, len);
        const double x = cc - std::floor(cc);
        const double y = x, z = 1.0 - x;
        double* w = &weight[4 * kk];
        w[1] = (y * y * (y - 2.0) * 3.0 + 4.0) / 6.0;
        w[2] = (z * z * (z - 2.0) * 3.0 + 4.0) / 6.0;
        w[0] = z * z * z / 6.0;
        w[3] = 1.0;
        for (int h = 0; h < 3; ++h) w[3] -= w[h];
      }
    }

    // An index past either end, mirrored about it (the spline's boundary for mode "constant").
    static int mirror(long i, int len) {
      if (len <= 1) return 0;
      const long period = 2L * len - 2;
      if (i < 0) {
        i = period * (-i / period) + i;
        return static_cast<int>(i <= 1 - len ? i + period : -i);
      }
      if (i > len - 1) {
        i -= period * (i / period);
        return static_cast<int>(i >= len ? period - i : i);
      }
      return static_cast<int>(i);
    }
  };
};

}  // namespace aiopool::dmc
