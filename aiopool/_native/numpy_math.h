// numpy's own CPU-dispatched kernels, for the arithmetic the reference envs do through numpy.
//
// A reference env that calls np.sin / np.cos (np.exp / np.log: the Control Suite's rewards) on
// a float64 or float32 value runs numpy's ufunc
// inner loop for this CPU (libm on X86_V2/V3; SVML on AVX-512 for float64; numpy's own FMA
// polynomial for float32), and np.linalg.norm(v) is sqrt(0.0 + cblas_ddot(v, v)) in the OpenBLAS
// numpy ships, whose kernel OpenBLAS picks per CPU (Haswell and SkylakeX kernels round
// differently). A hand-written loop can match only one of those. So the module resolves, once at
// import, the very functions numpy itself calls (module.h: the ufunc objects' loop tables and
// the ddot symbol numpy's _multiarray_umath imports) and stores them here; envs call np_sin,
// np_cos and np_norm, which give numpy's result on any CPU and any OpenBLAS core type.
//
// Threads: the table is written on the importing thread before any pool exists and only read
// afterwards (workers call the kernels concurrently; both the loops and ddot are reentrant).
// Standalone C++ builds (benchmarks/env_limit.cc, tests/native) have no numpy: the table stays
// empty and the functions fall back to libm and a summing loop, which is numpy's result on
// X86_V2/V3 CPUs with OpenBLAS's Haswell kernel, not in general.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace aiopool::numpy_math {

// numpy's PyUFuncGenericFunction, with npy_intp spelled as intptr_t.
using UfuncLoop = void (*)(char** args, const intptr_t* dims, const intptr_t* steps, void* data);
// cblas_ddot with 64-bit (ILP64, numpy's wheels) or 32-bit integers.
using Ddot64 = double (*)(int64_t n, const double* x, int64_t incx, const double* y, int64_t incy);
using Ddot32 = double (*)(int n, const double* x, int incx, const double* y, int incy);
// cblas_dgemv (order and transpose are CBLAS's enums: ints), ILP64 or 32-bit integers.
using Dgemv64 = void (*)(int order, int trans, int64_t m, int64_t n, double alpha, const double* a,
                         int64_t lda, const double* x, int64_t incx, double beta, double* y, int64_t incy);
using Dgemv32 = void (*)(int order, int trans, int m, int n, double alpha, const double* a, int lda,
                         const double* x, int incx, double beta, double* y, int incy);
// cblas_dgemm, ILP64 or 32-bit integers.
using Dgemm64 = void (*)(int order, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                         const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
                         int64_t ldc);
using Dgemm32 = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                         const double* a, int lda, const double* b, int ldb, double beta, double* c, int ldc);

struct Loop {
  UfuncLoop fn = nullptr;
  void* data = nullptr;
};

struct Kernels {
  Loop sin_f64, cos_f64, sin_f32, cos_f32, exp_f64, log_f64, log1p_f64, arcsinh_f64, tanh_f64, arctan2_f64;
  Ddot64 ddot64 = nullptr;
  Ddot32 ddot32 = nullptr;
  Dgemv64 dgemv64 = nullptr;
  Dgemv32 dgemv32 = nullptr;
  Dgemm64 dgemm64 = nullptr;
  Dgemm32 dgemm32 = nullptr;
};

inline Kernels& kernels() {
  static Kernels k;
  return k;
}

template <class T>
T call_unary(const Loop& loop, T x) {
  T out;
  char* args[2] = {reinterpret_cast<char*>(&x), reinterpret_cast<char*>(&out)};
  const intptr_t dims[1] = {1};
  const intptr_t steps[2] = {sizeof(T), sizeof(T)};
  loop.fn(args, dims, steps, loop.data);
  return out;
}

// np.sin / np.cos of a numpy float64 or float32 (a scalar or an array element).
inline double np_sin(double x) {
  const Loop& l = kernels().sin_f64;
  return l.fn ? call_unary(l, x) : std::sin(x);
}
inline double np_cos(double x) {
  const Loop& l = kernels().cos_f64;
  return l.fn ? call_unary(l, x) : std::cos(x);
}
inline float np_sin(float x) {
  const Loop& l = kernels().sin_f32;
  return l.fn ? call_unary(l, x) : std::sin(x);
}
inline float np_cos(float x) {
  const Loop& l = kernels().cos_f32;
  return l.fn ? call_unary(l, x) : std::cos(x);
}

