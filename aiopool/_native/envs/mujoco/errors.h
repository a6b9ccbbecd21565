// MuJoCo errors on a worker thread: mju_error (a stack overflow, a bad model) ends the process
// under MuJoCo's default handler. `trapped(f)` runs MuJoCo calls with a thread-local log handler
// (MuJoCo's hook for this, which its Python bindings use) that jumps back with the message, so
// the env can end its episode and report it instead. `trapped` calls also run untimed (below).
// Shared by the MuJoCo and Control Suite families.
#pragma once

#include <mujoco/mujoco.h>

#include <atomic>
#include <csetjmp>
#include <cstdio>
#include <mutex>

namespace aiopool::mujoco {

extern "C" {
MJAPI mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);
MJAPI mjfLogHandler _mjPRIVATE_getGlobalLogHandler(void);
}

struct ErrorTrap {
  std::jmp_buf jump;
  char message[1024];
};
inline thread_local ErrorTrap t_trap;

// Errors jump back to `trapped`; warnings go on to the process's handler, as without a trap.
inline void trap_log(const mjLogMessage* msg) {
  if (msg->level == mjLOG_ERROR) {
    std::snprintf(t_trap.message, sizeof t_trap.message, "%s", msg->subject);
    std::longjmp(t_trap.jump, 1);
  }
  if (mjfLogHandler global = _mjPRIVATE_getGlobalLogHandler()) global(msg);
}

// ---- MuJoCo's profiling timers, without the clock ---------------------------------------------
// MuJoCo times each stage of a call into mjData.timer through the process-wide hook mjcb_time,
// which the mujoco Python package sets when it is imported (so that its users' data.timer
// counts). With it set, a step reads the clock through the Python binding about twelve times a
// substep: 7-9 % of a dmc/walker-walk step (perf; the Control Suite always imports mujoco, to
// build its models). The pool's mjData are never profiled, so its MuJoCo calls run untimed: one
// hook stands in front of whatever mjcb_time is, answers 0 to a thread inside an untimed call and
// passes every other call on. A timer set later (mujoco.set_mjcb_time) is put behind the hook at
// the next untimed call; a null mjcb_time is left alone (MuJoCo then reads no clock at all).
//
// The MuJoCo and Control Suite modules are separate shared objects, each with a copy of this code:
// two hooks would wrap each other, so a module's init shares the first one loaded
// (share_timer_hook.h) and both use it through `timer_hook`. (Another library that wrapped
// mjcb_time the same way, putting itself in front again and again, would wrap this hook and be
// wrapped by it: no general fix exists; none is known.)
struct TimerHook {
  void (*enter)();  // this thread's MuJoCo calls are untimed until leave()
  void (*leave)();
};

namespace timers {

inline thread_local int t_untimed = 0;        // untimed calls this thread is in
inline std::atomic<mjfTime> g_next{nullptr};  // the hook that was set before ours

inline mjtNum hook() {
  if (t_untimed > 0) return 0;
  const mjfTime next = g_next.load(std::memory_order_acquire);
  return next != nullptr ? next() : 0;
}

// Puts `hook` in front of mjcb_time, unless it is there already or no hook is set. A timer the
// user sets meanwhile (mujoco.set_mjcb_time writes mjcb_time without this mutex) is never
// overwritten: the swap is a compare-and-swap, retried with the hook that is there then. (MuJoCo
// and the mujoco package read and write mjcb_time as a plain pointer; an aligned pointer is read
// and written whole on every platform MuJoCo supports.)
inline void put_in_front() {
  std::atomic_ref<mjfTime> current(mjcb_time);
  mjfTime seen = current.load(std::memory_order_relaxed);
  if (seen == nullptr || seen == &hook) return;
  static std::mutex mutex;  // the workers of every pool
  std::lock_guard<std::mutex> lock(mutex);
  seen = current.load(std::memory_order_acquire);
  while (seen != nullptr && seen != &hook) {
    g_next.store(seen, std::memory_order_release);
    if (current.compare_exchange_weak(seen, &hook, std::memory_order_acq_rel, std::memory_order_acquire))
      return;
  }
}

inline void enter() {
  put_in_front();
  ++t_untimed;
}
inline void leave() { --t_untimed; }

}  // namespace timers

inline constexpr TimerHook kOwnTimerHook{&timers::enter, &timers::leave};
inline const TimerHook* timer_hook = &kOwnTimerHook;  // the shared one, once a module has shared it

// Untimed for its lifetime.
class Untimed {
 public:
  Untimed() { timer_hook->enter(); }
  ~Untimed() { timer_hook->leave(); }
  Untimed(const Untimed&) = delete;
  Untimed& operator=(const Untimed&) = delete;
};

// Runs f (MuJoCo calls on plain data only: a longjmp skips destructors) untimed; false if MuJoCo
// raised an error, whose message is then in t_trap.message.
template <class F>
[[gnu::noinline]] bool trapped(F f) {
  const Untimed untimed;  // in this frame, which the longjmp returns to
  _mjPRIVATE_setTlsLogHandler(&trap_log);
  if (setjmp(t_trap.jump) != 0) {
    _mjPRIVATE_setTlsLogHandler(nullptr);
    return false;
  }
  f();
  _mjPRIVATE_setTlsLogHandler(nullptr);
  return true;
}

// Everything but warnings goes on to the process's handler.
inline void drop_warnings(const mjLogMessage* msg) {
  if (msg->level == mjLOG_WARNING) return;
  if (mjfLogHandler global = _mjPRIVATE_getGlobalLogHandler()) global(msg);
}

}  // namespace aiopool::mujoco
