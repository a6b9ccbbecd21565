// `aiopool._native._mujoco`: gymnasium's MuJoCo v5 envs, linked against libmujoco.so.4.0.0 from
// the mujoco-core==4.0.0 wheel (the binary gymnasium's envs step, so the physics is bit-equal).
#include "envs/mujoco/ant.h"
#include "envs/mujoco/half_cheetah.h"
#include "envs/mujoco/hopper.h"
#include "envs/mujoco/humanoid.h"
#include "envs/mujoco/inverted_pendulum.h"
#include "envs/mujoco/reacher.h"
#include "envs/mujoco/swimmer.h"
#include "module.h"

NB_MODULE(_mujoco, m) {
  // The headers we compiled against must be the library the loader found.
  if (mj_version() != mjVERSION_HEADER)
    throw std::runtime_error("aiopool._mujoco was built for MuJoCo " + std::to_string(mjVERSION_HEADER) +
                             " but loaded MuJoCo " + std::to_string(mj_version()) +
                             "; reinstall aiopool against mujoco-core==4.0.0");
  aiopool::define_pool_module(m,
                              "aiopool's MuJoCo envs: gymnasium's v5 family, stepped by the native engine.");
}
