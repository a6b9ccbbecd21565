"""Env-steps/s of every way to drive aiopool, against its peers and the simulator limit.

Question: how many CartPole-v1 env-steps per second does aiopool deliver through ``stream()``
(asyncio and uvloop), ``recv()`` + ``send()``, ``step()`` and ``recv_blocking()``, and how does
that compare with EnvPool (sync and async), gymnasium's Sync/AsyncVectorEnv, a plain Python
loop over ``gymnasium.make`` envs and the raw C++ simulator on one thread × the usable cores?
The same for the MuJoCo v5 envs (``--env Ant-v5``), where the limit is raw MuJoCo on one
thread × the worker threads N of each column.

Method: every runner runs in this process tree, in one run. Each measurement builds its pool,
warms up, then counts env-steps received over a fixed wall time. Repeats are interleaved (each
repeat runs every runner once, in a shuffled order), so slow phases of a noisy machine hit all
runners alike; the table reports medians over repeats, and a ratio is the median of the
per-repeat ratios (the two runners measured in the same repeat, a few seconds apart). Actions
are precomputed random arrays, so the policy costs ~nothing. The limit is ``env_limit.cc``
(``mujoco_limit.cc`` for MuJoCo ids, ``dmc_limit.cc`` for the Control Suite), compiled here
with the extension's flags.

Usage:
    python benchmarks/throughput.py                     # ~6 min on 2 cores
    python benchmarks/throughput.py --env Ant-v5        # MuJoCo: ~6 min on 2 cores
    python benchmarks/throughput.py --quick --env Counting-v0 --no-peers   # smoke test
    python benchmarks/throughput.py --env Pong-v5       # Atari: ale-py's vector env as a peer
    python benchmarks/throughput.py --env LunarLander-v3   # Box2D (also BipedalWalker-v3)
    python benchmarks/throughput.py --env dmc/cheetah-run  # the Control Suite (EnvPool's
                                                           # CheetahRun-v1, dm_control's loop)
    python benchmarks/throughput.py --env HalfCheetah-v5 --pixels 84x84 --repeats 3
        # pixel observations (obs_type="pixels"), drawn in the worker threads, against
        # gymnasium's vector envs over render_mode="rgb_array" + AddRenderObservation
    python benchmarks/throughput.py --env Pong-v5 --repeats 3   # issue 25.3: stream ÷ the
        # best of EnvPool async and ale-py async per repeat, 16/8 and 32/16, 1 and 2 threads

Then, unless ``--overhead-envs ''``, the adapter-overhead table: CPU µs per call of the
gymnasium, SB3 and dm_env adapters against the raw pool's ``send`` + ``recv_blocking`` (and its
async ``step``, and the same plus a copy of the obs: the floor of ``copy=True``) at M = 1, 4,
16; and, when SyncVectorEnv ran, the gymnasium adapter ÷ SyncVectorEnv per column.

Writes ``<out>/throughput.json`` and ``<out>/throughput.png`` (default ``benchmarks/results``)
and prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _machine import busy_neighbour, load_text, machine_info

import aiopool
from aiopool import registry
from aiopool._native import families
from aiopool._native.families import MUJOCO_VERSION

ROOT = Path(__file__).resolve().parents[1]
LIMIT_SOURCE = ROOT / "benchmarks" / "env_limit.cc"
MUJOCO_LIMIT_SOURCE = ROOT / "benchmarks" / "mujoco_limit.cc"
DMC_LIMIT_SOURCE = ROOT / "benchmarks" / "dmc_limit.cc"
ENV_HEADERS = ROOT / "aiopool" / "_native" / "envs"
DEFAULT_CONFIGS = "32/16/1,32/16/2,256/128/1,256/128/2,64/64/2"
QUICK_CONFIGS = "32/16/1,64/64/2"
# The targets (issues): stream ÷ EnvPool async at 32/16 and stream ÷ limit at 256/128.
TARGETS = (((32, 16), "EnvPool async"), ((256, 128), "limit"))
# MuJoCo steps take 0.05–0.5 ms, so a few envs per thread keep the workers busy. The targets
# (issue 4): stream ÷ EnvPool async and stream ÷ (limit × N), both at 16/8 with N = 1 and 2.
MUJOCO_CONFIGS = "8/8/1,8/4/1,16/8/1,16/8/2,16/16/2,32/16/2"
MUJOCO_TARGETS = (((16, 8), "EnvPool async"), ((16, 8), "limit"))
# Box2D steps take 10-50 µs (LunarLander ~11, BipedalWalker ~45): the targets are
# stream ÷ EnvPool async and stream ÷ gymnasium's AsyncVectorEnv, at 32/16 on 1 and 2 threads.
# The limit program links the module's Box2D build (CMake targets box2d_limit_<Class>).
BOX2D_CONFIGS = "32/16/1,32/16/2,64/32/2"
BOX2D_TARGETS = (((32, 16), "EnvPool async"), ((32, 16), "gymnasium AsyncVectorEnv"))
# The Control Suite (issue 27): stream ÷ EnvPool async (its CheetahRun-v1, ...) at 32/16 on 1
# and 2 threads; dm_control's own Python loop is the other peer; the limit is dmc_limit.cc,
# raw MuJoCo stepping the task's compiled model with its substeps (target: 90 % of it × N).
DMC_CONFIGS = "32/16/1,32/16/2"
DMC_TARGETS = (((32, 16), "EnvPool async"), ((32, 16), "dm_control loop"), ((32, 16), "limit"))
# Pixel observations (--pixels, MuJoCo): frames take ~1 ms each to draw in software GL, so a
# few envs per thread; the targets (issue 26) are stream at 2 threads ÷ 1 thread and ÷
# gymnasium's AsyncVectorEnv (one process per env) at 8/4.
PIXELS_CONFIGS = "8/4/1,8/4/2,16/8/2"
PIXELS_TARGETS = (((8, 4), "gymnasium AsyncVectorEnv"),)
# --pixels WxH: the kwargs aiopool's runners and gymnasium's take for pixel observations (empty:
# state observations). gymnasium's envs also get AddRenderObservation.
OBS_KWARGS: dict[str, Any] = {}
GYM_KWARGS: dict[str, Any] = {}
ACTION_ROUNDS = 64  # distinct precomputed action arrays, cycled
ADAPTER_ROW = "aiopool gymnasium adapter (step, B=M)"


@dataclass(frozen=True)
class Family:
    """Per env family: default configs, target ratio columns and what the limit is scaled by."""

    configs: str
    targets: tuple[tuple[tuple[int, int], str], ...]  # ((M, B), reference row prefix)
    max_gym_envs: int  # default --max-gym-envs
    limit_per_thread: bool  # limit row = 1-thread rate × N of the column, else × usable cores
    unit: str  # rates are reported in this many env-steps/s: "M" or "k"
    warmup: float = 0.3  # default --warmup, seconds
    best_of: tuple[str, ...] = ()  # peer rows whose per-repeat maximum is the BEST_PEER row


CLASSIC = Family(DEFAULT_CONFIGS, TARGETS, 32, limit_per_thread=False, unit="M")
MUJOCO = Family(MUJOCO_CONFIGS, MUJOCO_TARGETS, 8, limit_per_thread=True, unit="k")
BOX2D = Family(BOX2D_CONFIGS, BOX2D_TARGETS, 32, limit_per_thread=True, unit="k")
DMC = Family(DMC_CONFIGS, DMC_TARGETS, 32, limit_per_thread=True, unit="k")
PIXELS = Family(PIXELS_CONFIGS, PIXELS_TARGETS, 8, limit_per_thread=True, unit="k")
DMC_PIXELS = Family(PIXELS_CONFIGS, (((8, 4), "dm_control loop"),), 8, limit_per_thread=True,
                    unit="k")
UNITS = {"M": 1e6, "k": 1e3}


def family(env_id: str) -> Family:
    if OBS_KWARGS:
        return DMC_PIXELS if registry.family_of(env_id) is families.DMC else PIXELS
    if atari_rom(env_id) is not None:
        return ATARI
    found = registry.family_of(env_id)
    return {families.MUJOCO: MUJOCO, families.BOX2D: BOX2D, families.DMC: DMC}.get(
        found, CLASSIC) if found is not None else CLASSIC


def envpool_id(env_id: str) -> str:
    """EnvPool's id of an env: the Control Suite's ``dmc/cheetah-run`` is its CheetahRun-v1
    (the EnvPool drop-in's naming)."""
    from aiopool.envpool import _envpool_name

    return _envpool_name(env_id)


# -- what is measured ---------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Shape:
    """One pool shape. ``None`` where the runner has no such knob (gymnasium, the limit)."""

    num_envs: int
    batch_size: int | None = None
    num_threads: int | None = None

    @classmethod
    def parse(cls, text: str) -> Shape:
        m, b, n = (int(x) for x in text.split("/"))
        if not 1 <= b <= m or n < 1:
            raise argparse.ArgumentTypeError(
                f"config {text!r}: expected M/B/N with 1 <= B <= M and N >= 1")
        return cls(m, b, n)

    @property
    def label(self) -> str:
        return "/".join("-" if x is None else str(x) for x in asdict(self).values())


@dataclass(frozen=True)
class Budget:
    warmup: float  # seconds stepped before the timed window
    seconds: float  # length of the timed window


@dataclass(frozen=True)
class Timing:
    steps: int
    seconds: float


@dataclass(frozen=True)
class Measurement:
    runner: str
    shape: Shape
    repeat: int
    steps: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.steps / self.seconds


@dataclass(frozen=True)
class Summary:
    runner: str
    shape: Shape
    median: float  # env-steps/s
    min: float
    max: float
    repeats: int
    rates: tuple[float, ...] = ()  # one per repeat, in repeat order


def ratio(s: Summary, ref: Summary) -> float:
    """The median of s ÷ ref over the repeats that measured both (so a slow minute of the
    machine, which hits both runners of a repeat, cancels out)."""
    if len(s.rates) == len(ref.rates) > 0:
        return statistics.median(a / b for a, b in zip(s.rates, ref.rates, strict=True))
    return s.median / ref.median


class Meter:
    """Counts env-steps received in a timed window that opens after the warm-up.

    Call ``tick(steps)`` after each batch; it returns False once the window has closed.
    """

    def __init__(self, budget: Budget) -> None:
        self._warm_until = time.perf_counter() + budget.warmup
        self._seconds = budget.seconds
        self._start: float | None = None
        self.steps = 0
        self.elapsed = 0.0

    def tick(self, steps: int) -> bool:
        now = time.perf_counter()
        if self._start is None:
            if now >= self._warm_until:
                self._start = now
            return True
        self.steps += steps
        self.elapsed = now - self._start
        return self.elapsed < self._seconds

    def timing(self) -> Timing:
        return Timing(self.steps, self.elapsed)


def action_cycle(space: Any, n: int) -> Iterator[np.ndarray]:
    """Endless precomputed random actions for ``n`` envs of a gymnasium space."""
    import gymnasium as gym

    rng = np.random.default_rng(0)
    shape = (ACTION_ROUNDS, n, *(space.shape or ()))
    table: np.ndarray[Any, Any]
    if isinstance(space, gym.spaces.Discrete):
        table = rng.integers(space.start, space.start + space.n, size=shape)
    else:
        table = rng.uniform(space.low, space.high, size=shape)
    return itertools.cycle(list(table.astype(space.dtype)))


# -- runners: one function each, (env_id, shape, budget) -> Timing -------------------------


def run_aiopool_stream(env_id: str, shape: Shape, budget: Budget, *,
                       loop_factory: Callable[[], asyncio.AbstractEventLoop] | None) -> Timing:
    async def main() -> Timing:
        async with aiopool.make(env_id, shape.num_envs, shape.batch_size, shape.num_threads,
                                seed=0, **OBS_KWARGS) as pool:
            actions = action_cycle(pool.single_action_space, pool.batch_size)
            b = pool.batch_size
            # The warm-up starts once every env has reset, as the peers' (EnvPool's make,
            # AtariVectorEnv's reset) load Atari ROMs before their meters start: on one
            # thread 32 ROM loads (~0.1 s each) could run past the warm-up into the window.
            meter: Meter | None = None
            reset_rows = 0
            async for batch in pool.stream():
                batch.send(next(actions))
                if meter is None:
                    reset_rows += b
                    if reset_rows >= shape.num_envs:
                        meter = Meter(budget)
                elif not meter.tick(b):
                    break
            assert meter is not None
            return meter.timing()

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())


