// `aiopool._native._core`: the engine with the envs that need no simulator library (classic
// control and the Counting test env).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "envs/classic_control/acrobot.h"
#include "envs/classic_control/cartpole.h"
#include "envs/classic_control/mountain_car.h"
#include "envs/classic_control/mountain_car_continuous.h"
#include "envs/classic_control/pendulum.h"
#include "envs/testing/counting.h"
#include "module.h"

namespace {

// Sequentially consistent int64 operations on shared memory, for aiopool's worker-process
// backend (aiopool/_process): the parent and its worker processes map the same memfd, and
// Python has no atomics of its own. `addr` is an 8-byte-aligned address inside that mapping.
std::atomic_ref<int64_t> at(std::uintptr_t addr) {
  return std::atomic_ref<int64_t>(*reinterpret_cast<int64_t*>(addr));
}

// The process backend's per-batch bookkeeping on the pool's side, one call each instead of a
// dozen numpy calls (~1 µs apiece): see aiopool/_process/backend.py. Arguments are numpy arrays
// the backend made itself (C-contiguous, native byte order); anything else is a TypeError.

// `typenum` < 0: any dtype and byte order (the array is only copied bytewise).
PyArrayObject* contiguous(nb::handle h, int typenum, const char* name) {
  if (!PyArray_Check(h.ptr())) throw nb::type_error((std::string(name) + " must be a numpy array").c_str());
  auto* a = reinterpret_cast<PyArrayObject*>(h.ptr());
  if (!PyArray_IS_C_CONTIGUOUS(a) || PyArray_NDIM(a) < 1 || (typenum >= 0 && !PyArray_ISNOTSWAPPED(a)) ||
      (typenum >= 0 && !PyArray_EquivTypenums(PyArray_TYPE(a), typenum)))
    throw nb::type_error((std::string(name) + " must be C-contiguous, of the expected dtype").c_str());
  return a;
}

struct Ids {
  const int32_t* p;
  std::size_t k;
};

Ids ids_of(nb::handle h) {
  PyArrayObject* a = contiguous(h, NPY_INT32, "ids");
  if (PyArray_NDIM(a) != 1) throw nb::type_error("ids must be 1-D");
  return {static_cast<const int32_t*>(PyArray_DATA(a)), static_cast<std::size_t>(PyArray_DIM(a, 0))};
}

// (column[ids] for column in columns): new read-only C-contiguous arrays. IndexError if an id
// is out of a column's rows.
nb::object take_rows(nb::handle columns, nb::handle ids_h) {
  if (!PyTuple_Check(columns.ptr())) throw nb::type_error("columns must be a tuple of arrays");
  const Ids ids = ids_of(ids_h);
  const Py_ssize_t n = PyTuple_GET_SIZE(columns.ptr());
  nb::object out = nb::steal(PyTuple_New(n));
  if (!out.is_valid()) throw nb::python_error();
  for (Py_ssize_t c = 0; c < n; ++c) {
    PyArrayObject* col = contiguous(PyTuple_GET_ITEM(columns.ptr(), c), -1, "a column");
    PyArray_Descr* descr = PyArray_DESCR(col);
    if (PyDataType_REFCHK(descr)) throw nb::type_error("a column holds Python objects");
    const npy_intp rows = PyArray_DIM(col, 0);
    // A row's bytes from its shape, not from strides[0]: a zero-size row (a Box of shape (0,))
    // may carry any stride.
    std::size_t row_bytes = static_cast<std::size_t>(PyArray_ITEMSIZE(col));
    npy_intp dims[NPY_MAXDIMS];
    dims[0] = static_cast<npy_intp>(ids.k);
    for (int d = 1; d < PyArray_NDIM(col); ++d) {
      dims[d] = PyArray_DIM(col, d);
      row_bytes *= static_cast<std::size_t>(dims[d]);
    }
    Py_INCREF(descr);
    PyObject* arr =
        PyArray_NewFromDescr(&PyArray_Type, descr, PyArray_NDIM(col), dims, nullptr, nullptr, 0, nullptr);
    if (arr == nullptr) throw nb::python_error();
    nb::object keep = nb::steal(arr);
    auto* dst = static_cast<std::byte*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(arr)));
    const auto* src = static_cast<const std::byte*>(PyArray_DATA(col));
    for (std::size_t r = 0; r < ids.k; ++r) {
      const int32_t i = ids.p[r];
      if (i < 0 || i >= rows) throw nb::index_error("an id is out of the column's rows");
      std::memcpy(dst + r * row_bytes, src + static_cast<std::size_t>(i) * row_bytes, row_bytes);
    }
    PyArray_CLEARFLAGS(reinterpret_cast<PyArrayObject*>(arr), NPY_ARRAY_WRITEABLE);
    PyTuple_SET_ITEM(out.ptr(), c, keep.release().ptr());
  }
  return out;
}

