// gym3's libenv C ABI (LIBENV_VERSION 1), as the library in procgen 0.10.7's wheel exports it:
// the types its functions take, laid out as that ABI fixes them, and a handle on the loaded
// library. Only procgen.h uses it.
//
// The library is loaded once per process with dlopen (RTLD_LOCAL: its Qt stays its own) and
// never unloaded. libenv_make may run on any thread; one libenv_env is only ever touched by
// the worker stepping its env (libenv: "different environments must be usable from different
// threads simultaneously").
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace aiopool::procgen {

namespace abi {

constexpr int kMaxName = 128;
constexpr int kMaxDims = 16;
constexpr int kVersion = 1;

enum Dtype : int { kUnused = 0, kUInt8 = 1, kInt32 = 2, kFloat32 = 3 };
enum SpaceName : int { kObservation = 1, kAction = 2, kInfo = 3 };

union Value {
  uint8_t uint8;
  int32_t int32;
  float float32;
};

struct TensorType {
  char name[kMaxName];
  int scalar_type;
  Dtype dtype;
  int shape[kMaxDims];
  int ndim;
  Value low;
  Value high;
};

struct Option {
  char name[kMaxName];
  Dtype dtype;
  int count;
  void* data;
};

struct Options {
  Option* items;
  int count;
};

// Pointers to the caller's buffers, space by space; one env per libenv_env here, so one
// pointer per space.
struct Buffers {
  void** ob;
  float* rew;
  uint8_t* first;
  void** info;
  void** ac;
};

}  // namespace abi

// The functions of one loaded libenv.so.
struct Library {
  int (*version)();
  void* (*make)(int num, abi::Options options);
  int (*get_tensortypes)(void* env, abi::SpaceName name, abi::TensorType* out);
  void (*set_buffers)(void* env, abi::Buffers* buffers);
  void (*observe)(void* env);
  void (*act)(void* env);
  void (*close)(void* env);

  // The library at `path`, loaded on first use; throws std::runtime_error with dlerror's
  // message where it cannot be loaded or is not a libenv of this ABI's version.
  static const Library& get(const std::string& path) {
    static std::mutex mutex;
    static std::map<std::string, Library> loaded;
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto it = loaded.find(path); it != loaded.end()) return it->second;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
      throw std::runtime_error("cannot load procgen's library " + path + ": " + dlerror());
    Library lib{};
    bind(handle, "libenv_version", lib.version);
    bind(handle, "libenv_make", lib.make);
    bind(handle, "libenv_get_tensortypes", lib.get_tensortypes);
    bind(handle, "libenv_set_buffers", lib.set_buffers);
    bind(handle, "libenv_observe", lib.observe);
    bind(handle, "libenv_act", lib.act);
    bind(handle, "libenv_close", lib.close);
    if (lib.version() != abi::kVersion)
      throw std::runtime_error(path + " implements libenv version " + std::to_string(lib.version()) +
                               ", expected " + std::to_string(abi::kVersion));
    return loaded.emplace(path, lib).first->second;
  }

 private:
  template <class F>
  static void bind(void* handle, const char* name, F& fn) {
    void* symbol = dlsym(handle, name);
    if (symbol == nullptr) throw std::runtime_error(std::string("procgen's library has no ") + name);
    fn = reinterpret_cast<F>(symbol);
  }
};

}  // namespace aiopool::procgen
