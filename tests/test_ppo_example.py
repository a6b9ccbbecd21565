"""examples/ppo_cartpole_async.py: its GAE, a tiny-budget run of both modes, and (slow) a full
run to the 475 threshold."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import ppo_cartpole_async as ppo
import ppo_time_to_475


def _gae_one_env(rewards: list[float], values: list[float], next_values: list[float],
                 terminated: list[bool], ends: list[bool], gamma: float, lam: float) -> list[float]:
    out, last = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        nonterminal = 0.0 if terminated[t] else 1.0
        delta = rewards[t] + gamma * next_values[t] * nonterminal - values[t]
        last = delta + gamma * lam * (0.0 if ends[t] else 1.0) * last
        out[t] = last
    return out


def test_gae_follows_each_env_and_stops_at_episode_ends() -> None:
    # Two envs' rows, already grouped per env: env 0 terminates at its row 1, env 1 is
    # truncated at its row 0 (bootstrapped) and its last row is bootstrapped too.
    rewards = np.array([1, 1, 0, 1, 1, 0, 1], np.float32)
    values = np.array([0.5, 0.4, 0.3, 0.2, 0.6, 0.7, 0.8], np.float32)
    next_values = np.array([0.4, 9.0, 0.2, 0.1, 0.9, 0.8, 0.5], np.float32)
    terminated = np.array([0, 1, 0, 0, 0, 0, 0], bool)
    truncated = np.array([0, 0, 0, 0, 1, 0, 0], bool)
    last_of_env = np.array([0, 0, 0, 1, 0, 0, 1], bool)
    ends = terminated | truncated | last_of_env
    got = ppo.gae(rewards, values, next_values, terminated, ends, 0.9, 0.8)
    want = (_gae_one_env(rewards[:4].tolist(), values[:4].tolist(), next_values[:4].tolist(),
                         terminated[:4].tolist(), ends[:4].tolist(), 0.9, 0.8)
            + _gae_one_env(rewards[4:].tolist(), values[4:].tolist(), next_values[4:].tolist(),
                           terminated[4:].tolist(), ends[4:].tolist(), 0.9, 0.8))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[1] == pytest.approx(1 - 0.4)  # terminal: no bootstrap from next_values
    assert got[4] == pytest.approx(1 + 0.9 * 0.9 - 0.6)  # truncated: bootstrapped


@pytest.mark.parametrize("overlap", [True, False], ids=["overlapped", "serial"])
def test_tiny_budget_runs_and_writes_the_learning_curve(tmp_path: Path, overlap: bool) -> None:
    plot = tmp_path / "curve.png"
    out = asyncio.run(ppo.main(ppo.Args(
        total_timesteps=3000, num_envs=8, batch_size=4, num_steps=16, overlap=overlap,
        plot=str(plot), print_every=1.0)))
    assert out["global_step"] >= 3000
    assert out["updates"] >= 3000 // (8 * 16) - 1
    assert out["episodes"] > 20
    assert not out["reached"]
    assert plot.stat().st_size > 10_000


def test_serial_mode_is_the_cleanrl_loop_over_gymnasium_step_for_step(tmp_path: Path) -> None:
    # One worker thread makes the finish order deterministic: batches are envs 0-15, 16-31.
    # Same seeds, same sampling stream, same learner: the same episodes, float for float,
    # which checks the async bookkeeping (per-env chains, reset-step masks, bootstraps).
    budget = {"total_timesteps": 8192, "target_return": 1e9}
    mine = asyncio.run(ppo.main(ppo.Args(**budget, overlap=False, num_threads=1,
                                         plot=str(tmp_path / "curve.png"), print_every=1e9)))
    theirs = ppo_time_to_475.run_gymnasium(ppo.Args(**budget), "sync")
    assert mine["global_step"] == theirs["global_step"] == 8192
    assert mine["mean_return"] == theirs["mean_return"]


def test_serial_schedule_with_the_learner_process_is_the_serial_loop(tmp_path: Path) -> None:
    # --overlap with more free cores required than exist: the adaptive schedule is serial from
    # the first rollout, with the learner in its process; that must be the --no-overlap run.
    budget = {"total_timesteps": 4096, "target_return": 1e9, "num_threads": 1,
              "plot": str(tmp_path / "curve.png"), "print_every": 1e9}
    adaptive = asyncio.run(ppo.main(ppo.Args(**budget, overlap=True, overlap_cores=99.0)))
    serial = asyncio.run(ppo.main(ppo.Args(**budget, overlap=False)))
    assert adaptive["serial_updates"] == adaptive["updates"] == serial["updates"] == 3
    assert adaptive["mean_return"] == serial["mean_return"]
    overlapped = asyncio.run(ppo.main(ppo.Args(**budget, overlap=True, overlap_cores=0.0)))
    assert overlapped["serial_updates"] == 0


@contextlib.contextmanager
def spinning_neighbour() -> Iterator[int]:
    """A process spinning on the last usable core."""
    core = max(os.sched_getaffinity(0))
    proc = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})"
                             "\nprint(flush=True)\nwhile True: pass"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # spinning from here on
        yield core
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores")
def test_free_cores_counts_other_processes_not_this_one() -> None:
    """Judged against the machine's own level, measured first: other processes' background
    load (a browser, a second test run) lowers every sample alike, so the test holds on a busy
    machine. The neighbour takes up to a core, never this process's spinning."""
    meter = ppo.FreeCores(window=0.5)
    time.sleep(0.6)
    idle = meter.sample(learner_cpu=0.0)  # cores minus the others' background load
    if idle < 1.2:
        pytest.skip(f"other processes use all but {idle:.2f} cores: no room to measure")
    _spin(0.6)  # this process spins: that is not "others"
    alone = meter.sample(learner_cpu=0.0)
    assert alone >= idle - 0.4, (idle, alone)
    with spinning_neighbour():
        _spin(0.6)
        free = meter.sample(learner_cpu=0.0)
        assert meter.sample(learner_cpu=0.0) == free  # too short an interval: not judged again
    assert alone - 1.4 <= free <= alone - 0.4, (idle, alone, free)  # the neighbour took a core


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_reaches_475_with_a_fixed_seed(tmp_path: Path) -> None:
    start = time.perf_counter()
    out = asyncio.run(ppo.main(ppo.Args(seed=1, plot=str(tmp_path / "curve.png"))))
    print(f"reached {out['mean_return']:.1f} after {out['global_step']:,} env steps in "
          f"{out['seconds']:.1f} s (test {time.perf_counter() - start:.1f} s)")
    assert out["reached"], out
    assert out["mean_return"] >= 475


