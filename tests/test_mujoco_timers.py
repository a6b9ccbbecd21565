"""The pool's MuJoCo steps never read the user's timer hook; the user's own MuJoCo calls still do.

MuJoCo times each stage of a call through the process-wide `mjcb_time`, which `import mujoco`
sets (and `mujoco.set_mjcb_time` replaces). The pool's mjData are never profiled, so its envs step
untimed (aiopool/_native/envs/mujoco/errors.h): a counting timer set by the user sees no call from
a pool's reset or step, on a worker thread or on the calling thread, while the user's own
`mj_step` calls it as often as in a process without aiopool. Both families that link MuJoCo
share one hook, in either import order (two would wrap each other and recurse). Each case runs in
a fresh process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
import mujoco
import numpy as np

calls = 0
def clock():
    global calls
    calls += 1
    return float(calls)

model = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><body><freejoint/><geom size=".1"/></body></worldbody></mujoco>')
data = mujoco.MjData(model)

def user_step_calls():
    before = calls
    mujoco.mj_step(model, data)
    return calls - before

mujoco.set_mjcb_time(clock)
alone = user_step_calls()            # the user's step, no aiopool in the process yet

import aiopool
envs = [aiopool.make_gymnasium(env_id, 3, num_threads=2) for env_id in sys.argv[1].split(",")]
for env in envs:
    env.reset(seed=0)

def pool_step_calls():
    before = calls
    for env in envs:
        env.reset(seed=1)  # resets too: a Control Suite task's runs MuJoCo calls of its own
        for _ in range(5):
            env.step(np.stack([env.single_action_space.sample() for _ in range(3)]))
    return calls - before

out = {"alone": alone, "pool": pool_step_calls(), "user": user_step_calls()}
mujoco.set_mjcb_time(None)               # mujoco's own clock again, as after its import
out["pool_none"] = pool_step_calls()
out["user_none"] = user_step_calls()
mujoco.set_mjcb_time(clock)              # set after the pools ran: put behind the hook again
out["pool_again"] = pool_step_calls()
out["user_again"] = user_step_calls()
for env in envs:
    env.close()
print(json.dumps(out))
"""


@pytest.mark.parametrize("env_ids", ["Hopper-v5,dmc/cartpole-balance",
                                     "dmc/cartpole-balance,Hopper-v5"])
def test_pool_steps_are_untimed_and_user_calls_still_timed(env_ids: str) -> None:
    run = subprocess.run([sys.executable, "-c", SCRIPT, env_ids], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["alone"] > 0                   # MuJoCo times a step through the hook
    assert out["pool"] == 0                   # 2 resets, 30 steps, 2 families: never the hook
    assert out["user"] == out["alone"]        # the user's step: every timer call passed on
    assert out["pool_none"] == 0 and out["user_none"] == 0
    assert out["pool_again"] == 0
    assert out["user_again"] == out["alone"]


def test_default_timer_of_import_mujoco_still_times_user_calls() -> None:
    """`import mujoco`'s own clock keeps timing the user's data after a pool has stepped."""
    code = (
        "import mujoco, numpy as np, aiopool\n"
        "env = aiopool.make_gymnasium('dmc/cartpole-balance', 2, num_threads=2)\n"
        "env.reset(seed=0)\n"
        "for _ in range(5): env.step(np.zeros((2, 1)))\n"
        "m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><freejoint/>"
        "<geom size=\".1\"/></body></worldbody></mujoco>')\n"
        "d = mujoco.MjData(m)\n"
        "for _ in range(100): mujoco.mj_step(m, d)\n"
        "t = d.timer[mujoco.mjtTimer.mjTIMER_STEP]\n"
        "print(t.number, t.duration)\n"
        "env.close()\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    number, duration = run.stdout.split()[-2:]
    assert int(number) == 100 and float(duration) > 0.0
