// What every native module of aiopool defines: list_envs, env_config and the Pool class over the
// envs registered in that module. A module is one .cc that includes its env headers and this
// file (core_module.cc: classic control; mujoco_module.cc; atari_module.cc). Each module has its
// own registry and its own nanobind domain. GIL policy, visible at each .def:
//   - send / reset / stage_seeds / take / arm / drain hold the GIL: they are short, and holding
//     it is what makes the per-env bookkeeping single-threaded (see pool.h).
//   - wait releases it (recv_blocking); close releases it to join the workers and to let a
//     thread woken from wait re-acquire the GIL and leave before close returns.
// Batches leave as read-only numpy views sharing one capsule owner; its deleter only returns
// the block to the store (no Python work, any thread that drops the last view may run it).
// At import, the module resolves numpy's own sin/cos loops and BLAS ddot (numpy_math.h).
#pragma once

#include <nanobind/nanobind.h>
// numpy's C API builds the batch views: ~5x cheaper per array than a DLPack round trip.
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <dlfcn.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <numpy/arrayobject.h>
#include <numpy/ufuncobject.h>
#include <structmember.h>  // T_OBJECT_EX, READONLY (BatchMaker)

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "numpy_math.h"
#include "pool.h"
#include "xla_ffi.h"

namespace nb = nanobind;
using namespace aiopool;

namespace {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "?";
}

int npy_type(DType t) {
  switch (t) {
    case DType::kBool:
      return NPY_BOOL;
    case DType::kUInt8:
      return NPY_UINT8;
    case DType::kInt8:
      return NPY_INT8;
    case DType::kInt32:
      return NPY_INT32;
    case DType::kInt64:
      return NPY_INT64;
    case DType::kFloat32:
      return NPY_FLOAT32;
    case DType::kFloat64:
      return NPY_FLOAT64;
  }
  return NPY_UINT8;
}

AutoReset parse_autoreset(const std::string& s) {
  if (s == "next_step") return AutoReset::kNextStep;
  if (s == "same_step") return AutoReset::kSameStep;
  if (s == "disabled") return AutoReset::kDisabled;
  throw std::invalid_argument("autoreset is '" + s + "', expected 'next_step', 'same_step' or 'disabled'");
}

nb::dict space_dict(const Space& s) {
  nb::dict d;
  d["kind"] = s.kind == Space::Kind::kBox ? "box" : s.kind == Space::Kind::kText ? "text" : "discrete";
  d["dtype"] = dtype_name(s.dtype);
  d["shape"] = nb::tuple(nb::cast(s.shape));
  d["low"] = s.low;
  d["high"] = s.high;
  d["n"] = s.n;
  return d;
}

const char* kind_name(ConfigKey::Kind k) {
  switch (k) {
    case ConfigKey::Kind::kBool:
      return "bool";
    case ConfigKey::Kind::kInt:
      return "int";
    case ConfigKey::Kind::kFloat:
      return "float";
    case ConfigKey::Kind::kString:
      return "str";
    case ConfigKey::Kind::kRange:
      return "range";
    case ConfigKey::Kind::kOptionalString:
      return "optional_str";
    case ConfigKey::Kind::kLines:
      return "lines";
    case ConfigKey::Kind::kNumbers:
      return "numbers";
    case ConfigKey::Kind::kOptionalInt:
      return "optional_int";
    case ConfigKey::Kind::kOptionalPos:
      return "optional_pos";
  }
  return "?";
}

// What take_held needs to make aiopool.batch.Batch objects and count them held, as the Python
// of Batch() and Holders.hand_out does (~0.45 us a batch in a CartPole stream, a sixth of it),
// without a Python frame: the Batch type's slots by offset, and the holders' objects. None of
// them refers back to the pool (the pool is a weak reference), so a pool holds no cycle.
struct BatchMaker {
  // Batch's slots, in this order, each set on every batch made.
  static constexpr const char* kSlots[] = {"obs",    "reward",  "terminated", "truncated",
                                           "env_id", "_handle", "_fields",    "_names",
                                           "_info",  "_pool",   "_token",     "_sent"};
  static constexpr std::size_t kN = std::size(kSlots);
  nb::object type;       // aiopool.batch.Batch
  nb::object names;      // its _names
  nb::object weak_pool;  // its _pool
  nb::object held;       // Holders._held: {token: [holder, env_id, rows, group, sent]}
  nb::object on_drop;    // each token's callback (a weak reference to the batch is its token)
  nb::object watch;      // watch(holder): a holder not seen last (a task to follow)
  nb::object last;       // the holder of the last batch made
  Py_ssize_t offset[kN] = {};

