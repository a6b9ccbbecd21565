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
// Platforms: each handler has a CPU and a GPU form, registered under one target name for each
// platform; the GPU form stages XLA's device buffers through pinned host memory and calls the
// same body (cuda_driver.h loads the CUDA driver at run time).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_driver.h"
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

// A buffer as the handlers' bodies see it: host memory, XLA's own on the CPU, a staging copy
// of the device's on the GPU.
struct HostBuffer {
  void* data;
  std::size_t bytes;
  std::size_t count;  // elements
  DataType type;
  ffi::AnyBuffer::Dimensions dims;
};

inline HostBuffer host(ffi::AnyBuffer b) {
  return {b.untyped_data(), b.size_bytes(), b.element_count(), b.element_type(), b.dimensions()};
}

// send's body: actions[k, *action_shape] to env_ids[k] (host memory).
inline ffi::Error send_host(const HostBuffer& actions, const int32_t* ids, std::size_t k, uint64_t pool_id) {
  const XlaRegistry::Use use(pool_id);
  Pool* pool = use.pool();
  if (pool == nullptr || pool->closed()) return closed_error("send");
  const Space& space = pool->spec().action_space;
  const auto& dims = actions.dims;
  bool ok =
      dims.size() == space.shape.size() + 1 && dims.size() > 0 && static_cast<std::size_t>(dims[0]) == k;
  for (std::size_t d = 0; ok && d < space.shape.size(); ++d) ok = dims[d + 1] == space.shape[d];
  if (!ok)
    return ffi::Error::InvalidArgument("action has shape " + shape_text(dims) + ", expected (" +
                                       std::to_string(k) + ", ...) — one action per env in env_id");
  const std::size_t n = actions.count;
  thread_local std::vector<std::byte> buf;
  buf.resize(n * dtype_size(space.dtype));
  if (!convert(buf.data(), xla_type(space.dtype), actions.data, actions.type, n))
    return ffi::Error::InvalidArgument("send: actions of this dtype cannot be converted to the pool's");
  try {
    pool->send(buf.data(), buf.size(), ids, k);
  } catch (const std::exception& e) {
    return ffi::Error::InvalidArgument(e.what());
  }
  return ffi::Error::Success();
}

// recv's body: the next batch into `outs` (host memory), one per field of the layout.
// by_env_id: row r goes to row env_id[r] (sync mode: the rows of every env, in env id order).
// spin_ns: how long to poll for a batch before sleeping on the ready queue (recv_spin_us).
inline ffi::Error recv_host(const std::vector<HostBuffer>& outs, uint64_t pool_id, int64_t by_env_id,
                            int64_t spin_ns) {
  const XlaRegistry::Use use(pool_id);
  Pool* pool = use.pool();
  if (pool == nullptr) return closed_error("recv");
  const Layout& L = pool->layout();
  if (outs.size() != L.fields.size())
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
    const HostBuffer& o = outs[f];
    const FieldLayout& fl = L.fields[f];
    const std::size_t per = fl.row_bytes / dtype_size(fl.dtype);
    if (o.count != per * static_cast<std::size_t>(L.batch_size))
      return ffi::Error::Internal("recv: result " + std::to_string(f + 1) + " has the wrong size");
    const std::size_t out_row = o.bytes / static_cast<std::size_t>(L.batch_size);
    auto* dst = static_cast<std::byte*>(o.data);
    if (b->rows < L.batch_size) std::memset(dst, 0, o.bytes);  // a short (flushed) batch
    for (int r = 0; r < b->rows; ++r) {
      std::byte* d = dst + out_row * static_cast<std::size_t>(row_of[static_cast<std::size_t>(r)]);
      const std::byte* s = b->at(L, static_cast<int>(f), r);
      if (out_row == fl.row_bytes)
        std::memcpy(d, s, out_row);
      else if (!convert(d, o.type, s, xla_type(fl.dtype), per))
        return ffi::Error::Internal("recv: cannot convert field " + fl.name);
    }
  }
  return ffi::Error::Success();
}