std::uint8_t* flags_of(nb::handle h, std::size_t& n) {
  PyArrayObject* a = contiguous(h, NPY_UINT8, "flags");
  if (PyArray_NDIM(a) != 1 || !PyArray_ISWRITEABLE(a))
    throw nb::type_error("flags must be writeable and 1-D");
  n = static_cast<std::size_t>(PyArray_DIM(a, 0));
  return static_cast<std::uint8_t*>(PyArray_DATA(a));
}

// Claim envs `ids` for a command: if an id is out of range or repeated, or its flag has a bit of
// `refuse`, return -1 and change nothing (the caller then finds what to say). Else set each
// one's flag to `busy` and return the worker holding them all (worker w holds ids
// [w * per, (w + 1) * per)), or -2 if they span several.
int64_t claim(nb::handle flags_h, nb::handle ids_h, std::uint8_t refuse, std::uint8_t busy, int64_t per) {
  std::size_t n = 0;
  std::uint8_t* flags = flags_of(flags_h, n);
  const Ids ids = ids_of(ids_h);
  if (per < 1) throw nb::value_error("per must be positive");
  std::vector<std::uint8_t> before(ids.k);
  int64_t owner = ids.k ? ids.p[0] / per : -2;
  for (std::size_t r = 0; r < ids.k; ++r) {
    const int32_t i = ids.p[r];
    // a repeated id finds the flag its first occurrence just set to `busy`
    if (i < 0 || static_cast<std::size_t>(i) >= n || (flags[i] & refuse) || flags[i] == busy) {
      while (r-- > 0) flags[ids.p[r]] = before[r];
      return -1;
    }
    before[r] = flags[i];
    flags[i] = busy;
    if (i / per != owner) owner = -2;
  }
  return owner;
}

// flags[ids] &= ~bits (ids the backend checked when it claimed them)
void clear_flags(nb::handle flags_h, nb::handle ids_h, std::uint8_t bits) {
  std::size_t n = 0;
  std::uint8_t* flags = flags_of(flags_h, n);
  const Ids ids = ids_of(ids_h);
  for (std::size_t r = 0; r < ids.k; ++r)
    if (static_cast<std::size_t>(ids.p[r]) < n) flags[ids.p[r]] &= static_cast<std::uint8_t>(~bits);
}

template <typename T>
int64_t first_outside(const T* a, std::size_t rows, std::size_t d, const int64_t* low, const int64_t* high) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < d; ++j) {
      const auto v = static_cast<int64_t>(a[r * d + j]);
      if (v < low[j] || v > high[j]) return static_cast<int64_t>(r * d + j);
    }
  return -1;
}