  BatchMaker(nb::handle type_, nb::handle names_, nb::handle weak_pool_, nb::handle held_,
             nb::handle on_drop_, nb::handle watch_)
      : type(nb::borrow(type_)),
        names(nb::borrow(names_)),
        weak_pool(nb::borrow(weak_pool_)),
        held(nb::borrow(held_)),
        on_drop(nb::borrow(on_drop_)),
        watch(nb::borrow(watch_)) {
    if (!PyType_Check(type.ptr())) throw nb::type_error("batch_type must be a class");
    if (!PyDict_CheckExact(held.ptr())) throw nb::type_error("held must be a dict");
    auto* t = reinterpret_cast<PyTypeObject*>(type.ptr());
    // A class of __slots__ only, no __init__ of a subclass to skip, no finaliser to run.
    if (t->tp_dictoffset != 0 || t->tp_finalize != nullptr || t->tp_del != nullptr)
      throw nb::type_error("batch_type must be a class of __slots__ without __del__");
    for (std::size_t i = 0; i < kN; ++i) {
      nb::object d = nb::steal(PyObject_GetAttrString(type.ptr(), kSlots[i]));  // the descriptor
      if (!d.is_valid()) PyErr_Clear();
      if (!d.is_valid() || Py_TYPE(d.ptr()) != &PyMemberDescr_Type)
        throw nb::type_error((std::string("batch_type has no slot ") + kSlots[i]).c_str());
      const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d.ptr())->d_member;
      if (m->type != T_OBJECT_EX || (m->flags & READONLY) != 0)
        throw nb::type_error((std::string("batch_type's ") + kSlots[i] + " is not a writable slot").c_str());
      offset[i] = m->offset;
    }
  }

  // A Batch of `fields` (obs, reward, terminated, truncated, env_id, handle), held by `holder`.
  nb::object make(const std::array<nb::object, 6>& fields, nb::handle holder, int rows) {
    auto* t = reinterpret_cast<PyTypeObject*>(type.ptr());
    nb::object batch = nb::steal(t->tp_alloc(t, 0));
    if (!batch.is_valid()) throw nb::python_error();
    nb::object token = nb::steal(PyWeakref_NewRef(batch.ptr(), on_drop.ptr()));
    if (!token.is_valid()) throw nb::python_error();
    PyObject* values[kN] = {fields[0].ptr(), fields[1].ptr(), fields[2].ptr(), fields[3].ptr(),
                            fields[4].ptr(), fields[5].ptr(), Py_None,         names.ptr(),
                            Py_None,         weak_pool.ptr(), token.ptr(),     Py_False};
    for (std::size_t i = 0; i < kN; ++i)  // tp_alloc zeroed them: nothing to release
      *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(batch.ptr()) + offset[i]) = Py_NewRef(values[i]);
    // [holder, env_id, rows, group, sent]: Holders' record (a list's NULL items are released too)
    nb::object record = nb::steal(PyList_New(5));
    if (!record.is_valid()) throw nb::python_error();
    PyList_SET_ITEM(record.ptr(), 0, Py_NewRef(holder.ptr()));
    PyList_SET_ITEM(record.ptr(), 1, Py_NewRef(values[4]));
    PyList_SET_ITEM(record.ptr(), 2, PyLong_FromLong(rows));
    PyList_SET_ITEM(record.ptr(), 3, PyLong_FromLong(0));
    PyList_SET_ITEM(record.ptr(), 4, Py_NewRef(Py_None));
    if (PyList_GET_ITEM(record.ptr(), 2) == nullptr || PyList_GET_ITEM(record.ptr(), 3) == nullptr)
      throw nb::python_error();
    if (PyDict_SetItem(held.ptr(), token.ptr(), record.ptr()) < 0) throw nb::python_error();
    if (holder.ptr() != last.ptr() && PyWeakref_CheckRef(holder.ptr())) {  // a task's (a thread's: nothing)
      watch(holder);
      last = nb::borrow(holder);
    }
    return batch;
  }
};

// A Pool plus the count of threads inside wait(), so close() can let them leave first.
class PyPool : public Pool {
 public:
  using Pool::Pool;
  ~PyPool() {
    close();
    XlaRegistry::get().detach(this);  // after close: a handler inside leaves at once
  }
  PyPool(const PyPool&) = delete;
  PyPool& operator=(const PyPool&) = delete;
  std::atomic<int> waiting{0};
  std::vector<std::byte> xla_state;     // a caller's per-pool bytes for xla() (XlaRegistry::attach)
  std::unique_ptr<BatchMaker> batches;  // take_held's (configure_batches)
};

// Owns one taken block; numpy views of it keep this handle alive (their owner), and the
// handle's destructor returns the block to the store. Eager fields are exported by take();
// the rest (info) only when Python asks, which saves most of the per-batch export cost.
class BlockHandle {
 public:
  BlockHandle(std::shared_ptr<BlockStore> store, Block* block) : store_(std::move(store)), block_(block) {}
  ~BlockHandle() { store_->release(block_); }
  BlockHandle(const BlockHandle&) = delete;
  BlockHandle& operator=(const BlockHandle&) = delete;

