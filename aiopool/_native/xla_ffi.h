// xla(): a pool's send and receive as XLA FFI handlers, called from inside a jitted program
// (aiopool/jax.py). The FFI headers come from the jaxlib installed at build time
// (`jax.ffi.include_dir()`); without them (AIOPOOL_XLA_FFI unset) only the registry is built
// and xla() falls back to io_callback.
//
// Threads: a handler runs on the thread that runs the program (the Python thread that called
// it, with the GIL released by jax, or one of XLA's threads). It never takes the GIL and never
// touches a Python object: it copies between XLA's buffers and the pool's blocks, and shares
// the pool's bookkeeping with the GIL holder under the pool's `state_mu_`.
// Lifetime: a handler finds its pool by the `pool_id` attribute in this module's registry and
// counts itself in while it uses it; detach() (close, destruction) removes the pool and waits
// until no handler is inside it. A closed or destroyed pool is an error, never a dangling pool.
// Order: XLA orders the calls only by the handle, operand 0, which each returns as result 0
// (aliased to operand 0, so never written here); the Python side marks them side effects.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "pool.h"
#include "xla_registry.h"

#ifdef AIOPOOL_XLA_FFI
#include <xla/ffi/api/ffi.h>

namespace aiopool::xla_ffi {

namespace ffi = ::xla::ffi;
using ffi::DataType;

// Calls f(p) with `p` as a pointer to the C type of XLA's type `t`; false for a type not handled.
template <class F>
bool visit(DataType t, void* p, F&& f) {
  switch (t) {
    case DataType::PRED:
      return f(static_cast<bool*>(p)), true;
    case DataType::S8:
      return f(static_cast<int8_t*>(p)), true;
    case DataType::U8:
      return f(static_cast<uint8_t*>(p)), true;
    case DataType::S32:
      return f(static_cast<int32_t*>(p)), true;
    case DataType::S64:
      return f(static_cast<int64_t*>(p)), true;
    case DataType::F32:
      return f(static_cast<float*>(p)), true;
    case DataType::F64:
      return f(static_cast<double*>(p)), true;
    default:
      return false;
  }
}

inline DataType xla_type(DType d) {
  switch (d) {
    case DType::kBool:
      return DataType::PRED;
    case DType::kUInt8:
      return DataType::U8;
    case DType::kInt8:
      return DataType::S8;
    case DType::kInt32:
      return DataType::S32;
    case DType::kInt64:
      return DataType::S64;
    case DType::kFloat32:
      return DataType::F32;
    case DType::kFloat64:
      return DataType::F64;
  }
  return DataType::INVALID;
}

// n elements of `src` (of XLA's type `ts`) into `dst` (of type `td`), each converted as a C++
// static_cast (float64 -> float32 rounds to nearest, as numpy's astype); false for a type not
// handled.
inline bool convert(void* dst, DataType td, const void* src, DataType ts, std::size_t n) {
  bool ok = false;
  visit(td, dst, [&](auto* d) {
    ok = visit(ts, const_cast<void*>(src), [&](const auto* s) {
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<std::remove_pointer_t<decltype(d)>>(s[i]);
    });
  });
  return ok;
}

inline std::string shape_text(ffi::AnyBuffer::Dimensions dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += std::to_string(dims[i]) + (dims.size() == 1 ? "," : i + 1 < dims.size() ? ", " : "");
  return s + ")";
}

inline ffi::Error closed_error(const char* what) {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                    std::string(what) + ": the pool is closed (or was destroyed) since xla() was called");
}

// send(handle, actions[k, *action_shape], env_ids[k]) -> handle
inline ffi::Error send(ffi::AnyBuffer, ffi::AnyBuffer actions, ffi::Buffer<ffi::S32> ids,
                       ffi::Result<ffi::AnyBuffer>, uint64_t pool_id) {
  const XlaRegistry::Use use(pool_id);
  Pool* pool = use.pool();
  if (pool == nullptr || pool->closed()) return closed_error("send");
  const Space& space = pool->spec().action_space;
  const std::size_t k = ids.element_count();
  const auto dims = actions.dimensions();
  bool ok =
      dims.size() == space.shape.size() + 1 && dims.size() > 0 && static_cast<std::size_t>(dims[0]) == k;
  for (std::size_t d = 0; ok && d < space.shape.size(); ++d) ok = dims[d + 1] == space.shape[d];
  if (!ok)
    return ffi::Error::InvalidArgument("action has shape " + shape_text(dims) + ", expected (" +
                                       std::to_string(k) + ", ...) — one action per env in env_id");
  const std::size_t n = actions.element_count();
  thread_local std::vector<std::byte> buf;
  buf.resize(n * dtype_size(space.dtype));
  const bool converted =
      convert(buf.data(), xla_type(space.dtype), actions.untyped_data(), actions.element_type(), n);
  if (!converted)
    return ffi::Error::InvalidArgument("send: actions of this dtype cannot be converted to the pool's");
  try {
    pool->send(buf.data(), buf.size(), ids.typed_data(), k);
  } catch (const std::exception& e) {
    return ffi::Error::InvalidArgument(e.what());
  }
  return ffi::Error::Success();
}

