// `aiopool._native._metaworld`: Meta-World 3.1.1's v3 tasks, linked against libmujoco.so.3.17.0
// from the mujoco==3.17.0 wheel; their models are read from the installed metaworld package.
#include "envs/metaworld/push.h"
#include "envs/metaworld/reach.h"
#include "envs/mujoco/share_timer_hook.h"
#include "module.h"

NB_MODULE(_metaworld, m) {
  if (mj_version() != mjVERSION_HEADER)
    throw std::runtime_error("aiopool._metaworld was built for MuJoCo " + std::to_string(mjVERSION_HEADER) +
                             " but loaded MuJoCo " + std::to_string(mj_version()) +
                             "; reinstall aiopool against mujoco==3.17.0");
  aiopool::mujoco::share_timer_hook();
  aiopool::define_pool_module(
      m, "aiopool's Meta-World envs: Meta-World's v3 tasks, stepped by the native engine.");
}