// The flat index of the first element of integer `actions` (rows of d elements) outside the
// inclusive [low[j], high[j]] of its position j, or -1; -3 for a dtype it does not handle
// (the caller checks in numpy).
int64_t first_out_of_bounds(nb::handle actions_h, nb::handle low_h, nb::handle high_h) {
  PyArrayObject* a = contiguous(actions_h, -1, "actions");
  if (!PyArray_ISNOTSWAPPED(a)) return -3;
  PyArrayObject* lo = contiguous(low_h, NPY_INT64, "low");
  PyArrayObject* hi = contiguous(high_h, NPY_INT64, "high");
  const auto d = static_cast<std::size_t>(PyArray_SIZE(lo));
  const auto size = static_cast<std::size_t>(PyArray_SIZE(a));
  if (d == 0 || static_cast<std::size_t>(PyArray_SIZE(hi)) != d || size % d)
    throw nb::value_error("actions do not match the bounds");
  const auto* l = static_cast<const int64_t*>(PyArray_DATA(lo));
  const auto* h = static_cast<const int64_t*>(PyArray_DATA(hi));
  const void* p = PyArray_DATA(a);
  const std::size_t rows = size / d;
  switch (PyArray_TYPE(a)) {
    case NPY_BYTE:
      return first_outside(static_cast<const int8_t*>(p), rows, d, l, h);
    case NPY_UBYTE:
      return first_outside(static_cast<const uint8_t*>(p), rows, d, l, h);
    case NPY_SHORT:
      return first_outside(static_cast<const int16_t*>(p), rows, d, l, h);
    case NPY_USHORT:
      return first_outside(static_cast<const uint16_t*>(p), rows, d, l, h);
    case NPY_INT:
      return first_outside(static_cast<const int32_t*>(p), rows, d, l, h);
    case NPY_UINT:
      return first_outside(static_cast<const uint32_t*>(p), rows, d, l, h);
    case NPY_LONG:
    case NPY_LONGLONG:
      if (PyArray_ITEMSIZE(a) == 8) return first_outside(static_cast<const int64_t*>(p), rows, d, l, h);
      return -3;
    default:
      return -3;
  }
}

// A worker process of the process backend ends as soon as `fd` reads EOF: the read end of a pipe
// whose write end only the pool's process holds, so EOF means that process is gone (killed, out
// of memory). The worker's own loop sees it too, but only between env calls: an env call that
// hangs (the pool's step_timeout would kill it, but that watchdog died with the pool) would keep
// the worker, often at 100 % of a core, for ever. A native thread, so that a call that holds the
// GIL cannot keep it from ending the process.
void exit_with_parent(int fd) {
  if (fcntl(fd, F_GETFD) < 0) throw nb::value_error("exit_with_parent: not an open file descriptor");
  std::thread([fd] {
    pollfd p{fd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0) {
      if (errno != EINTR) return;  // cannot happen for an open fd; serve()'s poll still watches it
    }
    _exit(0);  // POLLIN (EOF: nothing is ever written) or POLLHUP
  }).detach();
}

}  // namespace

NB_MODULE(_core, m) {
  aiopool::define_pool_module(m,
                              "aiopool's native engine: worker threads, batch blocks, the eventfd doorbell.");
  m.def("_atomic_add", [](std::uintptr_t addr, int64_t delta) { return at(addr).fetch_add(delta); });
  m.def("_atomic_load", [](std::uintptr_t addr) { return at(addr).load(); });
  m.def("_atomic_store", [](std::uintptr_t addr, int64_t value) { at(addr).store(value); });
  m.def("_take_rows", &take_rows, nb::arg("columns"), nb::arg("ids"));
  m.def("_claim", &claim, nb::arg("flags"), nb::arg("ids"), nb::arg("refuse"), nb::arg("busy"),
        nb::arg("per"));
  m.def("_clear_flags", &clear_flags, nb::arg("flags"), nb::arg("ids"), nb::arg("bits"));
  m.def("_first_out_of_bounds", &first_out_of_bounds, nb::arg("actions"), nb::arg("low"), nb::arg("high"));
  m.def("_exit_with_parent", &exit_with_parent, nb::arg("fd"));
}
