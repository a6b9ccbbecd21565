// One untimed-call hook for the whole process (errors.h): the first module that links MuJoCo to
// be imported publishes its TimerHook as a capsule on the aiopool._native package, and every later
// one uses that hook instead of its own. Module init runs under the GIL, so imports never race.
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string_view>

#include "errors.h"

namespace aiopool::mujoco {

inline void share_timer_hook() {
  namespace nb = nanobind;
  static constexpr const char* kName = "aiopool.mujoco.TimerHook";
  nb::module_ package = nb::module_::import_("aiopool._native");
  if (nb::hasattr(package, "_mujoco_timer_hook")) {
    nb::object shared = package.attr("_mujoco_timer_hook");
    const char* name = nb::isinstance<nb::capsule>(shared) ? nb::borrow<nb::capsule>(shared).name() : nullptr;
    if (name == nullptr || std::string_view(name) != kName)
      throw std::runtime_error("aiopool._native._mujoco_timer_hook is not a TimerHook capsule");
    timer_hook = static_cast<const TimerHook*>(nb::borrow<nb::capsule>(shared).data());
  } else {
    package.attr("_mujoco_timer_hook") = nb::capsule(&kOwnTimerHook, kName);
  }
}

}  // namespace aiopool::mujoco
