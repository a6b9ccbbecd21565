// The few CUDA driver calls xla()'s GPU handlers make (xla_ffi.h), from libcuda.so.1 loaded at
// run time: no CUDA toolkit at build time and no CUDA library linked, so one build serves
// machines with and without a GPU. The driver's C ABI is stable; the versioned names (_v2) are
// the ones cuda.h maps its calls to since CUDA 4.
//
// Threads: get() loads the library once (a function-local static). Staging buffers are per
// thread: XLA runs a GPU program's host calls on its own threads, one call at a time each.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <string>

namespace aiopool {

class CudaDriver {
 public:
  using Result = int;                    // CUresult: 0 is CUDA_SUCCESS
  using DevicePtr = unsigned long long;  // CUdeviceptr
  using Stream = void*;                  // CUstream

  static const CudaDriver& get() {
    static const CudaDriver driver;
    return driver;
  }

  // Empty when loaded with every call; else why not (no libcuda.so.1: no NVIDIA driver here).
  const std::string& error() const { return error_; }

  // `what` failed with `r`: the driver's own name and text for it.
  std::string explain(const char* what, Result r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (get_error_name_ != nullptr) get_error_name_(r, &name);
    if (get_error_string_ != nullptr) get_error_string_(r, &text);
    return std::string(what) + " failed: " + (name != nullptr ? name : "CUDA error " + std::to_string(r)) +
           (text != nullptr ? std::string(" (") + text + ")" : "");
  }

  Result (*memcpy_dtoh)(void* dst, DevicePtr src, std::size_t bytes, Stream stream) = nullptr;
  Result (*memcpy_htod)(DevicePtr dst, const void* src, std::size_t bytes, Stream stream) = nullptr;
  Result (*stream_synchronize)(Stream stream) = nullptr;
  Result (*mem_alloc_host)(void** p, std::size_t bytes) = nullptr;  // pinned, in the current context
  Result (*mem_free_host)(void* p) = nullptr;

 private:
  CudaDriver() {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) {
      const char* e = dlerror();
      error_ = std::string("the CUDA driver (libcuda.so.1) cannot be loaded: ") + (e != nullptr ? e : "?");
      return;
    }
    const bool ok = find(memcpy_dtoh, "cuMemcpyDtoHAsync_v2") && find(memcpy_htod, "cuMemcpyHtoDAsync_v2") &&
                    find(stream_synchronize, "cuStreamSynchronize") &&
                    find(mem_alloc_host, "cuMemAllocHost_v2") && find(mem_free_host, "cuMemFreeHost");
    if (ok) {
      find(get_error_name_, "cuGetErrorName");
      find(get_error_string_, "cuGetErrorString");
    }
  }
  // Never unloaded: the driver lives as long as the process.

  template <class F>
  bool find(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib_, name));
    if (f == nullptr && error_.empty())
      error_ = std::string("libcuda.so.1 has no ") + name + " (driver too old?)";
    return f != nullptr;
  }

  void* lib_ = nullptr;
  std::string error_;
  Result (*get_error_name_)(Result, const char**) = nullptr;
  Result (*get_error_string_)(Result, const char**) = nullptr;
};

// One thread's host staging buffer for the GPU handlers: pinned (page-locked) memory, so the
// copies to and from the device are DMA the driver need not stage again; pageable memory where
// pinning fails (the copies then still work, synchronously inside the driver).
class CudaStaging {
 public:
  static CudaStaging& here() {
    thread_local CudaStaging s;
    return s;
  }
  ~CudaStaging() { drop(); }
  CudaStaging(const CudaStaging&) = delete;
  CudaStaging& operator=(const CudaStaging&) = delete;

  // At least `bytes` of staging (its old contents are not kept).
  std::byte* reserve(std::size_t bytes) {
    if (bytes <= size_) return data_;
    drop();
    const std::size_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
    const CudaDriver& cu = CudaDriver::get();
    void* p = nullptr;
    if (cu.mem_alloc_host != nullptr && cu.mem_alloc_host(&p, want) == 0) {
      pinned_ = true;
    } else {
      p = ::operator new(want);
      pinned_ = false;
    }
    data_ = static_cast<std::byte*>(p);
    size_ = want;
    return data_;
  }
  bool pinned() const { return pinned_; }

 private:
  CudaStaging() = default;
  void drop() {
    if (data_ == nullptr) return;
    if (pinned_)
      CudaDriver::get().mem_free_host(data_);  // (its context may be gone at thread exit: ignored)
    else
      ::operator delete(data_);
    data_ = nullptr;
    size_ = 0;
  }
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_ = false;
};

}  // namespace aiopool
