// `aiopool._native._mujoco`: gymnasium's MuJoCo v5 envs, linked against libmujoco.so.3.17.0 from
// the mujoco==3.17.0 wheel (the binary gymnasium's envs step, so the physics is bit-equal).
#include <nanobind/stl/array.h>

#include "envs/mujoco/ant.h"
#include "envs/mujoco/half_cheetah.h"
#include "envs/mujoco/hopper.h"
#include "envs/mujoco/humanoid.h"
#include "envs/mujoco/inverted_pendulum.h"
#include "envs/mujoco/reacher.h"
#include "envs/mujoco/share_timer_hook.h"
#include "envs/mujoco/swimmer.h"
#include "module.h"

NB_MODULE(_mujoco, m) {
  // The headers we compiled against must be the library the loader found.
  if (mj_version() != mjVERSION_HEADER)
    throw std::runtime_error("aiopool._mujoco was built for MuJoCo " + std::to_string(mjVERSION_HEADER) +
                             " but loaded MuJoCo " + std::to_string(mj_version()) +
                             "; reinstall aiopool against mujoco==3.17.0");
  aiopool::mujoco::share_timer_hook();
  // For tests/test_rng.py: n standard_normal draws from a PCG64 state (state_hi, state_lo,
  // inc_hi, inc_lo), exactly as the envs draw them.
  m.def("_standard_normal_draws", [](std::array<uint64_t, 4> s, std::size_t n) {
    aiopool::Rng rng(s[0], s[1], s[2], s[3]);
    std::vector<double> out(n);
    for (double& x : out) x = aiopool::standard_normal(rng);
    return out;
  });
  aiopool::define_pool_module(m,
                              "aiopool's MuJoCo envs: gymnasium's v5 family, stepped by the native engine.");
}