// recv(handle) -> (handle, one array per field of the layout). by_env_id: row r goes to row
// env_id[r] (sync mode: the rows of every env, in env id order). spin_ns: how long to poll for
// a batch before sleeping on the ready queue (the pool's recv_spin_us).
inline ffi::Error recv(ffi::AnyBuffer, ffi::RemainingRets rets, uint64_t pool_id, int64_t by_env_id,
                       int64_t spin_ns) {
  const XlaRegistry::Use use(pool_id);
  Pool* pool = use.pool();
  if (pool == nullptr) return closed_error("recv");
  const Layout& L = pool->layout();
  if (rets.size() != L.fields.size() + 1)
    return ffi::Error::Internal("recv: results do not match the pool's layout");
  Block* b = nullptr;
  for (int64_t spin = spin_ns; b == nullptr; spin = 0) {  // the wait ladder: spin once, then sleep
    if (pool->closed()) return closed_error("recv");
    b = pool->take(spin);
    if (b != nullptr) break;
    const int64_t coming = pool->rows_in_flight();
    if (coming < L.batch_size)
      return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        "recv: nothing in flight to fill a batch: " + std::to_string(coming) +
                            " env steps are in flight and a batch needs " + std::to_string(L.batch_size) +
                            "; send actions first (a receive would wait forever)");
    pool->wait(0.05);
  }
  struct Release {
    Pool* pool;
    Block* b;
    ~Release() { pool->store()->release(b); }
  } release{pool, b};
  std::vector<int32_t> row_of(static_cast<std::size_t>(b->rows));
  for (int r = 0; r < b->rows; ++r)
    row_of[static_cast<std::size_t>(r)] = by_env_id ? *b->at<int32_t>(L, L.env_id, r) : r;
  if (by_env_id)
    for (int32_t at : row_of)
      if (at < 0 || at >= L.batch_size) return ffi::Error::Internal("recv: env ids out of the batch's rows");
  for (std::size_t f = 0; f < L.fields.size(); ++f) {
    auto out = rets.get<ffi::AnyBuffer>(f + 1);
    if (out.has_error()) return out.error();
    ffi::AnyBuffer& o = **out;
    const FieldLayout& fl = L.fields[f];
    const std::size_t per = fl.row_bytes / dtype_size(fl.dtype);
    if (o.element_count() != per * static_cast<std::size_t>(L.batch_size))
      return ffi::Error::Internal("recv: result " + std::to_string(f + 1) + " has the wrong size");
    const std::size_t out_row = o.size_bytes() / static_cast<std::size_t>(L.batch_size);
    auto* dst = static_cast<std::byte*>(o.untyped_data());
    if (b->rows < L.batch_size) std::memset(dst, 0, o.size_bytes());  // a short (flushed) batch
    for (int r = 0; r < b->rows; ++r) {
      std::byte* d = dst + out_row * static_cast<std::size_t>(row_of[static_cast<std::size_t>(r)]);
      const std::byte* s = b->at(L, static_cast<int>(f), r);
      if (out_row == fl.row_bytes)
        std::memcpy(d, s, out_row);
      else if (!convert(d, o.element_type(), s, xla_type(fl.dtype), per))
        return ffi::Error::Internal("recv: cannot convert field " + fl.name);
    }
  }
  return ffi::Error::Success();
}

// state_get(handle) -> (handle, state) and state_set(handle, state) -> handle: the caller's
// per-pool bytes (XlaRegistry::attach), copied out of and into XLA's buffers.
inline ffi::Error state_get(ffi::AnyBuffer, ffi::Result<ffi::AnyBuffer>, ffi::Result<ffi::AnyBuffer> out,
                            uint64_t pool_id) {
  const XlaRegistry::Use use(pool_id);
  if (use.pool() == nullptr || use.pool()->closed()) return closed_error("recv");
  if (out->size_bytes() != use.state_bytes()) return ffi::Error::Internal("state_get: wrong size");
  std::memcpy(out->untyped_data(), use.state(), use.state_bytes());
  return ffi::Error::Success();
}

inline ffi::Error state_set(ffi::AnyBuffer, ffi::AnyBuffer in, ffi::Result<ffi::AnyBuffer>,
                            uint64_t pool_id) {
  const XlaRegistry::Use use(pool_id);
  if (use.pool() == nullptr || use.pool()->closed()) return closed_error("recv");
  if (in.size_bytes() != use.state_bytes()) return ffi::Error::Internal("state_set: wrong size");
  std::memcpy(use.state(), in.untyped_data(), use.state_bytes());
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER(
    kStateGet, state_get,
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<uint64_t>(
        "pool_id"));
XLA_FFI_DEFINE_HANDLER(
    kStateSet, state_set,
    ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<uint64_t>(
        "pool_id"));
XLA_FFI_DEFINE_HANDLER(kSend, send,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Buffer<ffi::S32>>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<uint64_t>("pool_id"));
XLA_FFI_DEFINE_HANDLER(kRecv, recv,
                       ffi::Ffi::Bind()
                           .Arg<ffi::AnyBuffer>()
                           .RemainingRets()
                           .Attr<uint64_t>("pool_id")
                           .Attr<int64_t>("by_env_id")
                           .Attr<int64_t>("spin_ns"));

}  // namespace aiopool::xla_ffi
#endif