// np.sum / np.add.reduce of a contiguous array: numpy's pairwise summation (8 accumulators,
// blocks of 128), in the array's own dtype.
template <class T>
T pairwise_sum(const T* a, std::size_t n) {
  if (n < 8) {
    T res = 0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (std::size_t j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (std::size_t j = 0; j < 8; ++j) r[j] += a[i + j];
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// `x ** 2` on a numpy float64 scalar is libm pow; an opaque exponent keeps the compiler from
// rewriting it as x * x (they differ in the last bit in rare cases). numpy squares the elements
// of an array (`a ** 2` is np.square): x * x.
inline double pow2(double x) {
  double y = 2.0;
  asm("" : "+x"(y));
  return std::pow(x, y);
}

// np.exp / np.log / np.log1p / np.arcsinh / np.tanh of a numpy float64 (AVX-512 CPUs take numpy's own
// SIMD kernels).
inline double np_exp(double x) {
  const Loop& l = kernels().exp_f64;
  return l.fn ? call_unary(l, x) : std::exp(x);
}
inline double np_log(double x) {
  const Loop& l = kernels().log_f64;
  return l.fn ? call_unary(l, x) : std::log(x);
}
inline double np_log1p(double x) {
  const Loop& l = kernels().log1p_f64;
  return l.fn ? call_unary(l, x) : std::log1p(x);
}
inline double np_arcsinh(double x) {
  const Loop& l = kernels().arcsinh_f64;
  return l.fn ? call_unary(l, x) : std::asinh(x);
}
inline double np_tanh(double x) {
  const Loop& l = kernels().tanh_f64;
  return l.fn ? call_unary(l, x) : std::tanh(x);
}

// np.arctan2(y, x) of two numpy float64 values (a binary ufunc loop: y, x, out).
inline double np_arctan2(double y, double x) {
  const Loop& l = kernels().arctan2_f64;
  if (!l.fn) return std::atan2(y, x);
  double out;
  char* args[3] = {reinterpret_cast<char*>(&y), reinterpret_cast<char*>(&x), reinterpret_cast<char*>(&out)};
  const intptr_t dims[1] = {1};
  const intptr_t steps[3] = {sizeof(double), sizeof(double), sizeof(double)};
  l.fn(args, dims, steps, l.data);
  return out;
}

// np.dot(a, b) of two contiguous float64 vectors, as numpy's DOUBLE_dot: 0.0 + cblas_ddot.
inline double np_dot(const double* a, const double* b, std::size_t n) {
  const Kernels& k = kernels();
  double sum = 0.0;
  if (k.ddot64 != nullptr) return sum + k.ddot64(static_cast<int64_t>(n), a, 1, b, 1);
  if (k.ddot32 != nullptr) return sum + k.ddot32(static_cast<int>(n), a, 1, b, 1);
  for (std::size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// v.dot(m) of a float64 vector v (rows) and a C-contiguous rows x cols matrix m, as numpy
// computes a vector-matrix product: cblas_dgemv(RowMajor, Trans, rows, cols, 1, m, cols, v, 1,
// 0, out, 1) in numpy's BLAS.
inline void np_vecmat(const double* v, const double* m, int rows, int cols, double* out) {
  constexpr int kRowMajor = 101, kTrans = 112;  // CBLAS_ORDER, CBLAS_TRANSPOSE
  const Kernels& k = kernels();
  if (k.dgemv64 != nullptr) return k.dgemv64(kRowMajor, kTrans, rows, cols, 1.0, m, cols, v, 1, 0.0, out, 1);
  if (k.dgemv32 != nullptr) return k.dgemv32(kRowMajor, kTrans, rows, cols, 1.0, m, cols, v, 1, 0.0, out, 1);
  for (int j = 0; j < cols; ++j) {
    double sum = 0.0;
    for (int i = 0; i < rows; ++i) sum += v[i] * m[i * cols + j];
    out[j] = sum;
  }
}

// a.dot(b) of two C-contiguous float64 matrices, rows x inner and inner x cols, as numpy computes
// a matrix product (cblas_matrixproduct): cblas_dgemm(RowMajor, NoTrans, NoTrans, rows, cols,
// inner, 1, a, inner, b, cols, 0, out, cols) in numpy's BLAS.
inline void np_matmul(const double* a, const double* b, int rows, int inner, int cols, double* out) {
  constexpr int kRowMajor = 101, kNoTrans = 111;  // CBLAS_ORDER, CBLAS_TRANSPOSE
  const Kernels& k = kernels();
  if (k.dgemm64 != nullptr)
    return k.dgemm64(kRowMajor, kNoTrans, kNoTrans, rows, cols, inner, 1.0, a, inner, b, cols, 0.0, out,
                     cols);
  if (k.dgemm32 != nullptr)
    return k.dgemm32(kRowMajor, kNoTrans, kNoTrans, rows, cols, inner, 1.0, a, inner, b, cols, 0.0, out,
                     cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      double sum = 0.0;
      for (int l = 0; l < inner; ++l) sum += a[i * inner + l] * b[l * cols + j];
      out[i * cols + j] = sum;
    }
}

// np.linalg.norm(v) (ord None or 2) of a contiguous float64 vector: sqrt(v.dot(v)).
inline double np_norm(const double* v, std::size_t n) { return std::sqrt(np_dot(v, v, n)); }

}  // namespace aiopool::numpy_math

namespace aiopool {
using numpy_math::np_arcsinh;
using numpy_math::np_arctan2;
using numpy_math::np_cos;
using numpy_math::np_dot;
using numpy_math::np_exp;
using numpy_math::np_log;
using numpy_math::np_log1p;
using numpy_math::np_matmul;
using numpy_math::np_norm;
using numpy_math::np_sin;
using numpy_math::np_tanh;
using numpy_math::np_vecmat;
using numpy_math::pairwise_sum;
using numpy_math::pow2;
}  // namespace aiopool
