// `aiopool._native._core`: the engine with the envs that need no simulator library (classic
// control and the Counting test env).
#include "envs/classic_control/acrobot.h"
#include "envs/classic_control/cartpole.h"
#include "envs/classic_control/mountain_car.h"
#include "envs/classic_control/mountain_car_continuous.h"
#include "envs/classic_control/pendulum.h"
#include "envs/testing/counting.h"
#include "module.h"

NB_MODULE(_core, m) {
  aiopool::define_pool_module(m,
                              "aiopool's native engine: worker threads, batch blocks, the eventfd doorbell.");
}
