// MuJoCo errors on a worker thread: mju_error (a stack overflow, a bad model) ends the process
// under MuJoCo's default handler. `trapped(f)` runs MuJoCo calls with a thread-local log handler
// (MuJoCo's hook for this, which its Python bindings use) that jumps back with the message, so
// the env can end its episode and report it instead. Shared by the MuJoCo and Control Suite
// families.
#pragma once

#include <mujoco/mujoco.h>

#include <csetjmp>
#include <cstdio>

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

// Runs f (MuJoCo calls on plain data only: a longjmp skips destructors); false if MuJoCo raised
// an error, whose message is then in t_trap.message.
template <class F>
[[gnu::noinline]] bool trapped(F f) {
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