  // A read-only numpy view of one field; `self` (this handle's Python object) is its base.
  nb::object array(nb::handle self, std::size_t field) const {
    const Layout& L = store_->layout();
    if (field >= L.fields.size()) throw nb::index_error("no such field");
    const FieldLayout& fl = L.fields[field];
    npy_intp dims[8];
    dims[0] = static_cast<npy_intp>(block_->rows);
    for (std::size_t d = 0; d < fl.shape.size(); ++d) dims[d + 1] = static_cast<npy_intp>(fl.shape[d]);
    PyObject* arr = PyArray_NewFromDescr(
        &PyArray_Type, PyArray_DescrFromType(npy_type(fl.dtype)), static_cast<int>(fl.shape.size() + 1), dims,
        nullptr, block_->data + fl.offset, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, nullptr);
    if (arr == nullptr) throw nb::python_error();
    if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject*>(arr), self.inc_ref().ptr()) < 0) {
      Py_DECREF(arr);
      throw nb::python_error();
    }
    return nb::steal(arr);
  }

  // Writeable copies of many fields in one call: the sync adapters' hot path, where a numpy
  // `copy()` per field costs more than the step of a cheap env. `fields`: a tuple of field
  // indices; returns a tuple with one new array per field, except that with `keys` (a tuple of
  // str) the copies of the last len(keys) fields go, by key, into a copy of `into` (a dict; a
  // new one if None), and that dict ends the tuple. `by_env_id`: row r goes to row env_id[r]
  // (the batch's env ids must then be a permutation of 0..rows-1), so the rows come in env id
  // order whatever order they arrived in.
  nb::object copies(nb::handle fields, nb::handle keys, nb::handle into, bool by_env_id) const {
    if (!PyTuple_Check(fields.ptr())) throw nb::type_error("fields must be a tuple of field indices");
    const Py_ssize_t n = PyTuple_GET_SIZE(fields.ptr());
    const bool with_dict = !keys.is_none();
    if (with_dict && !PyTuple_Check(keys.ptr())) throw nb::type_error("keys must be a tuple of str");
    const Py_ssize_t k = with_dict ? PyTuple_GET_SIZE(keys.ptr()) : 0;
    if (k > n) throw nb::value_error("more keys than fields");
    if (!into.is_none() && !PyDict_Check(into.ptr())) throw nb::type_error("into must be a dict or None");
    std::vector<int32_t> order;
    if (by_env_id) order = env_order();
    nb::object out = nb::steal(PyTuple_New(n - k + (with_dict ? 1 : 0)));
    if (!out.is_valid()) throw nb::python_error();
    for (Py_ssize_t i = 0; i < n - k; ++i)
      PyTuple_SET_ITEM(out.ptr(), i, copy_of(field_at(fields, i), order).release().ptr());
    if (with_dict) {
      nb::object d = nb::steal(into.is_none() ? PyDict_New() : PyDict_Copy(into.ptr()));
      if (!d.is_valid()) throw nb::python_error();
      for (Py_ssize_t j = 0; j < k; ++j) {
        nb::object a = copy_of(field_at(fields, n - k + j), order);
        if (PyDict_SetItem(d.ptr(), PyTuple_GET_ITEM(keys.ptr(), j), a.ptr()) < 0) throw nb::python_error();
      }
      PyTuple_SET_ITEM(out.ptr(), n - k, d.release().ptr());
    }
    return out;
  }

 private:
  std::size_t field_at(nb::handle fields, Py_ssize_t i) const {
    const Py_ssize_t f = PyLong_AsSsize_t(PyTuple_GET_ITEM(fields.ptr(), i));
    if (f == -1 && PyErr_Occurred()) throw nb::python_error();
    if (f < 0 || static_cast<std::size_t>(f) >= store_->layout().fields.size())
      throw nb::index_error("no such field");
    return static_cast<std::size_t>(f);
  }

  // The block's env_id column, checked to be a permutation of 0..rows-1; empty if it is
  // 0..rows-1 in order already (the rows are then copied as they are).
  std::vector<int32_t> env_order() const {
    const Layout& L = store_->layout();
    const int rows = block_->rows;
    const int32_t* ids = block_->at<const int32_t>(L, L.env_id, 0);
    int r = 0;
    while (r < rows && ids[r] == r) ++r;
    if (r == rows) return {};
    std::vector<int32_t> order(ids, ids + rows);
    std::vector<bool> seen(static_cast<std::size_t>(rows), false);
    for (int32_t id : order) {
      if (id < 0 || id >= rows || seen[static_cast<std::size_t>(id)])
        throw nb::value_error("by_env_id: the batch's env ids are not a permutation of 0..len(batch)-1");
      seen[static_cast<std::size_t>(id)] = true;
    }
    return order;
  }

  // A new C-contiguous array holding field `field`, its rows permuted by `order` if not empty.
  nb::object copy_of(std::size_t field, const std::vector<int32_t>& order) const {
    const FieldLayout& fl = store_->layout().fields[field];
    npy_intp dims[NPY_MAXDIMS];
    if (fl.shape.size() + 1 > NPY_MAXDIMS) throw nb::value_error("a field with too many dimensions");
    dims[0] = static_cast<npy_intp>(block_->rows);
    for (std::size_t d = 0; d < fl.shape.size(); ++d) dims[d + 1] = static_cast<npy_intp>(fl.shape[d]);
    PyObject* arr =
        PyArray_NewFromDescr(&PyArray_Type, PyArray_DescrFromType(npy_type(fl.dtype)),
                             static_cast<int>(fl.shape.size() + 1), dims, nullptr, nullptr, 0, nullptr);
    if (arr == nullptr) throw nb::python_error();
    auto* dst = static_cast<std::byte*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(arr)));
    const std::byte* src = block_->data + fl.offset;
    if (order.empty()) {
      std::memcpy(dst, src, fl.row_bytes * static_cast<std::size_t>(block_->rows));
    } else {
      for (std::size_t r = 0; r < order.size(); ++r)
        std::memcpy(dst + fl.row_bytes * static_cast<std::size_t>(order[r]), src + fl.row_bytes * r,
                    fl.row_bytes);
    }
    return nb::steal(arr);
  }

  std::shared_ptr<BlockStore> store_;
  Block* block_;
};