// state_get / state_set's bodies: the caller's per-pool bytes (XlaRegistry::attach).
inline ffi::Error state_copy(void* data, std::size_t bytes, bool get, uint64_t pool_id) {
  const XlaRegistry::Use use(pool_id);
  if (use.pool() == nullptr || use.pool()->closed()) return closed_error("recv");
  if (bytes != use.state_bytes()) return ffi::Error::Internal("state: wrong size");
  if (get)
    std::memcpy(data, use.state(), bytes);
  else
    std::memcpy(use.state(), data, bytes);
  return ffi::Error::Success();
}

// -- the CPU handlers: XLA's buffers are host memory ----------------------------------------

// send(handle, actions[k, *action_shape], env_ids[k]) -> handle
inline ffi::Error send(ffi::AnyBuffer, ffi::AnyBuffer actions, ffi::Buffer<ffi::S32> ids,
                       ffi::Result<ffi::AnyBuffer>, uint64_t pool_id) {
  return send_host(host(actions), ids.typed_data(), ids.element_count(), pool_id);
}

// recv(handle) -> (handle, one array per field of the layout)
inline ffi::Error recv(ffi::AnyBuffer, ffi::RemainingRets rets, uint64_t pool_id, int64_t by_env_id,
                       int64_t spin_ns) {
  std::vector<HostBuffer> outs;
  for (std::size_t f = 1; f < rets.size(); ++f) {
    auto out = rets.get<ffi::AnyBuffer>(f);
    if (out.has_error()) return out.error();
    outs.push_back(host(**out));
  }
  return recv_host(outs, pool_id, by_env_id, spin_ns);
}

// state_get(handle) -> (handle, state) and state_set(handle, state) -> handle
inline ffi::Error state_get(ffi::AnyBuffer, ffi::Result<ffi::AnyBuffer>, ffi::Result<ffi::AnyBuffer> out,
                            uint64_t pool_id) {
  return state_copy(out->untyped_data(), out->size_bytes(), true, pool_id);
}

inline ffi::Error state_set(ffi::AnyBuffer, ffi::AnyBuffer in, ffi::Result<ffi::AnyBuffer>,
                            uint64_t pool_id) {
  return state_copy(in.untyped_data(), in.size_bytes(), false, pool_id);
}

// -- the GPU handlers: the same bodies over pinned host staging ------------------------------
// Operands are copied to the staging on XLA's stream and the stream synchronised once before
// the body runs; results are written to the staging and copied to the device, then the stream
// synchronised (the staging is reused by the next call). The handlers block the thread that
// launches the program's kernels, as a receive must wait for its batch: they are not marked
// command-buffer compatible, so XLA keeps them out of its CUDA graphs.

inline ffi::Error cuda_error(const std::string& why) { return ffi::Error(ffi::ErrorCode::kInternal, why); }

inline ffi::Error cuda_ready() {
  const CudaDriver& cu = CudaDriver::get();
  return cu.error().empty() ? ffi::Error::Success() : cuda_error("xla() on the GPU: " + cu.error());
}

