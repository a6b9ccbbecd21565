// `aiopool._native._box2d`: gymnasium's Box2D envs, on Box2D 2.3 compiled from the box2d-py
// sdist (cmake/box2d.cmake), the C++ gymnasium's own envs step through pybox2d.
#include "envs/box2d/bipedal_walker.h"
#include "envs/box2d/car_racing.h"
#include "envs/box2d/lunar_lander.h"
#include "module.h"

NB_MODULE(_box2d, m) {
  aiopool::define_pool_module(m,
                              "aiopool's Box2D envs: gymnasium's LunarLander, BipedalWalker and CarRacing, "
                              "stepped by the native engine.");
}