// A taken block's eager fields: obs, reward, terminated, truncated, env_id, and its handle.
std::array<nb::object, 6> export_fields(PyPool& p, Block* b) {
  nb::object handle = nb::cast(new BlockHandle(p.store(), b), nb::rv_policy::take_ownership);
  const auto& h = nb::cast<const BlockHandle&>(handle);
  return {h.array(handle, 0), h.array(handle, 1), h.array(handle, 2),
          h.array(handle, 3), h.array(handle, 4), handle};
}

// (obs, reward, terminated, truncated, env_id, handle)
nb::object export_block(PyPool& p, Block* b) {
  auto f = export_fields(p, b);
  return nb::make_tuple(f[0], f[1], f[2], f[3], f[4], f[5]);
}

using IdArray = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A C-contiguous view of a numpy array argument of the given type (copied only if strided).
struct ArrayArg {
  nb::object keep;
  const std::byte* data;
  std::size_t size;
  std::size_t nbytes;
};

// TypeError for anything but a numpy array of `typenum` with `ndim` dims: the Python side then
// converts (or explains what is wrong) and calls again.
ArrayArg array_arg(nb::handle h, int typenum, int ndim, const char* name) {
  if (!PyArray_Check(h.ptr())) throw nb::type_error((std::string(name) + " must be a numpy array").c_str());
  auto* a = reinterpret_cast<PyArrayObject*>(h.ptr());
  // Byte order too: EquivTypenums ignores it, and a '>i8' array read as native is another number.
  if (!PyArray_EquivTypenums(PyArray_TYPE(a), typenum) || !PyArray_ISNOTSWAPPED(a) || PyArray_NDIM(a) != ndim)
    throw nb::type_error((std::string(name) + " has the wrong dtype, byte order or ndim").c_str());
  auto* c = reinterpret_cast<PyArrayObject*>(PyArray_GETCONTIGUOUS(a));
  if (c == nullptr) throw nb::python_error();
  return {nb::steal(reinterpret_cast<PyObject*>(c)), static_cast<const std::byte*>(PyArray_DATA(c)),
          static_cast<std::size_t>(PyArray_SIZE(c)), static_cast<std::size_t>(PyArray_NBYTES(c))};
}

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (std::size_t d = 0; d < dims.size(); ++d) s += (d ? ", " : "") + std::to_string(dims[d]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

void check_action_shape(PyArrayObject* a, const Space& space, std::size_t k) {
  std::vector<int64_t> want{static_cast<int64_t>(k)};
  want.insert(want.end(), space.shape.begin(), space.shape.end());
  std::vector<int64_t> got(PyArray_DIMS(a), PyArray_DIMS(a) + PyArray_NDIM(a));
  if (got != want)
    throw nb::value_error(("actions has shape " + shape_str(got) + ", expected " + shape_str(want) +
                           " — one action per env in env_ids")
                              .c_str());
}

// The inner loop numpy runs for `ufunc` on one dtype (its loop table holds this CPU's dispatch).
numpy_math::Loop ufunc_loop(const char* name, int typenum) {
  nb::object u = nb::module_::import_("numpy").attr(name);
  const auto* uf = reinterpret_cast<const PyUFuncObject*>(u.ptr());
  for (int i = 0; i < uf->ntypes; ++i) {
    const char* t = uf->types + static_cast<std::ptrdiff_t>(i) * uf->nargs;
    if (t[0] == typenum && t[1] == typenum)
      return {reinterpret_cast<numpy_math::UfuncLoop>(uf->functions[i]), uf->data ? uf->data[i] : nullptr};
  }
  throw std::runtime_error(std::string("numpy.") + name + " has no loop for type " + std::to_string(typenum));
}

// The cblas_ddot numpy's _multiarray_umath calls, found through its own handle (dlsym searches
// the library and its dependencies, where numpy's OpenBLAS is). numpy's wheels import
// scipy_cblas_ddot64_ (ILP64 scipy-openblas); other builds use one of the other spellings.
std::string resolve_ddot(numpy_math::Kernels& k) {
  const auto path =
      nb::cast<std::string>(nb::module_::import_("numpy._core._multiarray_umath").attr("__file__"));
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) throw std::runtime_error("numpy's " + path + " is not loaded: " + dlerror());
  std::string found;
  for (const char* name : {"scipy_cblas_ddot64_", "cblas_ddot64_", "scipy_cblas_ddot", "cblas_ddot"}) {
    void* f = dlsym(h, name);
    if (f == nullptr) continue;
    found = name;
    if (found.ends_with("64_"))
      k.ddot64 = reinterpret_cast<numpy_math::Ddot64>(f);
    else
      k.ddot32 = reinterpret_cast<numpy_math::Ddot32>(f);
    break;
  }
  // cblas_dgemv and cblas_dgemm (numpy's vector-matrix and matrix products), named as the ddot
  // found is; the name of one that is missing.
  std::string missing;
  auto sibling = [&](const char* routine, auto& f64, auto& f32) {
    if (found.empty()) return;
    const std::string name = std::string(found).replace(found.find("ddot"), 4, routine);
    if (void* f = dlsym(h, name.c_str()); f == nullptr)
      missing = name;
    else if (name.ends_with("64_"))
      f64 = reinterpret_cast<std::remove_reference_t<decltype(f64)>>(f);
    else
      f32 = reinterpret_cast<std::remove_reference_t<decltype(f32)>>(f);
  };
  sibling("dgemv", k.dgemv64, k.dgemv32);
  sibling("dgemm", k.dgemm64, k.dgemm32);
  dlclose(h);  // numpy stays loaded: Python holds its own reference
  if (found.empty()) throw std::runtime_error("numpy's BLAS exports no cblas_ddot (numpy at " + path + ")");
  if (!missing.empty())
    throw std::runtime_error("numpy's BLAS exports no " + missing + " (numpy at " + path + ")");
  return found;
}