// Copies `bytes` from the device to `dst` (d2h) or from `src` to the device, on `stream`.
inline ffi::Error cuda_copy(bool d2h, void* host_ptr, void* device_ptr, std::size_t bytes, void* stream) {
  if (bytes == 0) return ffi::Error::Success();
  const CudaDriver& cu = CudaDriver::get();
  const auto dev = reinterpret_cast<CudaDriver::DevicePtr>(device_ptr);
  const CudaDriver::Result r =
      d2h ? cu.memcpy_dtoh(host_ptr, dev, bytes, stream) : cu.memcpy_htod(dev, host_ptr, bytes, stream);
  return r == 0 ? ffi::Error::Success()
                : cuda_error(cu.explain(d2h ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync", r));
}

inline ffi::Error cuda_sync(void* stream) {
  const CudaDriver& cu = CudaDriver::get();
  const CudaDriver::Result r = cu.stream_synchronize(stream);
  return r == 0 ? ffi::Error::Success() : cuda_error(cu.explain("cuStreamSynchronize", r));
}

inline std::size_t aligned(std::size_t n) { return (n + 63) & ~std::size_t{63}; }

inline ffi::Error send_gpu(void* stream, ffi::AnyBuffer, ffi::AnyBuffer actions, ffi::Buffer<ffi::S32> ids,
                           ffi::Result<ffi::AnyBuffer>, uint64_t pool_id) {
  if (auto e = cuda_ready(); e.failure()) return e;
  std::byte* stage = CudaStaging::here().reserve(aligned(actions.size_bytes()) + ids.size_bytes());
  std::byte* id_stage = stage + aligned(actions.size_bytes());
  if (auto e = cuda_copy(true, stage, actions.untyped_data(), actions.size_bytes(), stream); e.failure())
    return e;
  if (auto e = cuda_copy(true, id_stage, ids.untyped_data(), ids.size_bytes(), stream); e.failure()) return e;
  if (auto e = cuda_sync(stream); e.failure()) return e;
  HostBuffer a = host(actions);
  a.data = stage;
  return send_host(a, reinterpret_cast<const int32_t*>(id_stage), ids.element_count(), pool_id);
}

inline ffi::Error recv_gpu(void* stream, ffi::AnyBuffer, ffi::RemainingRets rets, uint64_t pool_id,
                           int64_t by_env_id, int64_t spin_ns) {
  if (auto e = cuda_ready(); e.failure()) return e;
  std::vector<HostBuffer> outs;
  std::vector<void*> device;
  std::size_t total = 0;
  for (std::size_t f = 1; f < rets.size(); ++f) {
    auto out = rets.get<ffi::AnyBuffer>(f);
    if (out.has_error()) return out.error();
    outs.push_back(host(**out));
    device.push_back((**out).untyped_data());
    total += aligned(outs.back().bytes);
  }
  std::byte* stage = CudaStaging::here().reserve(total);
  for (HostBuffer& o : outs) {
    o.data = stage;
    stage += aligned(o.bytes);
  }
  if (auto e = recv_host(outs, pool_id, by_env_id, spin_ns); e.failure()) return e;
  for (std::size_t f = 0; f < outs.size(); ++f)
    if (auto e = cuda_copy(false, outs[f].data, device[f], outs[f].bytes, stream); e.failure()) return e;
  return cuda_sync(stream);
}

inline ffi::Error state_get_gpu(void* stream, ffi::AnyBuffer, ffi::Result<ffi::AnyBuffer>,
                                ffi::Result<ffi::AnyBuffer> out, uint64_t pool_id) {
  if (auto e = cuda_ready(); e.failure()) return e;
  std::byte* stage = CudaStaging::here().reserve(out->size_bytes());
  if (auto e = state_copy(stage, out->size_bytes(), true, pool_id); e.failure()) return e;
  if (auto e = cuda_copy(false, stage, out->untyped_data(), out->size_bytes(), stream); e.failure()) return e;
  return cuda_sync(stream);
}

inline ffi::Error state_set_gpu(void* stream, ffi::AnyBuffer, ffi::AnyBuffer in, ffi::Result<ffi::AnyBuffer>,
                                uint64_t pool_id) {
  if (auto e = cuda_ready(); e.failure()) return e;
  std::byte* stage = CudaStaging::here().reserve(in.size_bytes());
  if (auto e = cuda_copy(true, stage, in.untyped_data(), in.size_bytes(), stream); e.failure()) return e;
  if (auto e = cuda_sync(stream); e.failure()) return e;
  return state_copy(stage, in.size_bytes(), false, pool_id);
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

using Stream = ffi::PlatformStream<void*>;

XLA_FFI_DEFINE_HANDLER(kStateGetGpu, state_get_gpu,
                       ffi::Ffi::Bind()
                           .Ctx<Stream>()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<uint64_t>("pool_id"));
XLA_FFI_DEFINE_HANDLER(kStateSetGpu, state_set_gpu,
                       ffi::Ffi::Bind()
                           .Ctx<Stream>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<uint64_t>("pool_id"));
XLA_FFI_DEFINE_HANDLER(kSendGpu, send_gpu,
                       ffi::Ffi::Bind()
                           .Ctx<Stream>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::AnyBuffer>()
                           .Arg<ffi::Buffer<ffi::S32>>()
                           .Ret<ffi::AnyBuffer>()
                           .Attr<uint64_t>("pool_id"));
XLA_FFI_DEFINE_HANDLER(kRecvGpu, recv_gpu,
                       ffi::Ffi::Bind()
                           .Ctx<Stream>()
                           .Arg<ffi::AnyBuffer>()
                           .RemainingRets()
                           .Attr<uint64_t>("pool_id")
                           .Attr<int64_t>("by_env_id")
                           .Attr<int64_t>("spin_ns"));

}  // namespace aiopool::xla_ffi
#endif