def test_an_env_id_takes_its_preset_and_flags_override_it(tmp_path: Path) -> None:
    args = ppo.parse_args(["--env-id", "LunarLander-v3", "--gamma", "0.995"])
    preset = ppo.PRESETS["LunarLander-v3"]
    assert (args.target_return, args.num_steps, args.learning_rate) == (
        preset["target_return"], preset["num_steps"], preset["learning_rate"])
    assert args.gamma == 0.995  # given on the command line
    assert ppo.parse_args([]).target_return == 475.0  # CartPole's own defaults
    out = asyncio.run(ppo.main(ppo.Args(
        env_id="LunarLander-v3", total_timesteps=4096, num_envs=8, batch_size=4, num_steps=16,
        plot=str(tmp_path / "curve.png"), print_every=1e9)))
    assert out["global_step"] >= 4096 and out["episodes"] > 0 and not out["reached"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_reaches_200_on_lunar_lander_with_a_fixed_seed(tmp_path: Path) -> None:
    args = ppo.parse_args(["--env-id", "LunarLander-v3", "--seed", "1",
                           "--plot", str(tmp_path / "curve.png")])
    out = asyncio.run(ppo.main(args))
    print(f"reached {out['mean_return']:.1f} after {out['global_step']:,} env steps in "
          f"{out['seconds']:.1f} s")
    assert out["reached"], out
    assert out["mean_return"] >= 200