// Fills numpy_math::kernels() once per module; returns what was found, for diagnostics.
nb::dict resolve_numpy_kernels() {
  if (_import_umath() < 0) throw nb::python_error();
  numpy_math::Kernels& k = numpy_math::kernels();
  k.sin_f64 = ufunc_loop("sin", NPY_DOUBLE);
  k.cos_f64 = ufunc_loop("cos", NPY_DOUBLE);
  k.sin_f32 = ufunc_loop("sin", NPY_FLOAT);
  k.cos_f32 = ufunc_loop("cos", NPY_FLOAT);
  k.exp_f64 = ufunc_loop("exp", NPY_DOUBLE);
  k.log_f64 = ufunc_loop("log", NPY_DOUBLE);
  k.log1p_f64 = ufunc_loop("log1p", NPY_DOUBLE);
  k.arcsinh_f64 = ufunc_loop("arcsinh", NPY_DOUBLE);
  k.tanh_f64 = ufunc_loop("tanh", NPY_DOUBLE);
  k.arctan2_f64 = ufunc_loop("arctan2", NPY_DOUBLE);
  nb::dict d;
  d["ddot"] = resolve_ddot(k);
  d["ufunc_loops"] = nb::make_tuple("sin", "cos", "exp", "log", "log1p", "arcsinh", "tanh", "arctan2");
  return d;
}

}  // namespace