def run_aiopool_recv_send(env_id: str, shape: Shape, budget: Budget) -> Timing:
    async def main() -> Timing:
        async with aiopool.make(env_id, shape.num_envs, shape.batch_size, shape.num_threads,
                                seed=0, **OBS_KWARGS) as pool:
            actions = action_cycle(pool.single_action_space, pool.batch_size)
            b = pool.batch_size
            pool.async_reset()
            for _ in range(-(-shape.num_envs // b)):  # the resets (Atari's ROM loads) first,
                (await pool.recv()).send(next(actions))  # as in the stream runner
            meter = Meter(budget)
            while True:
                batch = await pool.recv()
                batch.send(next(actions))
                if not meter.tick(b):
                    return meter.timing()

    return asyncio.run(main())


def run_aiopool_step(env_id: str, shape: Shape, budget: Budget) -> Timing:
    async def main() -> Timing:
        m = shape.num_envs
        async with aiopool.make(env_id, m, m, shape.num_threads, seed=0, **OBS_KWARGS) as pool:
            actions = action_cycle(pool.single_action_space, m)
            pool.async_reset()
            await pool.recv()  # the reset batch: step() needs every env idle
            meter = Meter(budget)
            while True:
                await pool.step(next(actions))
                if not meter.tick(m):
                    return meter.timing()

    return asyncio.run(main())


def run_aiopool_recv_blocking(env_id: str, shape: Shape, budget: Budget) -> Timing:
    with aiopool.make(env_id, shape.num_envs, shape.batch_size, shape.num_threads,
                      seed=0, **OBS_KWARGS) as pool:
        actions = action_cycle(pool.single_action_space, pool.batch_size)
        b = pool.batch_size
        pool.async_reset()
        meter = Meter(budget)
        while True:
            batch = pool.recv_blocking()
            batch.send(next(actions))
            if not meter.tick(b):
                return meter.timing()


def run_aiopool_gymnasium(env_id: str, shape: Shape, budget: Budget) -> Timing:
    """aiopool behind the gymnasium VectorEnv adapter: sync ``step`` as legacy code calls it."""
    env = aiopool.make_gymnasium(env_id, num_envs=shape.num_envs,
                                 num_threads=shape.num_threads, seed=0, **OBS_KWARGS)
    return run_vector_env(env, shape.num_envs, budget)


def run_envpool_sync(env_id: str, shape: Shape, budget: Budget) -> Timing:
    import envpool

    m = shape.num_envs
    env = envpool.make_gymnasium(envpool_id(env_id), num_envs=m, batch_size=m,
                                 num_threads=shape.num_threads, seed=0)
    return run_vector_env(env, m, budget, reset_seed=None)  # EnvPool seeds at make time


def run_envpool_async(env_id: str, shape: Shape, budget: Budget) -> Timing:
    import envpool

    b = shape.batch_size
    assert b is not None
    env = envpool.make_gymnasium(envpool_id(env_id), num_envs=shape.num_envs, batch_size=b,
                                 num_threads=shape.num_threads, seed=0)
    try:
        actions = action_cycle(env.action_space, b)
        env.async_reset()
        meter = Meter(budget)
        while True:
            _obs, _rew, _term, _trunc, info = env.recv()
            env.send(next(actions), info["env_id"])
            if not meter.tick(b):
                return meter.timing()
    finally:
        env.close()


def run_gymnasium_vector(env_id: str, shape: Shape, budget: Budget, *, mode: str) -> Timing:
    import gymnasium as gym

    wrappers = [gym.wrappers.AddRenderObservation] if GYM_KWARGS else None
    # Rendering workers are spawned: a forked child inherits this process's GL state (its
    # contexts' driver threads do not come along) and hangs in its first EGL call.
    vector_kwargs = {"context": "spawn"} if GYM_KWARGS and mode == "async" else None
    env = gym.make_vec(env_id, num_envs=shape.num_envs, vectorization_mode=mode,
                       vector_kwargs=vector_kwargs, wrappers=wrappers, **GYM_KWARGS)
    return run_vector_env(env, shape.num_envs, budget)


def run_vector_env(env: Any, num_envs: int, budget: Budget, *,
                   reset_seed: int | None = 0) -> Timing:
    """Step a gymnasium-style vector env with precomputed actions; closes it afterwards."""
    try:
        actions = action_cycle(env.single_action_space, num_envs)
        env.reset(seed=reset_seed)
        meter = Meter(budget)
        while True:
            env.step(next(actions))
            if not meter.tick(num_envs):
                return meter.timing()
    finally:
        env.close()


def run_dm_control_loop(env_id: str, shape: Shape, budget: Budget) -> Timing:
    """M dm_control environments stepped in turn in Python, as a dm_env user steps them (with
    --pixels, under dm_control's pixels.Wrapper at that size)."""
    from dm_control import suite
    from dm_control.suite.wrappers import pixels

    m = shape.num_envs
    domain, task = env_id.removeprefix("dmc/").split("-", 1)
    envs = [suite.load(domain, task, task_kwargs={"random": i}) for i in range(m)]
    if OBS_KWARGS:
        size = {"width": OBS_KWARGS["width"], "height": OBS_KWARGS["height"]}
        envs = [pixels.Wrapper(env, render_kwargs=size) for env in envs]
    for env in envs:
        env.reset()
    actions = action_cycle(aiopool.make(env_id, 1).single_action_space, m)
    meter = Meter(budget)
    while True:
        for env, action in zip(envs, next(actions), strict=True):
            env.step(action)  # a step after LAST resets, as dm_env has it
        if not meter.tick(m):
            return meter.timing()


def run_python_loop(env_id: str, shape: Shape, budget: Budget) -> Timing:
    import gymnasium as gym

    m = shape.num_envs
    envs = [gym.make(env_id, **GYM_KWARGS) for _ in range(m)]
    if GYM_KWARGS:
        envs = [gym.wrappers.AddRenderObservation(env) for env in envs]
    try:
        space = envs[0].observation_space
        obs = np.empty((m, *(space.shape or ())), dtype=space.dtype)
        for i, env in enumerate(envs):
            obs[i] = env.reset(seed=i)[0]
        actions = (list(a) for a in action_cycle(envs[0].action_space, m))
        meter = Meter(budget)
        while True:
            for i, (env, action) in enumerate(zip(envs, next(actions), strict=True)):
                o, _reward, terminated, truncated, _info = env.step(action)
                obs[i] = env.reset()[0] if terminated or truncated else o
            if not meter.tick(m):
                return meter.timing()
    finally:
        for env in envs:
            env.close()


@dataclass
class Limit:
    """A compiled limit program (``env_limit.cc`` for an env header, ``mujoco_limit.cc``):
    ``run`` is the single-thread rate. ``overrides`` are KEY=VALUE config arguments (Atari:
    the ROM file)."""

    binary: Path
    env_id: str
    overrides: tuple[str, ...] = ()

    def run(self, env_id: str, shape: Shape, budget: Budget) -> Timing:
        seconds = budget.warmup + budget.seconds  # the program has no warm-up of its own
        out = subprocess.run([str(self.binary), self.env_id, str(shape.num_envs), str(seconds),
                              *self.overrides],
                             check=True, capture_output=True, text=True)
        result = json.loads(out.stdout)
        return Timing(int(result["steps"]), float(result["seconds"]))

    def run_parallel(self, env_id: str, shape: Shape, budget: Budget) -> Timing:
        """N copies at once, M/N envs each: what N free cores give right now, on a shared box."""
        n = shape.num_threads or 1
        seconds = budget.warmup + budget.seconds
        procs = [subprocess.Popen([str(self.binary), self.env_id, str(-(-shape.num_envs // n)),
                                   str(seconds), *self.overrides], stdout=subprocess.PIPE,
                                  text=True)
                 for _ in range(n)]
        results = [json.loads(p.communicate()[0]) for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"{self.binary} failed")
        return Timing(sum(int(r["steps"]) for r in results),
                      max(float(r["seconds"]) for r in results))


def build_limit(env_id: str, out_dir: Path) -> tuple[Limit | None, str]:
    """Compile the limit program for ``env_id``; (None, why) when it cannot be built."""
    if atari_rom(env_id) is not None:
        return build_atari_limit(env_id)
    if shutil.which("g++") is None:
        return None, "g++ not found"
    if registry.family_of(env_id) is families.MUJOCO:
        return build_mujoco_limit(env_id, out_dir)
    if registry.family_of(env_id) is families.DMC:
        return build_dmc_limit(env_id, out_dir)

    if not LIMIT_SOURCE.exists():
        return None, f"{LIMIT_SOURCE} is missing"
    pattern = re.compile(r'AIOPOOL_REGISTER_(ENV|MINIGRID)\("' + re.escape(env_id)
                         + r'",\s*(\w+)')
    for header in sorted(ENV_HEADERS.rglob("*.h")):
        found = pattern.search(header.read_text())
        if found:
            break
    else:
        return None, f"no header under {ENV_HEADERS} registers {env_id}"
    if registry.family_of(env_id) is families.BOX2D:  # links the module's Box2D build
        return build_cmake_limit(f"box2d_limit_{found.group(2)}", env_id)
    namespace = "::aiopool::minigrid::" if found.group(1) == "MINIGRID" else "::aiopool::"
    return compile_limit(env_id, out_dir, LIMIT_SOURCE, [
        f'-DLIMIT_ENV_HEADER="{header}"', f"-DLIMIT_ENV={namespace}{found.group(2)}"],
        f"from {header.relative_to(ROOT)}")


def build_mujoco_limit(env_id: str, out_dir: Path) -> tuple[Limit | None, str]:
    """``mujoco_limit.cc`` against the libmujoco aiopool links, on gymnasium's MJCF assets."""
    import importlib.util

    dirs = {}
    for package in ("mujoco", "gymnasium"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None, f"{package} is not installed"
        dirs[package] = Path(spec.submodule_search_locations[0])
    lib = dirs["mujoco"] / f"libmujoco.so.{MUJOCO_VERSION}"
    assets = dirs["gymnasium"] / "envs" / "mujoco" / "assets"
    if not lib.exists():
        return None, f"{lib} is missing"
    return compile_limit(env_id, out_dir, MUJOCO_LIMIT_SOURCE, [
        f"-I{dirs['mujoco'] / 'include'}", f'-DLIMIT_MUJOCO_ASSETS="{assets}"', str(lib),
        f"-Wl,-rpath,{dirs['mujoco']}"], f"against {lib.name}, assets {assets}")


def dmc_reset_steps(env_id: str, resets: int = 4) -> int:
    """The physics steps dm_control's reset of the task takes (``Physics.step`` calls in its
    ``initialize_episode``, counted over a few seeds): cheetah lets its model settle for 200,
    most tasks take none. The limit takes them too: the pool's envs must, and a limit without
    them is one no pool could approach (a sixth of cheetah's physics)."""
    from dm_control import suite

    domain, task = env_id.removeprefix("dmc/").split("-", 1)
    counted = []
    for seed in range(resets):
        env = suite.load(domain, task, task_kwargs={"random": seed})
        physics, step, n = env.physics, env.physics.step, [0]

        def counting_step(nstep: int = 1, step: Any = step, n: list[int] = n) -> None:
            n[0] += nstep
            step(nstep)

        physics.step = counting_step  # the instance's: the task calls physics.step(...)
        env.reset()
        counted.append(n[0])
    return round(statistics.mean(counted))


def build_dmc_limit(env_id: str, out_dir: Path) -> tuple[Limit | None, str]:
    """``dmc_limit.cc`` against the libmujoco aiopool links, on the task's model as dm_control
    compiles it (the MJB file the C++ envs load), with its substeps, step limit and the physics
    steps of its reset (``dmc_reset_steps``)."""
    import importlib.util

    spec = importlib.util.find_spec("mujoco")
    if spec is None or not spec.submodule_search_locations:
        return None, "mujoco is not installed"
    mujoco_dir = Path(spec.submodule_search_locations[0])
    lib = mujoco_dir / f"libmujoco.so.{MUJOCO_VERSION}"
    if not lib.exists():
        return None, f"{lib} is missing"
    config, _ = registry._config(registry._module_for(env_id), env_id, {})
    assert families.DMC.prepare is not None
    task = families.DMC.prepare(env_id, config)
    limit, why = compile_limit(env_id, out_dir, DMC_LIMIT_SOURCE, [
        f"-I{mujoco_dir / 'include'}", str(lib), f"-Wl,-rpath,{mujoco_dir}"],
        f"against {lib.name}")
    if limit is None:
        return None, why
    reset_steps = dmc_reset_steps(env_id)
    overrides = (task["model_file"], str(task["control_steps"]), str(task["step_limit"]),
                 str(reset_steps))
    return Limit(limit.binary, env_id, overrides), f"{why}, {reset_steps} physics steps per reset"


def compile_limit(env_id: str, out_dir: Path, source: Path, flags: list[str],
                  what: str) -> tuple[Limit | None, str]:
    """g++ with the extension's flags; (None, why) when it fails."""
    if not source.exists():
        return None, f"{source} is missing"
    binary = out_dir / f"limit_{re.sub(r'[^A-Za-z0-9]+', '_', env_id)}"
    cmd = ["g++", "-O3", "-ffp-contract=off", "-std=c++20", str(source), *flags,
           "-o", str(binary)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0:
        return None, f"compiling {source.name} failed:\n{built.stderr[-2000:]}"
    return Limit(binary, env_id), f"built {binary} {what}"


# -- Atari: ale-py's vector env and gymnasium's wrappers as peers, ALE as the limit --------
# The <Game>-v5 ids are aiopool's Atari envs (ALE from the ale-py sdist, ale-py's vector-env
# preprocessing: 84x84 gray, 4 stacked, frameskip 4, maxpool, 30 noops, fire reset, clipped
# rewards). EnvPool's ids of the same names run with EnvPool's own defaults (the same steps).

ATARI_CONFIGS = "8/8/1,16/8/1,16/8/2,32/16/1,32/16/2"
# The targets (issue 5, issue 25.3): stream ÷ the faster of EnvPool async and ale-py async in
# each repeat (the "best peer" row), at 16/8 and 32/16 on one thread and two, and stream ÷
# (limit × N) at 16/8. Atari envs load their ROMs (~0.1 s each) at the first reset, so the
# warm-up is longer.
ATARI_PEERS = ("EnvPool async", "ale-py AtariVectorEnv async")
BEST_PEER = "best peer (EnvPool async | ale-py async)"
ATARI_TARGETS = (((16, 8), BEST_PEER), ((32, 16), BEST_PEER), ((16, 8), "limit"))
ATARI = Family(ATARI_CONFIGS, ATARI_TARGETS, 16, limit_per_thread=True, unit="k", warmup=3.0,
               best_of=ATARI_PEERS)
ATARI_LIMIT_TARGET = "atari_limit"


def atari_rom(env_id: str) -> str | None:
    """The ale-py ROM id of an aiopool Atari env id (``"Pong-v5"`` -> ``"pong"``), else None."""
    if registry.family_of(env_id) is not families.ATARI or env_id not in aiopool.list_envs():
        return None
    keys, _ = registry._module_for(env_id).env_config(env_id)
    return str(dict((k, d) for k, _, d in keys)["rom_path"]).removesuffix(".bin")


def _rom(env_id: str) -> str:
    rom = atari_rom(env_id)
    assert rom is not None, f"{env_id} is not an aiopool Atari env"
    return rom


def run_ale_vector_sync(env_id: str, shape: Shape, budget: Budget) -> Timing:
    from ale_py.vector_env import AtariVectorEnv

    m = shape.num_envs
    env = AtariVectorEnv(_rom(env_id), m, num_threads=shape.num_threads or 0)
    return run_vector_env(env, m, budget)


def run_ale_vector_async(env_id: str, shape: Shape, budget: Budget) -> Timing:
    from ale_py.vector_env import AtariVectorEnv

    b = shape.batch_size
    assert b is not None
    env = AtariVectorEnv(_rom(env_id), shape.num_envs, batch_size=b,
                         num_threads=shape.num_threads or 0)
    try:
        actions = action_cycle(env.single_action_space, b)
        env.reset(seed=0)  # returns the first batch_size envs to finish resetting
        meter = Meter(budget)
        while True:
            env.send(next(actions))  # to the envs of the last batch received
            env.recv()
            if not meter.tick(b):
                return meter.timing()
    finally:
        env.close()


def atari_gymnasium_env(rom: str) -> Any:
    """ALE/<Game>-v5 with gymnasium's AtariPreprocessing + 4-frame stack: the preprocessing of
    ale-py's vector env except fire reset and reward clipping, as gymnasium users build it."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    name = rom.title().replace("_", "")
    env = gym.make(f"ALE/{name}-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                          grayscale_obs=True, scale_obs=False)
    return gym.wrappers.FrameStackObservation(env, 4)


def run_atari_gymnasium_sync(env_id: str, shape: Shape, budget: Budget) -> Timing:
    import functools

    import gymnasium as gym

    env = gym.vector.SyncVectorEnv(
        [functools.partial(atari_gymnasium_env, _rom(env_id))] * shape.num_envs)
    return run_vector_env(env, shape.num_envs, budget)


def run_atari_gymnasium_async(env_id: str, shape: Shape, budget: Budget) -> Timing:
    import functools

    import gymnasium as gym

    env = gym.vector.AsyncVectorEnv(
        [functools.partial(atari_gymnasium_env, _rom(env_id))] * shape.num_envs)
    return run_vector_env(env, shape.num_envs, budget)


def atari_peer_runners(env_id: str, max_gym_envs: int, skipped: list[str]) -> list[Runner]:
    try:
        import ale_py  # noqa: F401
    except ImportError:
        skipped.append("ale-py: not installed")
        return []
    runners = [
        Runner("ale-py AtariVectorEnv sync (B=M)", run_ale_vector_sync, whole_batch, "peer"),
        Runner("ale-py AtariVectorEnv async", run_ale_vector_async, same, "peer")]
    try:
        import cv2  # noqa: F401  (gymnasium's AtariPreprocessing resizes with it)
    except ImportError:
        skipped.append("gymnasium AtariPreprocessing: needs opencv-python-headless")
        return runners
    runners += [Runner("gymnasium SyncVectorEnv (AtariPreprocessing)", run_atari_gymnasium_sync,
                       envs_only(max_gym_envs), "peer"),
                Runner("gymnasium AsyncVectorEnv (AtariPreprocessing)",
                       run_atari_gymnasium_async, envs_only(max_gym_envs), "peer")]
    skipped.append(f"gymnasium runners at M > {max_gym_envs} (--max-gym-envs)")
    return runners


def build_atari_limit(env_id: str) -> tuple[Limit | None, str]:
    """The ``atari_limit`` target, which links the ALE built by ``pip install -e .``."""
    from ale_py import roms

    rom = _rom(env_id)
    return build_cmake_limit(ATARI_LIMIT_TARGET, env_id, (f"rom_path={roms.get_rom_path(rom)}",))


def build_cmake_limit(target: str, env_id: str,
                      overrides: tuple[str, ...] = ()) -> tuple[Limit | None, str]:
    """Build a limit ``target`` of the CMake build directory of ``pip install -e .`` (one that
    links a simulator built there: ALE, Box2D); (None, why) when there is none."""
    cmake = shutil.which("cmake") or str(Path(sys.executable).parent / "cmake")
    caches = sorted((ROOT / "build").glob("*/CMakeCache.txt"))
    if not caches:
        return None, f"no CMake build directory under {ROOT / 'build'} (pip install -e .)"
    build_dir = caches[-1].parent
    built = subprocess.run([cmake, "--build", str(build_dir), "--target", target],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, f"building {target} failed:\n{built.stdout[-2000:]}"
    return Limit(build_dir / target, env_id, overrides), f"built {build_dir / target}"


# -- which runner measures which shape ----------------------------------------------------

ShapeOf = Callable[[Shape], Shape | None]


def same(s: Shape) -> Shape:
    return s


def whole_batch(s: Shape) -> Shape:
    return Shape(s.num_envs, s.num_envs, s.num_threads)


def envs_only(max_envs: int) -> ShapeOf:
    return lambda s: Shape(s.num_envs) if s.num_envs <= max_envs else None


@dataclass(frozen=True)
class Runner:
    name: str
    run: Callable[[str, Shape, Budget], Timing]
    shape_of: ShapeOf  # the shape this runner measures for a table column (None: skip it)
    group: str  # "aiopool", "peer" or "limit"


def make_runners(args: argparse.Namespace, limit: Limit | None,
                 skipped: list[str]) -> list[Runner]:
    def bind(fn: Callable[..., Timing], **kw: Any) -> Callable[[str, Shape, Budget], Timing]:
        return lambda env_id, shape, budget: fn(env_id, shape, budget, **kw)

    runners = [Runner("aiopool stream (asyncio)", bind(run_aiopool_stream, loop_factory=None),
                      same, "aiopool")]
    try:
        import uvloop

        runners.append(Runner("aiopool stream (uvloop)",
                              bind(run_aiopool_stream, loop_factory=uvloop.new_event_loop),
                              same, "aiopool"))
    except ImportError:
        skipped.append("aiopool stream (uvloop): uvloop is not installed")
    runners += [
        Runner("aiopool recv+send (asyncio)", run_aiopool_recv_send, same, "aiopool"),
        Runner("aiopool step (asyncio, B=M)", run_aiopool_step, whole_batch, "aiopool"),
        Runner("aiopool recv_blocking+send", run_aiopool_recv_blocking, same, "aiopool"),
        Runner(ADAPTER_ROW, run_aiopool_gymnasium, whole_batch, "aiopool"),
    ]
    if args.no_peers:
        skipped.append("peers: --no-peers")
    else:
        runners += peer_runners(args.env, args.max_gym_envs, skipped)
    if limit is not None:
        runners.append(Runner("C++ 1 thread", limit.run, envs_only(sys.maxsize), "limit"))
        if family(args.env).limit_per_thread:
            runners.append(Runner("C++ N processes at once", limit.run_parallel,
                                  lambda s: Shape(s.num_envs, None, s.num_threads), "limit"))
    return runners


def peer_runners(env_id: str, max_gym_envs: int, skipped: list[str]) -> list[Runner]:
    runners: list[Runner] = []
    try:
        import envpool

        if OBS_KWARGS:
            skipped.append("EnvPool: no pixel observations of its MuJoCo or DMC envs")
        elif envpool_id(env_id) in envpool.list_all_envs():
            runners += [Runner("EnvPool sync (B=M)", run_envpool_sync, whole_batch, "peer"),
                        Runner("EnvPool async", run_envpool_async, same, "peer")]
        else:
            skipped.append(f"EnvPool: has no {env_id}")
    except ImportError:
        skipped.append("EnvPool: not installed")
    import gymnasium as gym

    if atari_rom(env_id) is not None:
        runners += atari_peer_runners(env_id, max_gym_envs, skipped)
    elif registry.family_of(env_id) is families.DMC:
        runners.append(Runner("dm_control loop", run_dm_control_loop, envs_only(max_gym_envs),
                              "peer"))
    elif env_id in gym.registry:
        small = envs_only(max_gym_envs)
        runners += [
            Runner("gymnasium SyncVectorEnv", lambda e, s, b: run_gymnasium_vector(
                e, s, b, mode="sync"), small, "peer"),
            Runner("gymnasium AsyncVectorEnv", lambda e, s, b: run_gymnasium_vector(
                e, s, b, mode="async"), small, "peer"),
            Runner("Python loop over gymnasium.make", run_python_loop, small, "peer"),
        ]
        skipped.append(f"gymnasium runners at M > {max_gym_envs} (--max-gym-envs)")
    else:
        skipped.append(f"gymnasium: has no {env_id}")
    return runners


# -- adapter overhead: CPU time per call of the sync adapters over the raw pool ------------
# Throughput mixes the adapters' Python layers with the env steps and the wake-ups; this
# isolates the layers. Each runner steps every env of an M-env pool (B = M, the default worker
# threads, as the adapters make it) in a loop, and takes each call's CPU time on the calling
# thread (time.thread_time_ns: the workers' time and the time asleep are not counted, so other
# jobs on the machine matter less). A repeat is the median over its calls; runners are
# interleaved within each repeat, and an overhead is the median of the per-repeat differences
# from the raw pool's send + recv_blocking, the lockstep the adapters run on. Here the
# calling thread only waits for the workers (``_layers_only``): in the adapters it also steps
# envs itself (Pool._caller_helps), and its CPU time would then count a varying share of the
# env steps. The throughput table measures the adapters as they run.

OVERHEAD_ENVS = "1,4,16"
OVERHEAD_RAW = "pool send + recv_blocking"
# The same and a copy of the batch's obs: what copying alone costs (the floor of the adapters'
# copy=True, most of it for Atari frames).
OVERHEAD_COPY = "pool send + recv_blocking + obs.copy()"


def _layers_only(env: Any) -> Any:
    """An adapter whose calling thread does not step envs: its CPU time is its own work."""
    env._steps.pool._caller_helps(False)
    return env


def overhead_makers(env_id: str, skipped: list[str]) -> dict[str, Callable[[int], Any]]:
    """name -> make(num_envs) -> (step(actions), [actions...], close()), raw pool first."""

    def raw_maker(copy_obs: bool) -> Callable[[int], Any]:
        def make(m: int) -> Any:
            pool = aiopool.make(env_id, m, m, seed=0)
            pool.async_reset()
            pool.recv_blocking()

            def step(actions: Any) -> Any:
                pool.send(actions)
                batch = pool.recv_blocking()
                return batch.obs.copy() if copy_obs else None

            return step, _actions(pool.single_action_space, m), pool.close

        return make

    raw, raw_obs_copy = raw_maker(False), raw_maker(True)

    def pool_step(m: int) -> Any:
        loop = asyncio.new_event_loop()
        pool = aiopool.make(env_id, m, m, seed=0)
        pool.async_reset()
        loop.run_until_complete(pool.recv())

        def close() -> None:
            pool.close()
            loop.close()

        return AsyncSteps(loop, pool.step), _actions(pool.single_action_space, m), close

    def gymnasium(m: int) -> Any:
        env = _layers_only(aiopool.make_gymnasium(env_id, m, seed=0))
        env.reset(seed=0)
        return env.step, _actions(env.single_action_space, m), env.close

    def gymnasium_views(m: int) -> Any:
        env = _layers_only(aiopool.make_gymnasium(env_id, m, seed=0, copy=False))
        env.reset(seed=0)
        return env.step, _actions(env.single_action_space, m), env.close

    def sb3(m: int) -> Any:
        env = _layers_only(aiopool.make_sb3(env_id, m, seed=0))
        env.reset()
        return env.step, _actions(env.action_space, m), env.close

    def dm(m: int) -> Any:
        env = _layers_only(aiopool.make_dm(env_id, m, seed=0))
        env.reset()
        actions = _actions(env._steps.pool.single_action_space, m)
        return env.step, [a[0] for a in actions] if m == 1 else actions, env.close

    makers: dict[str, Callable[[int], Any]] = {
        OVERHEAD_RAW: raw, OVERHEAD_COPY: raw_obs_copy, "pool step (asyncio)": pool_step,
        "gymnasium adapter": gymnasium, "gymnasium adapter, copy=False": gymnasium_views}
    for name, module, make_ in (("SB3 adapter", "stable_baselines3", sb3),
                                ("dm_env adapter", "dm_env", dm)):
        try:
            __import__(module)
            makers[name] = make_
        except ImportError:
            skipped.append(f"{name} overhead: {module} is not installed")
    return makers


class AsyncSteps:
    """``Pool.step`` timed per call inside its event loop (entering the loop is not counted):
    ``timed(actions, calls, deadline)`` runs the calls and returns their CPU times."""

    def __init__(self, loop: asyncio.AbstractEventLoop, step: Callable[[Any], Any]) -> None:
        self.loop, self.step = loop, step

    def timed(self, actions: list[Any], calls: int, deadline: float) -> list[int]:
        async def main() -> list[int]:
            return [t async for t in _atimed(self.step, actions, calls, deadline)]

        return self.loop.run_until_complete(main())


async def _atimed(step: Callable[[Any], Any], actions: list[Any], calls: int,
                  deadline: float) -> Any:
    clock = time.thread_time_ns
    for i in range(calls):
        a = actions[i % len(actions)]
        t0 = clock()
        await step(a)
        yield clock() - t0
        if time.perf_counter() > deadline and i >= 10:
            return


def _timed(step: Any, actions: list[Any], calls: int, deadline: float) -> list[int]:
    """CPU ns of each of up to ``calls`` calls of ``step`` (at least 10, else until
    ``deadline``)."""
    if isinstance(step, AsyncSteps):
        return step.timed(actions, calls, deadline)
    clock = time.thread_time_ns
    out = []
    for i in range(calls):
        a = actions[i % len(actions)]
        t0 = clock()
        step(a)
        out.append(clock() - t0)
        if time.perf_counter() > deadline and i >= 10:
            break
    return out


def _actions(space: Any, m: int) -> list[Any]:
    cycle = action_cycle(space, m)
    return [next(cycle) for _ in range(ACTION_ROUNDS)]


@dataclass
class Overhead:
    """Per-call CPU µs: ``per_call[runner][M]`` one value per repeat; ``over_raw``: the median
    of the per-repeat differences from the raw pool's send + recv_blocking."""

    envs: list[int]
    per_call: dict[str, dict[int, list[float]]]

    def median(self, runner: str, m: int) -> float | None:
        v = self.per_call.get(runner, {}).get(m)
        return statistics.median(v) if v else None

    def over_raw(self, runner: str, m: int) -> float | None:
        v, raw = self.per_call.get(runner, {}).get(m), self.per_call[OVERHEAD_RAW].get(m)
        if not v or not raw or len(v) != len(raw):
            return None
        return statistics.median(a - b for a, b in zip(v, raw, strict=True))


def measure_overhead(env_id: str, envs: list[int], repeats: int, calls: int,
                     seconds: float, skipped: list[str]) -> Overhead:
    makers = overhead_makers(env_id, skipped)
    per_call: dict[str, dict[int, list[float]]] = {name: {} for name in makers}
    for m in envs:
        made = {name: make(m) for name, make in makers.items()}
        try:
            for step, actions, _close in made.values():  # warm up: 10 calls each
                _timed(step, actions, 10, 0.0)
            for repeat in range(repeats):
                order = list(made)
                random.Random(repeat).shuffle(order)
                for name in order:
                    step, actions, _close = made[name]
                    ns = _timed(step, actions, calls, time.perf_counter() + seconds)
                    per_call[name].setdefault(m, []).append(statistics.median(ns) / 1e3)
                print(f"  [overhead {repeat + 1}/{repeats}] M={m}: " + ", ".join(
                    f"{name} {per_call[name][m][-1]:.1f} µs" for name in made),
                    file=sys.stderr, flush=True)
        finally:
            for made_ in made.values():
                made_[2]()  # close
    return Overhead(envs, per_call)


def render_overhead(o: Overhead) -> str:
    head = ["per call, µs of CPU (calling thread)", *(f"M = {m}" for m in o.envs)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for runner in o.per_call:
        cells = [runner]
        for m in o.envs:
            med, over = o.median(runner, m), o.over_raw(runner, m)
            cells.append("—" if med is None else f"{med:.1f}" if runner == OVERHEAD_RAW
                         else f"{med:.1f} ({over:+.1f})" if over is not None else f"{med:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([
        f"**Adapter overhead**: CPU time per call of the calling thread (median over repeats "
        f"of each repeat's median call), one step of every env of an M-env pool (B = M, "
        f"default worker threads); (+x): over {OVERHEAD_RAW}, the median of the per-repeat "
        "differences", "", *lines])


# -- the run ------------------------------------------------------------------------------


def measure_all(args: argparse.Namespace, runners: list[Runner], shapes: list[Shape],
                budget: Budget, loads: list[tuple[float, float, float]]) -> list[Measurement]:
    work = sorted({(r.name, s) for r in runners for c in shapes if (s := r.shape_of(c))},
                  key=lambda w: (w[0], w[1]))
    by_name = {r.name: r for r in runners}
    measurements: list[Measurement] = []
    unit = family(args.env).unit
    for repeat in range(args.repeats):
        order = list(work)
        random.Random(repeat).shuffle(order)
        for i, (name, shape) in enumerate(order):
            timing = by_name[name].run(args.env, shape, budget)
            m = Measurement(name, shape, repeat, timing.steps, timing.seconds)
            measurements.append(m)
            print(f"  [{repeat + 1}/{args.repeats} {i + 1:3}/{len(order)}] {name:34} "
                  f"{shape.label:>10}  {fmt_rate(m.rate, unit):>8} {unit}/s",
                  file=sys.stderr, flush=True)
        loads.append(os.getloadavg())
    return measurements


def summarise(measurements: list[Measurement]) -> list[Summary]:
    groups: dict[tuple[str, Shape], list[float]] = {}
    for m in sorted(measurements, key=lambda m: m.repeat):
        groups.setdefault((m.runner, m.shape), []).append(m.rate)
    return [Summary(name, shape, statistics.median(r), min(r), max(r), len(r), tuple(r))
            for (name, shape), r in groups.items()]


@dataclass
class Table:
    """Rows: runners; columns: configurations, then the target ratios."""

    columns: list[Shape]
    rows: list[str]
    cells: dict[tuple[str, Shape], Summary]
    ratio_columns: list[tuple[str, Shape, str]] = field(default_factory=list)  # title, col, ref
    unit: str = "M"  # of the rates: "M" or "k" env-steps/s

    def value(self, row: str, column: Shape) -> Summary | None:
        return self.cells.get((row, column))


def build_table(runners: list[Runner], shapes: list[Shape], summaries: list[Summary],
                usable_cores: int, fam: Family = CLASSIC) -> Table:
    by_key = {(s.runner, s.shape): s for s in summaries}
    rows = [r.name for r in runners if r.group != "limit"]
    cells: dict[tuple[str, Shape], Summary] = {}
    for r in runners:
        for c in shapes:
            s = r.shape_of(c)
            if s is not None and (r.name, s) in by_key:
                cells[(r.name, c)] = by_key[(r.name, s)]
    if any(r.group == "limit" for r in runners):
        limit_name = ("limit: C++ 1 thread × N threads" if fam.limit_per_thread
                      else f"limit: C++ 1 thread × {usable_cores} cores")
        for c in shapes:
            one = cells.get(("C++ 1 thread", c))
            if one is not None:
                k = (c.num_threads or 1) if fam.limit_per_thread else usable_cores
                cells[(limit_name, c)] = Summary(limit_name, one.shape, one.median * k,
                                                 one.min * k, one.max * k, one.repeats,
                                                 tuple(v * k for v in one.rates))
        rows += [limit_name, *(r.name for r in runners if r.group == "limit")]
    if fam.best_of:
        for c in shapes:
            best = best_peer([p for r in fam.best_of
                              if (p := cells.get((next((row for row in rows
                                                        if row.startswith(r)), ""), c)))])
            if best is not None:
                cells[(BEST_PEER, c)] = best
        if any(row == BEST_PEER for row, _ in cells):
            rows.append(BEST_PEER)
    table = Table(shapes, rows, cells, unit=fam.unit)
    for (m, b), ref in fam.targets:
        ref_row = next((row for row in rows if row.startswith(ref)), None)
        for c in shapes:
            if (c.num_envs, c.batch_size) == (m, b) and ref_row is not None:
                table.ratio_columns.append((f"÷ {ref} {c.label}", c, ref_row))
    return table


def best_peer(peers: list[Summary]) -> Summary | None:
    """The faster peer of each repeat (peers measured in the same repeats), as one row: the
    target "at least the best of EnvPool and ale-py" compared repeat by repeat."""
    if not peers or len({len(p.rates) for p in peers}) != 1 or not peers[0].rates:
        return None
    rates = tuple(max(rs) for rs in zip(*(p.rates for p in peers), strict=True))
    return Summary(BEST_PEER, peers[0].shape, statistics.median(rates), min(rates), max(rates),
                   len(rates), rates)


def fmt_rate(v: float, unit: str = "M") -> str:
    v /= UNITS[unit]
    return (f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3f}" if v >= 0.1
            else f"{v:.3g}")


def adapter_vs_sync(table: Table) -> dict[str, float]:
    """The gymnasium adapter ÷ gymnasium's SyncVectorEnv per column (the issue's target: at
    least 1 at M = 1, 4 and 16), where the run measured both."""
    sync = next((r for r in table.rows if r.startswith("gymnasium SyncVectorEnv")), None)
    out: dict[str, float] = {}
    for c in table.columns:
        s, r = table.value(ADAPTER_ROW, c), None if sync is None else table.value(sync, c)
        if s is not None and r is not None:
            out[c.label] = ratio(s, r)
    return out


def render(table: Table) -> str:
    head = ["runner", *(c.label for c in table.columns), *(t for t, _, _ in table.ratio_columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    spread = ["| runner | " + " | ".join(c.label for c in table.columns) + " |",
              "|" + "---|" * (len(table.columns) + 1)]
    for row in table.rows:
        cells = [row]
        ranges = [row]
        for c in table.columns:
            s = table.value(row, c)
            cells.append("—" if s is None else fmt_rate(s.median, table.unit))
            ranges.append("—" if s is None else
                          f"{fmt_rate(s.min, table.unit)}–{fmt_rate(s.max, table.unit)}")
        for _, c, ref in table.ratio_columns:
            s, r = table.value(row, c), table.value(ref, c)
            cells.append("—" if s is None or r is None else f"{ratio(s, r):.3g}")
        lines.append("| " + " | ".join(cells) + " |")
        spread.append("| " + " | ".join(ranges) + " |")
    return "\n".join(
        [f"**Median {table.unit} env-steps/s** (columns: M envs / B batch / N threads; "
         "÷: the median of the per-repeat ratios)", "",
         *lines, "", f"**Min–max over repeats, {table.unit} env-steps/s**", "", *spread])


def plot(table: Table, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bar_rows = [r for r in table.rows if not r.startswith("limit") and r != "C++ 1 thread"]
    limit_row = next((r for r in table.rows if r.startswith("limit")), None)
    scale = UNITS[table.unit]
    x = np.arange(len(table.columns))
    width = 0.85 / max(1, len(bar_rows))
    fig, ax = plt.subplots(figsize=(4.0 + 2.0 * len(table.columns), 5.5))
    for i, row in enumerate(bar_rows):
        med = [table.value(row, c) for c in table.columns]
        ys = [np.nan if s is None else s.median / scale for s in med]
        err = [[0 if s is None else (s.median - s.min) / scale for s in med],
               [0 if s is None else (s.max - s.median) / scale for s in med]]
        ax.bar(x - 0.425 + (i + 0.5) * width, ys, width, yerr=err, label=row,
               color=plt.get_cmap("tab20")(i % 20), capsize=1.5)
    if limit_row is not None:
        for j, c in enumerate(table.columns):
            s = table.value(limit_row, c)
            if s is not None:
                ax.hlines(s.median / scale, x[j] - 0.45, x[j] + 0.45, colors="k",
                          linestyles="--", label=limit_row if j == 0 else "_nolegend_")
    ax.set_yscale("log")
    ax.set_xticks(x, [f"M/B/N\n{c.label}" for c in table.columns])
    ax.set_ylabel(f"{table.unit} env-steps/s (median, min–max)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default=None,
                   help="env id (default CartPole-v1, or Counting-v0 if CartPole is not built)")
    p.add_argument("--configs", default=None,
                   help=f"comma-separated M/B/N (default {DEFAULT_CONFIGS}; "
                        f"MuJoCo {MUJOCO_CONFIGS})")
    p.add_argument("--seconds", type=float, default=1.0, help="timed window per measurement")
    p.add_argument("--warmup", type=float, default=None,
                   help="warm-up before each window (default 0.3 s; Atari 3 s: its envs load "
                        "their ROMs, ~0.1 s each, at the first reset)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats")
    p.add_argument("--max-gym-envs", type=int, default=None,
                   help="run the gymnasium runners only at M <= this (they are slow; "
                        f"default {CLASSIC.max_gym_envs}, MuJoCo {MUJOCO.max_gym_envs})")
    p.add_argument("--no-peers", action="store_true", help="aiopool and the limit only")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                   help="where the JSON, PNG and the limit binary go")
    p.add_argument("--only", default=None,
                   help="run only the runners whose name matches this regular expression")
    p.add_argument("--busy-neighbour", action="store_true",
                   help="run a busy process (`while True: pass`) pinned to the last usable core "
                        "during the whole run, as on a machine where another job takes a core")
    p.add_argument("--pixels", default=None, metavar="WxH",
                   help="pixel observations of a MuJoCo or Control Suite env at this size "
                        "(obs_type='pixels'; gymnasium's runners: render_mode='rgb_array' + "
                        "AddRenderObservation; dm_control's: its pixels.Wrapper). "
                        f"Default configs {PIXELS_CONFIGS}; no EnvPool, limit or overhead table")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: configs {QUICK_CONFIGS}, 1 repeat, 0.2 s")
    p.add_argument("--overhead-envs", default=OVERHEAD_ENVS,
                   help="pool sizes M of the adapter-overhead table (CPU µs per call of the "
                        f"sync adapters and the raw pool; default {OVERHEAD_ENVS}; '' skips "
                        "it, as does an --only that does not match 'adapter')")
    p.add_argument("--overhead-calls", type=int, default=300,
                   help="calls per runner and repeat in the overhead table (fewer if they "
                        "take longer than --seconds)")
    args = p.parse_args(argv)
    if args.pixels is not None:
        width, _, height = args.pixels.partition("x")
        if not (width.isdigit() and height.isdigit()):
            p.error(f"--pixels is {args.pixels!r}, expected WxH such as 84x84")
        size = {"width": int(width), "height": int(height)}
        OBS_KWARGS.update(obs_type="pixels", **size)
        from aiopool._render import headless_defaults

        headless_defaults()  # gymnasium's processes render through EGL when headless
        GYM_KWARGS.update(render_mode="rgb_array", **size)
        args.overhead_envs = ""
    if args.quick:
        args.configs = args.configs or QUICK_CONFIGS
        args.repeats, args.seconds, args.warmup = 1, 0.2, 0.05
        args.overhead_calls = min(args.overhead_calls, 30)
    if args.env is None:
        args.env = "CartPole-v1" if "CartPole-v1" in aiopool.list_envs() else "Counting-v0"
    args.configs = args.configs or family(args.env).configs
    if args.warmup is None:
        args.warmup = family(args.env).warmup
    if args.max_gym_envs is None:
        args.max_gym_envs = family(args.env).max_gym_envs
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shapes = [Shape.parse(c) for c in args.configs.split(",")]
    budget = Budget(args.warmup, args.seconds)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.env not in aiopool.list_envs():
        print(f"aiopool has no {args.env}; registered: {aiopool.list_envs()}", file=sys.stderr)
        return 2

    machine = machine_info("aiopool", "envpool", "gymnasium", "uvloop")
    skipped: list[str] = []
    limit, why = (None, "pixel observations") if OBS_KWARGS else build_limit(args.env, args.out)
    if limit is None:
        skipped.append(f"limit: {why}")
    runners = make_runners(args, limit, skipped)
    if args.only:
        runners = [r for r in runners if re.search(args.only, r.name)]
    for note in skipped:
        print(f"skipped {note}", file=sys.stderr)

    overhead_envs = [int(m) for m in args.overhead_envs.split(",") if m.strip()]
    if args.only and not re.search(args.only, "adapter overhead"):
        overhead_envs = []
    started = time.monotonic()
    loads = [os.getloadavg()]
    with busy_neighbour(args.busy_neighbour) as neighbour:
        measurements = measure_all(args, runners, shapes, budget, loads)
        overhead = (measure_overhead(args.env, overhead_envs, args.repeats, args.overhead_calls,
                                     args.seconds, skipped) if overhead_envs else None)
        loads.append(os.getloadavg())
    run_seconds = time.monotonic() - started
    summaries = summarise(measurements)
    fam = family(args.env)
    table = build_table(runners, shapes, summaries, machine["usable_cores"], fam)

    title = (f"{args.env}: {machine['cpu']}, {machine['usable_cores']} usable cores, "
             f"load {loads[0][0]:.2f} → {loads[-1][0]:.2f}, {args.repeats} × {args.seconds} s")
    text = render(table)
    print(f"# aiopool throughput, {args.env}\n")
    if neighbour is not None:
        print(f"A busy process was pinned to core {neighbour} for the whole run.\n")
    print(f"{machine['cpu']}; {machine['cores']} cores ({machine['usable_cores']} usable); "
          f"load average (1/5/15 min) at start {load_text(loads[0])}, "
          f"at end {load_text(loads[-1])}; "
          f"{args.repeats} interleaved repeats × {args.seconds} s after {args.warmup} s warm-up;"
          f" run time {run_seconds:.0f} s.\n")
    print(text)
    if vs_sync := adapter_vs_sync(table):
        print("\ngymnasium adapter ÷ SyncVectorEnv (median of the per-repeat ratios): " +
              ", ".join(f"{label}: {r:.2f}" for label, r in vs_sync.items()))
    if overhead is not None:
        print("\n" + render_overhead(overhead))
    if skipped:
        print("\nSkipped: " + "; ".join(skipped))

    result = {
        "env_id": args.env,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {**machine, "load_start": loads[0], "load_end": loads[-1],
                    "load_after_each_repeat": loads[1:]},
        "run_seconds": run_seconds,
        "busy_neighbour_core": neighbour,
        "skipped": skipped,
        "limit_cores": "N" if fam.limit_per_thread else machine["usable_cores"],
        "summary": [{"runner": s.runner, **asdict(s.shape), "median": s.median, "min": s.min,
                     "max": s.max, "repeats": s.repeats} for s in summaries],
        "table": {row: {c.label: s.median for c in table.columns
                        if (s := table.value(row, c)) is not None} for row in table.rows},
        "ratios": [{"column": title_, "config": c.label, "reference": ref,
                    "values": {row: ratio(s, r) for row in table.rows
                               if (s := table.value(row, c)) and (r := table.value(ref, c))}}
                   for title_, c, ref in table.ratio_columns],
        "measurements": [{"runner": m.runner, **asdict(m.shape), "repeat": m.repeat,
                          "steps": m.steps, "seconds": m.seconds, "rate": m.rate}
                         for m in measurements],
        "adapter_vs_sync_vector_env": adapter_vs_sync(table),
        "adapter_overhead": None if overhead is None else {
            "unit": "µs of CPU time of the calling thread per call (all M envs stepped)",
            "envs": overhead.envs, "raw": OVERHEAD_RAW,
            "median": {r: {str(m): overhead.median(r, m) for m in overhead.envs}
                       for r in overhead.per_call},
            "over_raw": {r: {str(m): overhead.over_raw(r, m) for m in overhead.envs}
                         for r in overhead.per_call if r != OVERHEAD_RAW},
            "per_repeat": {r: {str(m): v for m, v in by_m.items()}
                           for r, by_m in overhead.per_call.items()}},
    }
    (args.out / "throughput.json").write_text(json.dumps(result, indent=1))
    plot(table, args.out / "throughput.png", title)
    print(f"\nwrote {args.out / 'throughput.json'} and {args.out / 'throughput.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
