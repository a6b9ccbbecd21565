// `aiopool._native._dmc`: the DeepMind Control Suite's tasks (dm_control 1.0.50), linked
// against libmujoco.so.3.17.0 from the mujoco==3.17.0 wheel, dm_control's own MuJoCo.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "envs/dmc/acrobot.h"
#include "envs/dmc/ball_in_cup.h"
#include "envs/dmc/cartpole.h"
#include "envs/dmc/cheetah.h"
#include "envs/dmc/dog.h"
#include "envs/dmc/finger.h"
#include "envs/dmc/fish.h"
#include "envs/dmc/hopper.h"
#include "envs/dmc/humanoid.h"
#include "envs/dmc/lqr.h"
#include "envs/dmc/manipulator.h"
#include "envs/dmc/pendulum.h"
#include "envs/dmc/point_mass.h"
#include "envs/dmc/quadruped.h"
#include "envs/dmc/reacher.h"
#include "envs/dmc/stacker.h"
#include "envs/dmc/swimmer.h"
#include "envs/dmc/walker.h"
#include "envs/mujoco/share_timer_hook.h"
#include "module.h"

NB_MODULE(_dmc, m) {
  if (mj_version() != mjVERSION_HEADER)
    throw std::runtime_error("aiopool._dmc was built for MuJoCo " + std::to_string(mjVERSION_HEADER) +
                             " but loaded MuJoCo " + std::to_string(mj_version()) +
                             "; reinstall aiopool against mujoco==3.17.0");
  aiopool::mujoco::share_timer_hook();
  // For tests/test_rng.py: RandomState(seed)'s draws, as the tasks make them: "sample"
  // (random_sample), "normal" (standard_normal), "randint:N" (randint(N)), in the order given.
  m.def("_random_state_draws", [](uint32_t seed, const std::vector<std::string>& kinds) {
    aiopool::dmc::RandomState r;
    r.seed(seed);
    std::vector<double> out;
    for (const std::string& k : kinds) {
      if (k.starts_with("randint:"))
        out.push_back(static_cast<double>(r.randint(std::stoll(k.substr(8)))));
      else
        out.push_back(k == "normal" ? r.standard_normal() : r.random_sample());
    }
    return out;
  });
  // For tests/test_parity_dmc.py: scipy.ndimage.zoom(a, factor), as quadruped-escape calls it.
  m.def("_spline_zoom", [](nb::ndarray<nb::numpy, const double, nb::ndim<2>, nb::c_contig> a, double factor) {
    const int rows = static_cast<int>(a.shape(0)), cols = static_cast<int>(a.shape(1));
    const int out_rows = aiopool::dmc::SplineZoom::output_size(rows, factor);
    const int out_cols = aiopool::dmc::SplineZoom::output_size(cols, factor);
    std::vector<double> out(static_cast<std::size_t>(out_rows) * out_cols);
    aiopool::dmc::SplineZoom::zoom(a.data(), rows, cols, factor, out.data());
    return std::make_pair(std::make_pair(out_rows, out_cols), out);
  });
  aiopool::define_pool_module(m, "aiopool's DeepMind Control Suite envs, stepped by the native engine.");
}