namespace aiopool {

inline void define_pool_module(nb::module_& m, const char* doc) {
  if (_import_array() < 0) throw nb::python_error();
  m.doc() = doc;

  m.def("list_envs", [] { return Registry::get().ids(); });
  // xla()'s FFI handlers (send, recv, state_get, state_set) as capsules for jax.ffi.register_ffi_target, or
  // None where jaxlib's headers were missing at build time.
  m.def("_xla_handlers", []() -> nb::object {
#ifdef AIOPOOL_XLA_FFI
    return nb::make_tuple(nb::capsule(reinterpret_cast<void*>(xla_ffi::kSend)),
                          nb::capsule(reinterpret_cast<void*>(xla_ffi::kRecv)),
                          nb::capsule(reinterpret_cast<void*>(xla_ffi::kStateGet)),
                          nb::capsule(reinterpret_cast<void*>(xla_ffi::kStateSet)));
#else
    return nb::none();
#endif
  });
  // The same handlers' GPU forms (platform="gpu"), or None as above.
  m.def("_xla_gpu_handlers", []() -> nb::object {
#ifdef AIOPOOL_XLA_FFI
    return nb::make_tuple(nb::capsule(reinterpret_cast<void*>(xla_ffi::kSendGpu)),
                          nb::capsule(reinterpret_cast<void*>(xla_ffi::kRecvGpu)),
                          nb::capsule(reinterpret_cast<void*>(xla_ffi::kStateGetGpu)),
                          nb::capsule(reinterpret_cast<void*>(xla_ffi::kStateSetGpu)));
#else
    return nb::none();
#endif
  });
  // Whether the GPU handlers can run here: "" where the CUDA driver loads, else why not.
  m.def("_cuda_driver_error", [] { return CudaDriver::get().error(); });
  // A child forked with pools open keeps their natives alive for good (their threads are the
  // parent's: destroying one would join them); nanobind would list them as leaks at exit. Each
  // module is a nanobind domain of its own (CMakeLists.txt): each one quiets its own.
  m.def("_quiet_leaks_at_exit", [] { nb::set_leak_warnings(false); });

  // numpy's kernels as the envs call them (numpy_math.h); the tests compare them with numpy.
  m.attr("numpy_kernels") = resolve_numpy_kernels();
  m.def("_np_unary", [](const std::string& name, nb::ndarray<nb::numpy, const double, nb::ndim<1>> x) {
    std::vector<double> out(x.shape(0));
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = name == "sin"     ? numpy_math::np_sin(x(i))
               : name == "cos"   ? numpy_math::np_cos(x(i))
               : name == "exp"   ? numpy_math::np_exp(x(i))
               : name == "log"   ? numpy_math::np_log(x(i))
               : name == "log1p" ? numpy_math::np_log1p(x(i))
               : name == "tanh"  ? numpy_math::np_tanh(x(i))
                                 : numpy_math::np_arcsinh(x(i));
    return out;
  });
  m.def("_np_arctan2", [](nb::ndarray<nb::numpy, const double, nb::ndim<1>> y,
                          nb::ndarray<nb::numpy, const double, nb::ndim<1>> x) {
    if (y.shape(0) != x.shape(0)) throw nb::value_error("arctan2(y, x): lengths differ");
    std::vector<double> out(y.shape(0));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = numpy_math::np_arctan2(y(i), x(i));
    return out;
  });
  m.def("_np_vecmat", [](nb::ndarray<nb::numpy, const double, nb::ndim<1>, nb::c_contig> v,
                         nb::ndarray<nb::numpy, const double, nb::ndim<2>, nb::c_contig> a) {
    if (a.shape(0) != v.shape(0)) throw nb::value_error("v.dot(a): shapes do not match");
    std::vector<double> out(a.shape(1));
    numpy_math::np_vecmat(v.data(), a.data(), static_cast<int>(a.shape(0)), static_cast<int>(a.shape(1)),
                          out.data());
    return out;
  });
  m.def("_np_matmul", [](nb::ndarray<nb::numpy, const double, nb::ndim<2>, nb::c_contig> a,
                         nb::ndarray<nb::numpy, const double, nb::ndim<2>, nb::c_contig> b) {
    if (a.shape(1) != b.shape(0)) throw nb::value_error("a.dot(b): shapes do not match");
    std::vector<double> out(a.shape(0) * b.shape(1));
    numpy_math::np_matmul(a.data(), b.data(), static_cast<int>(a.shape(0)), static_cast<int>(a.shape(1)),
                          static_cast<int>(b.shape(1)), out.data());
    return out;
  });
  m.def("_np_unary_f32", [](const std::string& name, nb::ndarray<nb::numpy, const float, nb::ndim<1>> x) {
    std::vector<float> out(x.shape(0));
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = name == "sin" ? numpy_math::np_sin(x(i)) : numpy_math::np_cos(x(i));
    return out;
  });
  m.def("_np_norm", [](nb::ndarray<nb::numpy, const double, nb::ndim<2>, nb::c_contig> v) {
    std::vector<double> out(v.shape(0));
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = numpy_math::np_norm(v.data() + i * v.shape(1), v.shape(1));
    return out;
  });

  m.def("env_config", [](const std::string& id) {
    const EnvEntry& e = Registry::get().find(id);
    nb::list keys;
    for (const ConfigKey& k : e.config_keys()) {
      nb::object def;
      if (k.kind == ConfigKey::Kind::kString)
        def = nb::str(k.default_string.c_str());
      else if (k.kind == ConfigKey::Kind::kOptionalString || k.kind == ConfigKey::Kind::kLines)
        def = k.default_string.empty() ? nb::none() : nb::object(nb::str(k.default_string.c_str()));
      else if ((k.kind == ConfigKey::Kind::kOptionalInt || k.kind == ConfigKey::Kind::kOptionalPos) &&
               k.default_none)
        def = nb::none();
      else if (k.kind == ConfigKey::Kind::kOptionalInt)
        def = nb::int_(static_cast<int64_t>(k.default_value));
      else if (k.kind == ConfigKey::Kind::kNumbers || k.kind == ConfigKey::Kind::kOptionalPos)
        def = nb::tuple(nb::cast(k.default_numbers));
      else if (k.kind == ConfigKey::Kind::kRange)
        def = nb::make_tuple(k.default_range[0], k.default_range[1]);
      else
        def = nb::float_(k.default_value);
      keys.append(nb::make_tuple(k.name, kind_name(k.kind), def));
    }
    return nb::make_tuple(keys, e.max_episode_steps);
  });

  nb::class_<BlockHandle>(m, "BlockHandle")
      .def("array", [](nb::handle self,
                       std::size_t field) { return nb::cast<const BlockHandle&>(self).array(self, field); })
      // GIL held: it makes Python objects (and copies at most a block).
      .def("copies", &BlockHandle::copies, nb::arg("fields"), nb::arg("keys") = nb::none(),
           nb::arg("into") = nb::none(), nb::arg("by_env_id") = false);

  nb::class_<PyPool>(m, "Pool")
      .def(
          "__init__",
          [](PyPool* self, const std::string& id, const std::map<std::string, double>& numbers,
             const std::map<std::string, std::string>& strings,
             const std::map<std::string, std::vector<double>>& ranges, int num_envs, int batch_size,
             int num_threads, const std::string& autoreset, int64_t worker_spin_ns, int max_episode_steps,
             int max_spinners) {
            PoolOptions o;
            o.num_envs = num_envs;
            o.batch_size = batch_size;
            o.num_threads = num_threads;
            o.autoreset = parse_autoreset(autoreset);
            o.worker_spin_ns = worker_spin_ns;
            o.max_episode_steps = max_episode_steps;
            o.max_spinners = max_spinners;
            new (self) PyPool(Registry::get().find(id), Config(numbers, strings, ranges), o);
          },
          nb::arg("env_id"), nb::arg("numbers"), nb::arg("strings"), nb::arg("ranges"), nb::arg("num_envs"),
          nb::arg("batch_size"), nb::arg("num_threads"), nb::arg("autoreset"), nb::arg("worker_spin_ns"),
          nb::arg("max_episode_steps"), nb::arg("max_spinners"))
      .def_prop_ro("spec",
                   [](PyPool& p) {
                     const EnvSpec& s = p.spec();
                     nb::dict d;
                     d["observation_space"] = space_dict(s.observation_space);
                     nb::list parts;
                     for (const ObsPart& part : s.obs_parts)
                       parts.append(nb::make_tuple(part.key, space_dict(part.space)));
                     d["obs_parts"] = parts;
                     d["obs_structure"] = s.obs_parts.empty() ? "" : s.obs_dict ? "dict" : "tuple";
                     d["action_space"] = space_dict(s.action_space);
                     d["max_episode_steps"] = s.max_episode_steps;
                     d["max_seed"] = s.max_seed;
                     d["render_shape"] = nb::tuple(nb::cast(s.render_shape));
                     d["render_fps"] = s.render_fps;
                     nb::list info;
                     for (const Field& f : s.info)
                       info.append(nb::make_tuple(f.name, dtype_name(f.dtype), nb::tuple(nb::cast(f.shape))));
                     d["info"] = info;
                     return d;
                   })
      .def_prop_ro("field_names",
                   [](PyPool& p) {
                     std::vector<std::string> names;
                     for (const auto& f : p.layout().fields) names.push_back(f.name);
                     return names;
                   })
      // GIL held: validation and bookkeeping are single-threaded by the GIL.
      .def(
          "stage_seeds",
          [](PyPool& p, IdArray ids, nb::ndarray<const uint64_t, nb::ndim<2>, nb::c_contig> states,
             std::optional<nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig>> seeds) {
            if (states.shape(0) != ids.shape(0) || states.shape(1) != 4)
              throw std::invalid_argument("states must have shape (len(env_ids), 4)");
            if (seeds && seeds->shape(0) != ids.shape(0))
              throw std::invalid_argument("seeds must have shape (len(env_ids),)");
            p.stage_seeds(ids.data(), ids.shape(0), states.data(), seeds ? seeds->data() : nullptr);
          },
          nb::arg("ids"), nb::arg("states"), nb::arg("seeds") = nb::none())
      .def("check_reset", [](PyPool& p, IdArray ids) { p.check_reset(ids.data(), ids.shape(0)); })
      .def("reset", [](PyPool& p, IdArray ids) { p.reset(ids.data(), ids.shape(0)); })
      .def("send",
           [](PyPool& p, nb::handle actions, nb::handle ids) {
             const Space& space = p.spec().action_space;
             const int nd = static_cast<int>(space.shape.size()) + 1;
             const ArrayArg i = array_arg(ids, NPY_INT32, 1, "env_ids");
             const ArrayArg a = array_arg(actions, npy_type(space.dtype), nd, "actions");
             check_action_shape(reinterpret_cast<PyArrayObject*>(a.keep.ptr()), space, i.size);
             p.send(a.data, a.nbytes, reinterpret_cast<const int32_t*>(i.data), i.size);
           })
      .def("take",
           [](PyPool& p, int64_t spin_ns) -> nb::object {
             Block* b = p.take(spin_ns);
             if (b == nullptr) return nb::none();
             return export_block(p, b);
           })
      // take() as a Batch held by `holder` (configure_batches first): Batch() and
      // Holders.hand_out in one call.
      .def("take_held",
           [](PyPool& p, nb::handle holder, int64_t spin_ns) -> nb::object {
             if (!p.batches) throw std::runtime_error("take_held before configure_batches");
             Block* b = p.take(spin_ns);
             if (b == nullptr) return nb::none();
             const int rows = b->rows;
             return p.batches->make(export_fields(p, b), holder, rows);
           })
      .def("configure_batches",
           [](PyPool& p, nb::handle batch_type, nb::handle names, nb::handle weak_pool, nb::handle held,
              nb::handle on_drop, nb::handle watch) {
             p.batches = std::make_unique<BatchMaker>(batch_type, names, weak_pool, held, on_drop, watch);
           })
      .def("arm", &PyPool::arm)
      .def("drain", &PyPool::drain)
      .def("fileno", &PyPool::fd)
      // GIL released while waiting; `waiting` lets close() wait for us to leave.
      .def("wait",
           [](PyPool& p, double timeout_s) {
             p.waiting.fetch_add(1);
             bool ready;
             {
               nb::gil_scoped_release release;
               ready = p.wait(timeout_s);
             }
             p.waiting.fetch_sub(1);
             return ready;
           })
      // GIL released while the caller steps envs; `waiting` lets close() wait for it.
      .def("help",
           [](PyPool& p) {
             p.waiting.fetch_add(1);
             int n;
             {
               nb::gil_scoped_release release;
               n = p.help();
             }
             p.waiting.fetch_sub(1);
             return n;
           })
      .def_prop_rw("caller_helps", &PyPool::caller_helps, &PyPool::set_caller_helps)
      .def("close",
           [](PyPool& p) {
             nb::gil_scoped_release release;
             p.close();
             XlaRegistry::get().detach(&p);
             const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
             while (p.waiting.load() > 0 && std::chrono::steady_clock::now() < until)
               std::this_thread::sleep_for(std::chrono::microseconds(100));
           })
      .def_prop_ro("closed", &PyPool::closed)
      // xla(): the FFI handlers find this pool by `id` until it closes (xla_ffi.h).
      .def("xla_attach",
           [](PyPool& p, uint64_t id) {
             if (p.closed()) throw std::runtime_error("xla() on a closed pool");
             XlaRegistry::get().attach(id, &p, p.xla_state.data(), p.xla_state.size());
           })
      // `nbytes` zeroed bytes that Python and xla()'s handlers share (a writeable numpy view
      // owned by the pool); once per pool, before xla_attach.
      .def(
          "xla_state",
          [](nb::handle self, std::size_t nbytes) {
            PyPool& p = nb::cast<PyPool&>(self);
            if (!p.xla_state.empty()) throw std::runtime_error("xla_state: already made");
            p.xla_state.assign(nbytes, std::byte{0});
            return nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>(
                reinterpret_cast<uint8_t*>(p.xla_state.data()), {nbytes}, self);
          },
          nb::arg("nbytes"))
      // Partial batches: wait for every sent row without the GIL, then cut with it held.
      .def("flush",
           [](PyPool& p, double timeout_s) {
             p.snapshot_sent();
             p.waiting.fetch_add(1);
             {
               nb::gil_scoped_release release;
               p.wait_written(timeout_s);
             }
             p.waiting.fetch_sub(1);
             return p.cut();
           })
      .def_prop_ro("rows_unwritten", &PyPool::rows_unwritten)
      .def("env_error", &PyPool::env_error)
      // Frames of idle envs into `out` ([k, *render_shape]), GIL released while drawing; False
      // where the env does not render in C++.
      .def("render",
           [](PyPool& p, IdArray ids, nb::ndarray<uint8_t, nb::c_contig, nb::device::cpu> out) {
             const std::vector<int64_t>& shape = p.spec().render_shape;
             std::size_t frame = 1;
             for (int64_t d : shape) frame *= static_cast<std::size_t>(d);
             const std::size_t k = ids.shape(0);
             if (shape.empty()) return false;
             if (out.size() != k * frame) throw std::invalid_argument("render: out has the wrong size");
             const PyPool::RenderClaim claim(p, ids.data(), k);
             nb::gil_scoped_release release;  // destroyed first: the claim ends with the GIL
             return p.render(ids.data(), k, out.data(), frame);
           })
      .def("render_state", &PyPool::render_state)
      .def("export_data", &PyPool::export_data)
      .def("export_model", &PyPool::export_model)
      .def_prop_ro("rows_in_flight", &PyPool::rows_in_flight)
      .def_prop_ro("ready_count", &PyPool::ready_count)
      .def_prop_ro("blocks_allocated", [](PyPool& p) { return p.store()->allocated(); })
      .def_prop_ro("num_threads", [](PyPool& p) { return p.options().num_threads; })
      .def_prop_ro("num_envs", [](PyPool& p) { return p.options().num_envs; })
      .def_prop_ro("batch_size", [](PyPool& p) { return p.options().batch_size; });
}

}  // namespace aiopool
