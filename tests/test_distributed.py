"""Pools on Ray actors (aiopool.distributed) against a real local Ray: seed-for-seed equality
with a local pool, the pool contract through the driver, actor faults and a node removed in
raise and restart modes, rollout mode (fragments equal to a local pool's; learning CartPole
with weight pushes), and no Ray process left behind.

One ``ray.init`` per module (2 CPUs on loopback, no token file, no usage stats, logs kept out
of the test output); each actor asks for half a CPU, so two pools' actors fit while the
previous pool's are still being torn down. The expensive tests run on one loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from helpers import Ledger

import aiopool

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'aiopool[ray]')")

from aiopool.distributed import ActorDied, RemotePool, make_remote  # noqa: E402

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # bind 127.0.0.1 only
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}  # no token in ~/.ray
ASYNCIO_ONLY = pytest.mark.asyncio(loop_factories=["asyncio"])
HALF_CPU = {"num_cpus": 0.5, "num_threads": 1}


@contextlib.contextmanager
def _ray_env() -> Iterator[dict[str, str]]:
    """Ray's settings, with a scratch dir of its own (short: Unix socket paths <= 107 bytes),
    removed afterwards."""
    tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")
    try:
        yield {**RAY_ENV, "RAY_TMPDIR": tmp}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


@pytest.fixture(scope="module", autouse=True)
def ray_cluster() -> Iterator[None]:
    """One local Ray for the module (or the one a session fixture already started); after
    ``ray.shutdown()`` none of the processes it started may be left."""
    if ray.is_initialized():
        yield
        return
    saved = dict(os.environ)
    with _ray_env() as ray_env:
        os.environ.update(ray_env)
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=False)
        started = _descendants(os.getpid())
        try:
            yield
        finally:
            ray.shutdown()
            os.environ.clear()
            os.environ.update(saved)
            left = _reap(started)
    assert not left, f"Ray processes left after ray.shutdown(): {left}"


def _reap(pids: set[int], within: float = 10.0) -> list[int]:
    """Wait for ``pids`` to exit; SIGKILL (and return) those that do not."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:  # never leave them behind, even when the check fails
        os.kill(p, signal.SIGKILL)
    return left


def _run_watched(code: str, timeout: float = 120.0) -> tuple[set[int], str, str, int]:
    """Run ``code`` in a fresh interpreter with its own Ray scratch dir (killed after
    ``timeout``); returns every process it started (seen while it ran), its stdout, stderr
    and exit code."""
    with _ray_env() as ray_env:
        proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **ray_env},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen: set[int] = set()
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            seen |= _descendants(proc.pid)
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate()
    return seen, out, err, proc.returncode


def remote_counting(num_envs: int = 8, batch_size: int | None = None, num_threads: int = 2,
                    **kw: Any) -> RemotePool:
    """``helpers.counting`` on the Ray backend, for the shared contract tests: Counting-v0 on
    two actors when each gets a whole number of batches (so ``step()`` works), else one; half
    a CPU each, so a test's pool starts while the last one's actors are still going away.
    Needs a running Ray (``ray_cluster`` here, or a session fixture)."""
    b = num_envs if batch_size is None else batch_size
    k = 2 if num_envs % 2 == 0 and (num_envs // 2) % b == 0 else 1
    return make_remote("Counting-v0", num_envs=num_envs, batch_size=b, num_actors=k,
                       num_cpus=0.5, num_threads=num_threads, **kw)


def _counting(num_envs: int = 8, batch_size: int = 2, num_actors: int = 2,
              **kw: Any) -> RemotePool:
    return make_remote("Counting-v0", num_envs=num_envs, batch_size=batch_size,
                       num_actors=num_actors, **{**HALF_CPU, **kw})


def _wait_gone(pids: list[int], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), f"actor processes still alive: {pids}"


# -- import and construction --------------------------------------------------------------


def test_import_aiopool_does_not_import_ray() -> None:
    code = "import sys, aiopool; assert 'ray' not in sys.modules, 'aiopool imported ray'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_placement_group_that_cannot_be_placed_says_why() -> None:
    from ray.util.placement_group import placement_group_table

    before = len(placement_group_table())
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"placement group of 2 bundles .*STRICT_SPREAD.* "
                                           r"within 1.0 s: it needs 2 nodes, one per actor"):
        make_remote("CartPole-v1", num_envs=4, num_actors=2, num_cpus=0.5,
                    placement_strategy="STRICT_SPREAD", timeout=1.0)  # one node here
    assert time.monotonic() - start < 10
    table = placement_group_table()
    assert sum(pg["state"] != "REMOVED" for pg in table.values()) <= before  # removed


def test_env_split_spec_and_bad_arguments() -> None:
    with _counting(num_envs=11, batch_size=2, num_actors=3, episode_length=7) as pool:
        assert [list(pool.env_ids_of(j)) for j in range(3)] == [
            [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
        assert pool.num_envs == 11 and pool.batch_size == 2 and pool.num_actors == 3
        assert pool.backend == "ray" and pool.spec.config["episode_length"] == 7
        assert pool.single_observation_space.shape == (4,)
        assert len(set(pool.actor_pids())) == 3
        assert "RemotePool('Counting-v0'" in repr(pool) and "open" in repr(pool)
    assert "closed" in repr(pool)
    with pytest.raises(ValueError, match="batch_size is 5, expected 1 <= batch_size <= 4"):
        _counting(num_envs=8, batch_size=5)
    with pytest.raises(ValueError, match="max_task_retries must stay 0"):
        _counting(actor_options={"max_task_retries": 1})
    with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v0'"):
        make_remote("NoSuchEnv-v0", num_envs=2, **HALF_CPU)


# -- seed for seed the same as a local pool ------------------------------------------------


def _rows_by_env(batch: aiopool.Batch) -> dict[int, tuple[Any, ...]]:
    fields = batch.fields()
    return {int(e): tuple(np.array(f[k]) for f in fields if isinstance(f, np.ndarray))
            for k, e in enumerate(batch.env_id)}


@ASYNCIO_ONLY
@pytest.mark.parametrize("env_id,steps", [("CartPole-v1", 120), ("Hopper-v5", 60)])
async def test_step_equals_a_local_pool_seed_for_seed(env_id: str, steps: int) -> None:
    n = 8
    local = aiopool.make(env_id, num_envs=n, batch_size=n, seed=11, num_threads=1)
    remote = make_remote(env_id, num_envs=n, batch_size=2, num_actors=2, seed=11, **HALF_CPU)
    with local, remote:
        assert remote.spec == local.spec
        local.async_reset()
        remote.async_reset()
        first_local = await local.recv(timeout=30)
        got = [await remote.recv(timeout=30) for _ in range(n // 2)]
        assert _same(aiopool.Batch.sorted_concat(got), first_local)
        rng = np.random.default_rng(0)
        space = local.single_action_space
        ended = 0
        for t in range(steps):
            if isinstance(space, gym.spaces.Discrete):
                actions = rng.integers(0, space.n, size=n)
            else:
                actions = rng.uniform(-1, 1, size=(n, *space.shape)).astype(space.dtype)
            if t == steps // 2:  # re-seed half the envs mid-run, with a list and an int
                ids = [1, 2, 5, 6]
                local.async_reset(seed=[100, None, 102, 7], env_ids=ids)
                remote.async_reset(seed=[100, None, 102, 7], env_ids=ids)
                assert _same(await _collect(remote, 4, 2), await local_recv_short(local, ids))
                local.async_reset(seed=50)
                remote.async_reset(seed=50)
                assert _same(await _collect(remote, n, 2), await local.recv(timeout=30))
            a, b = await remote.step(actions), await local.step(actions)
            assert _same(a, b), f"step {t} differs"
            ended += int((a.terminated | a.truncated).sum())
        assert ended > 0, "no episode ended: autoreset went untested"


@ASYNCIO_ONLY
async def test_nan_actions_refused_as_locally_and_infinities_clipped_alike() -> None:
    local = aiopool.make("Pendulum-v1", num_envs=2, batch_size=2, seed=3, num_threads=1)
    remote = make_remote("Pendulum-v1", num_envs=2, batch_size=2, num_actors=1, seed=3,
                         **HALF_CPU)
    with local, remote:
        assert remote.spec.rejects_nan_actions
        local.async_reset()
        remote.async_reset()
        assert _same(await remote.recv(timeout=30), await local.recv(timeout=30))
        with pytest.raises(ValueError, match=r"actions\[1\] contains nan.*must not be NaN"):
            remote.send(np.array([[0.5], [np.nan]], np.float32))
        actions = np.array([[np.inf], [-np.inf]], np.float32)
        assert _same(await remote.step(actions), await local.step(actions))


async def _collect(pool: RemotePool, rows: int, batch_size: int) -> aiopool.Batch:
    return aiopool.Batch.sorted_concat([await pool.recv(timeout=30)
                                        for _ in range(rows // batch_size)])


async def local_recv_short(pool: aiopool.Pool, ids: list[int]) -> aiopool.Batch:
    assert pool.flush(timeout=30) == len(ids)
    return aiopool.Batch.sorted_concat([await pool.recv(timeout=30)])


def _same(a: aiopool.Batch, b: aiopool.Batch) -> bool:
    fa, fb = a.fields(), b.fields()
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb, strict=True):
        np.testing.assert_array_equal(x, y)
    return True


@ASYNCIO_ONLY
async def test_stream_trajectories_per_env_equal_a_local_pool() -> None:
    """Through stream()/batch.send in arrival order, each env's trajectory is the local one:
    env i's k-th action is a function of (i, k) only."""
    n, horizon = 12, 40
    plan = np.random.default_rng(3).integers(0, 2, size=(n, horizon + 1))
    with aiopool.make("CartPole-v1", num_envs=n, seed=5, num_threads=1) as local:
        local.async_reset()
        want = [await local.recv(timeout=30)]
        for k in range(horizon):
            want.append(await local.step(plan[:, k]))
    expected = {i: [np.array(b.obs[i]) for b in want] for i in range(n)}
    got: dict[int, list[np.ndarray]] = {i: [] for i in range(n)}
    with make_remote("CartPole-v1", num_envs=n, batch_size=3, num_actors=2, seed=5,
                     **HALF_CPU) as pool:
        pool.async_reset()
        while any(len(v) <= horizon for v in got.values()):
            try:
                batch = await pool.recv(timeout=30)
            except aiopool.NothingInFlight:  # envs done at different times: short batches
                assert pool.flush(timeout=30) > 0
                continue
            ids = batch.env_id.tolist()
            for row, i in enumerate(ids):
                got[i].append(np.array(batch.obs[row]))
            more = [i for i in ids if len(got[i]) <= horizon]
            if more:
                pool.send(plan[more, [len(got[i]) - 1 for i in more]], more)
    for i in range(n):
        np.testing.assert_array_equal(np.array(got[i]), np.array(expected[i]))


@ASYNCIO_ONLY
@pytest.mark.parametrize("backend", ["threads", "processes"])
async def test_a_tuple_observation_envs_final_obs_comes_through_as_locally(backend: str) -> None:
    """Blackjack-v1 (Tuple observations) in same_step mode: final_obs is a tuple of arrays, as
    the local pool gives it, of the native env and of gymnasium's on the process backend."""
    stick = np.zeros(4, dtype=np.int64)  # every hand ends at once
    extra: dict[str, Any] = {"num_workers": 1} if backend == "processes" else {}
    with aiopool.make("Blackjack-v1", num_envs=4, seed=2, autoreset="same_step",
                      backend=backend, **extra) as local:
        local.async_reset()
        await local.recv(timeout=30)
        want = await local.step(stick)
        want_final = tuple(np.array(x) for x in want.info["final_obs"])
    with make_remote("Blackjack-v1", num_envs=4, batch_size=4, num_actors=1, seed=2,
                     autoreset="same_step", num_cpus=0.5, backend=backend, **extra) as pool:
        pool.async_reset()
        await pool.recv(timeout=30)
        got = await pool.step(stick)
        assert isinstance(got.obs, tuple) and len(got.obs) == 3
        final = got.info["final_obs"]
        assert isinstance(final, tuple) and len(final) == 3
        for x, y in zip(final, want_final, strict=True):
            np.testing.assert_array_equal(x, y)


# -- the pool contract through the driver --------------------------------------------------


@pytest.mark.asyncio
async def test_batches_are_read_only_batch_objects_with_global_ids() -> None:
    with _counting(num_envs=8, batch_size=4, num_actors=2, seed=5) as pool:
        pool.async_reset()
        first = [await pool.recv(timeout=30) for _ in range(2)]
        for b in first:
            assert isinstance(b, aiopool.Batch) and len(b) == 4
            assert set(b.info) == {"elapsed_step", "episode_return", "episode_length", "draw",
                                   "events_parity"}
            for arr in (b.obs, b.reward, b.env_id, b.info["draw"]):
                assert not arr.flags.writeable
            order = np.argsort(b.env_id)
            assert b.info["draw"][order].tolist() == [
                np.random.default_rng(5 + int(i)).random() for i in np.sort(b.env_id)]
        assert sorted(np.concatenate([b.env_id for b in first]).tolist()) == list(range(8))
        for b in first:
            b.send(b.env_id.astype(np.int64) * 10)  # routed to the actor holding these envs
        stepped = [await pool.recv(timeout=30) for _ in range(2)]
        for b in stepped:
            assert b.reward.tolist() == (b.env_id * 10.0).tolist()
        # One send spanning both actors, in any order.
        pool.send(np.array([7, 3, 1, 0, 2, 4, 5, 6]), [7, 3, 1, 0, 2, 4, 5, 6])
        mixed = aiopool.Batch.sorted_concat([await pool.recv(timeout=30) for _ in range(2)])
        assert mixed.reward.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


@pytest.mark.asyncio
async def test_bad_input_is_refused_on_the_driver_and_the_pool_stays_usable() -> None:
    with _counting(num_envs=4, batch_size=2, num_actors=2, num_actions=5) as pool:
        with pytest.raises(ValueError, match="env 0 has not been reset yet"):
            pool.send(np.zeros(4, np.int64))
        pool.async_reset()
        with pytest.raises(ValueError, match="env 0 still has an action in flight"):
            pool.send(np.zeros(4, np.int64))
        with pytest.raises(ValueError, match="async_reset: env 1 still has an action"):
            pool.async_reset(env_ids=[1])
        b = await pool.recv(timeout=30)
        with pytest.raises(ValueError, match=r"actions has shape \(3,\), expected \(2,\)"):
            b.send(np.zeros(3, np.int64))
        with pytest.raises(ValueError, match="expected integers"):
            b.send(np.zeros(2))
        with pytest.raises(ValueError, match=r"actions\[1\] is 5, expected 0 <= action < 5"):
            b.send(np.array([0, 5]))
        with pytest.raises(ValueError, match="env_ids contains 4"):
            pool.send([0], [4])
        with pytest.raises(ValueError, match="names env 2 twice"):
            pool.send([0, 0], [2, 2])
        b.send(np.array([1, 2]))
        got = {tuple(x.env_id.tolist()): x for x in [await pool.recv(timeout=30)
                                                     for _ in range(2)]}  # in any order
        assert got[tuple(b.env_id.tolist())].reward.tolist() == [1.0, 2.0]


@pytest.mark.asyncio
async def test_recv_timeout_try_recv_and_nothing_in_flight() -> None:
    with _counting(num_envs=4, batch_size=2, num_actors=2, step_ns=1_000_000_000) as pool:
        with pytest.raises(aiopool.NothingInFlight, match="would wait forever"):
            await pool.recv()
        assert pool.try_recv() is None
        pool.async_reset(env_ids=[0])  # one row of a batch of two: never a batch
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv()
        pool.async_reset(env_ids=[1, 2, 3])
        got = [await pool.recv(timeout=30) for _ in range(2)]
        assert pool.try_recv() is None
        for b in got:
            b.send(np.zeros(2, np.int64))
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"no batch arrived within 0\.02 s"):
            await pool.recv(timeout=0.02)
        assert time.monotonic() - start < 0.5  # not the 1 s step
        assert len(await pool.recv(timeout=30)) == 2
        while (b := pool.try_recv()) is None:
            await asyncio.sleep(0.005)
        assert len(b) == 2
        with pytest.raises(ValueError, match="nan"):
            await pool.recv(timeout=float("nan"))


@pytest.mark.asyncio
async def test_cancelled_recv_loses_nothing_and_consumers_share_exactly_once() -> None:
    with _counting(num_envs=8, batch_size=2, num_actors=2, jitter_ns=200_000) as pool:
        ledger = Ledger(8)
        pool.async_reset()
        cancelled = 0
        while ledger.rows < 200:  # recvs cancelled at random points, by timeouts
            try:
                batch = await pool.recv(timeout=0.0005 * (1 + ledger.rows % 3))
            except TimeoutError:
                cancelled += 1
                continue
            ledger.record(batch)
            batch.send(np.ones(len(batch), np.int64))

        async def consume() -> None:
            while ledger.rows < 800:
                b = await pool.recv(timeout=30)
                ledger.record(b)
                await asyncio.sleep(0)
                b.send(np.ones(len(b), np.int64))

        await asyncio.wait_for(asyncio.gather(*(consume() for _ in range(3))), 60)
        assert ledger.rows >= 800


@pytest.mark.asyncio
async def test_backpressure_holds_at_most_one_batch_per_lane() -> None:
    """A consumer that stops asking: the actors run ahead by at most the rows sent, and the
    driver holds at most num_envs // batch_size batches."""
    with _counting(num_envs=8, batch_size=2, num_actors=2) as pool:
        pool.async_reset()
        for _ in range(4):
            b = await pool.recv(timeout=30)
            b.send(np.ones(2, np.int64))
        await asyncio.sleep(0.5)
        assert pool.try_recv() is not None  # arrived while we slept ...
        held = 1
        while pool.try_recv() is not None:
            held += 1
        assert held == 4  # ... and nothing beyond what was sent: 8 envs / 2 per batch


@pytest.mark.asyncio
async def test_step_sorted_by_env_id_and_cancelled_step_gives_back() -> None:
    with _counting(num_envs=8, batch_size=2, num_actors=2, step_ns=20_000_000) as pool:
        with pytest.raises(ValueError, match="needs every env idle"):
            pool.async_reset()
            await pool.step(np.zeros(8, np.int64))
        for _ in range(4):
            await pool.recv(timeout=30)
        batch = await pool.step(np.arange(8))
        assert batch.env_id.tolist() == list(range(8))
        assert batch.reward.tolist() == [float(i) for i in range(8)]
        ledger = Ledger(8)
        ledger.last[:] = batch.obs[:, 0]
        task = asyncio.create_task(pool.step(np.zeros(8, np.int64)))
        await asyncio.sleep(0.03)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        rows = 0
        while rows < 8:  # what the cancelled step sent still arrives, exactly once
            b = await pool.recv(timeout=30)
            ledger.record(b)
            rows += len(b)
        with pytest.raises(ValueError, match="divisible by batch_size"):
            with _counting(num_envs=6, batch_size=2, num_actors=2) as odd:
                await odd.step(np.zeros(6, np.int64))


@pytest.mark.asyncio
async def test_flush_hands_out_short_batches() -> None:
    with _counting(num_envs=8, batch_size=4, num_actors=2, step_ns=30_000_000) as pool:
        pool.async_reset()
        for _ in range(2):
            (await pool.recv(timeout=30)).send(np.ones(4, np.int64))
        for _ in range(2):
            await pool.recv(timeout=30)
        assert pool.flush(timeout=5) == 0
        pool.send(np.array([7, 8, 9]), [0, 1, 5])
        assert pool.flush(timeout=30) == 3
        short = aiopool.Batch.sorted_concat([await pool.recv(timeout=30) for _ in range(2)])
        assert short.env_id.tolist() == [0, 1, 5] and short.reward.tolist() == [7.0, 8.0, 9.0]
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=5)
        pool.send(np.ones(8, np.int64))
        assert [len(await pool.recv(timeout=30)) for _ in range(2)] == [4, 4]


@pytest.mark.asyncio
async def test_recv_blocking_from_sync_code() -> None:
    with _counting(num_envs=4, batch_size=2, num_actors=2) as pool:
        pool.async_reset()
        got = [pool.recv_blocking(timeout=30) for _ in range(2)]
        assert sorted(np.concatenate([b.env_id for b in got]).tolist()) == [0, 1, 2, 3]
        with pytest.raises(aiopool.NothingInFlight):
            pool.recv_blocking()
        got[0].send(np.ones(2, np.int64))
        with pytest.raises(TimeoutError):
            pool.recv_blocking(timeout=0.0)
        assert len(pool.recv_blocking(timeout=30)) == 2


@pytest.mark.asyncio
async def test_close_fails_waiters_ends_stream_and_kills_the_actors() -> None:
    pool = _counting(num_envs=4, batch_size=2, num_actors=2, step_ns=300_000_000)
    pids = pool.actor_pids()
    pool.async_reset()
    for _ in range(2):
        (await pool.recv(timeout=30)).send(np.zeros(2, np.int64))
    assert pool.rows_in_flight == 4
    task = asyncio.create_task(pool.recv())
    while pool.num_waiting == 0:
        await asyncio.sleep(0)
    pool.close()
    with pytest.raises(aiopool.PoolClosed):
        await task
    pool.close()
    await pool.aclose()
    for call in (pool.try_recv, lambda: pool.send(np.zeros(4, np.int64)), pool.async_reset):
        with pytest.raises(aiopool.PoolClosed):
            call()
    with pytest.raises(aiopool.PoolClosed):
        await pool.recv()
    _wait_gone(pids)

    async with _counting(num_envs=4, batch_size=2) as pool:
        n = 0
        async for batch in pool.stream():
            n += 1
            batch.send(np.zeros(2, np.int64))
            if n == 20:
                await pool.aclose()
        assert n == 20


def test_a_pool_dropped_without_close_kills_its_actors() -> None:
    import gc

    pool = _counting(num_envs=2, batch_size=1)
    pids = pool.actor_pids()
    del pool
    gc.collect()
    _wait_gone(pids)


# -- faults ---------------------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_killed_actor_raises_actor_died_naming_the_lost_envs() -> None:
    with _counting(num_envs=8, batch_size=2, num_actors=2, step_ns=1_000_000) as pool:
        victim, survivor = pool.actor_pids()
        pool.async_reset()
        ledger = Ledger(8)
        for _ in range(40):
            b = await pool.recv(timeout=30)
            ledger.record(b)
            b.send(np.ones(2, np.int64))
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(ActorDied) as info:
            while True:  # batches that arrived before the kill still come first
                b = await pool.recv(timeout=5)
                ledger.record(b)
                b.send(np.ones(2, np.int64))
        waited = time.monotonic() - killed
        assert waited < 1.0, f"the kill was reported after {waited:.2f} s"
        err = info.value
        assert isinstance(err, aiopool.WorkerDied) and err.actor == 0
        assert err.env_ids == [0, 1, 2, 3] and err.lost and set(err.lost) <= {0, 1, 2, 3}
        assert "pool actor 0 died" in str(err) and str(err.lost) in str(err)
        for i in err.lost:
            with pytest.raises(ValueError, match=f"env {i} was lost with its actor"):
                pool.send([1], [i])
        # The other actor's envs go on, exactly once each.
        rows = 0
        while rows < 100:
            try:
                b = await pool.recv(timeout=5)
            except aiopool.NothingInFlight:  # the dead actor's envs still held by us
                break
            ledger.record(b)
            rows += len(b)
            if b.env_id.min() >= 4:
                b.send(np.ones(2, np.int64))
        assert rows >= 100
        assert _alive(survivor)


async def _receive_once(pool: RemotePool, via: str) -> aiopool.Batch:
    if via == "recv":
        return await pool.recv()
    async for batch in pool.stream():
        return batch
    raise AssertionError("the stream ended")


@ASYNCIO_ONLY
@pytest.mark.parametrize("via", ["recv", "stream"])
async def test_a_recv_parked_on_a_dying_actor_does_not_hang(via: str) -> None:
    with _counting(num_envs=4, batch_size=2, num_actors=1, step_ns=2_000_000_000) as pool:
        (pid,) = pool.actor_pids()
        pool.async_reset()
        for _ in range(2):
            (await pool.recv(timeout=30)).send(np.zeros(2, np.int64))  # 2 s steps
        waiters = [asyncio.create_task(_receive_once(pool, via)) for _ in range(2)]
        await asyncio.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        done, _ = await asyncio.wait(waiters, timeout=1.0)
        assert len(done) == 2, "a receiver still waits for the dead actor"
        errors = sorted(type(t.exception()).__name__ for t in waiters)
        assert errors == ["ActorDied", "NothingInFlight"]


@pytest.mark.slow  # Ray, 2-7 s: the exhaustive tier
@ASYNCIO_ONLY
async def test_restart_resumes_with_fresh_episodes_and_nothing_twice() -> None:
    start = time.monotonic()
    with _counting(num_envs=8, batch_size=2, num_actors=2, seed=5, restart=True,
                   step_ns=1_000_000) as pool:
        started = time.monotonic() - start  # what starting actors costs on this machine now
        victim, _ = pool.actor_pids()
        pool.async_reset()
        ledger = Ledger(8)
        for _ in range(40):
            b = await pool.recv(timeout=30)
            ledger.record(b)
            b.send(np.ones(2, np.int64))
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        first_after: dict[int, float] = {}
        fresh_draws: dict[int, float] = {}
        while len(first_after) < 4 or ledger.rows < 600:
            b = await pool.recv(timeout=10)
            new_life = (b.env_id < 4) & (b.obs[:, 0] == 1)  # event 1 after the kill: a reset
            for k in np.flatnonzero(new_life):
                i = int(b.env_id[k])
                first_after.setdefault(i, time.monotonic() - killed)
                fresh_draws[i] = float(b.info["draw"][k])
                ledger.last[i] = 0  # the restarted envs count from scratch
            assert (b.info["elapsed_step"][new_life] == 0).all()
            assert (b.obs[new_life, 1] == 0).all()  # episode 0 of the new life
            ledger.record(b)  # each row once, in order per env (after a restart too)
            b.send(np.ones(2, np.int64))
        assert sorted(first_after) == [0, 1, 2, 3]
        resumed = max(first_after.values())
        # A restart starts an actor again: 5 s, or more on a machine so busy that starting the
        # pool's actors took longer than ~1 s (the bound must hold under other load).
        assert resumed < 5.0 + 4 * started, (
            f"the stream resumed {resumed:.2f} s after the kill (the pool started in "
            f"{started:.2f} s)")
        assert pool.restarts == [1, 0]
        assert pool.actor_pids()[0] != victim
        # A restarted actor's envs start from fresh entropy: seed + i would replay episodes.
        assert all(fresh_draws[i] != np.random.default_rng(5 + i).random() for i in range(4))


async def _restarted(pool: RemotePool, index: int, old_pid: int) -> None:
    """Wait until Ray has restarted actor ``index`` (a new process answers), at most 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(ray.exceptions.RayActorError):
            if await pool._actors[index].handle.pid.remote() != old_pid:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"actor {index} was not restarted within 30 s")


@pytest.mark.slow  # Ray, 2-7 s: the exhaustive tier
@ASYNCIO_ONLY
async def test_an_actor_restarted_while_the_user_held_all_its_envs_goes_on() -> None:
    """Nothing was in flight to the actor when it died, so no call failed: the first call to
    its new life (meant for the old one) is refused there, and its envs start over."""
    with _counting(num_envs=4, batch_size=2, num_actors=2, seed=5, restart=True) as pool:
        victim, _ = pool.actor_pids()
        pool.async_reset()
        held = [await pool.recv(timeout=30) for _ in range(2)]  # every env's first row
        assert sorted(int(i) for b in held for i in b.env_id) == [0, 1, 2, 3]
        os.kill(victim, signal.SIGKILL)
        await _restarted(pool, 0, victim)
        for b in held:
            b.send(np.ones(2, np.int64))
        got = [await pool.recv(timeout=10) for _ in range(2)]
        mine = next(b for b in got if b.env_id[0] < 2)
        assert (mine.obs[:, 0] == 1).all() and (mine.info["elapsed_step"] == 0).all()  # reset
        assert pool.restarts == [1, 0]


@pytest.mark.slow  # Ray, 2-7 s: the exhaustive tier
@ASYNCIO_ONLY
async def test_rollouts_go_on_after_an_actor_restarted_while_the_consumer_held_its_fragment(
        ) -> None:
    policy = LinearPolicy([1.0, 0.0, 0.0, 0.0], n=7)
    with _counting(num_envs=4, batch_size=2, num_actors=2, restart=True) as pool:
        victim, _ = pool.actor_pids()
        fragments = pool.rollouts(policy, horizon=4, depth=1)
        before = await anext(fragments)
        while before.actor != 0:
            before = await anext(fragments)
        os.kill(victim, signal.SIGKILL)  # its one fragment is with us: nothing in flight
        await _restarted(pool, 0, victim)
        after = await asyncio.wait_for(anext(fragments), 10)
        while after.actor != 0:
            after = await asyncio.wait_for(anext(fragments), 10)
        assert (after.obs[0, :, 0] == 1).all()  # fresh episodes, not a continuation
        assert not np.array_equal(after.obs[0], before.next_obs)
        await fragments.aclose()


# -- a node removed (its own two-node cluster, in a subprocess: one Ray per process) ---------


@pytest.mark.slow  # node loss, a two-node cluster: the exhaustive tier
def test_a_removed_node_raises_actor_died_and_the_other_node_goes_on() -> None:
    code = """
import asyncio, time
import numpy as np, ray
from ray.cluster_utils import Cluster
from aiopool.distributed import ActorDied, make_remote
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
worker = cluster.add_node(num_cpus=1)
ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
async def main():
    pool = make_remote("Counting-v0", num_envs=8, batch_size=2, num_actors=2, num_cpus=1,
                       placement_strategy="STRICT_SPREAD", step_ns=1_000_000)
    nodes = [ray.get(h.__ray_call__.remote(lambda s: ray.get_runtime_context().get_node_id()))
             for h in pool.actors]
    assert len(set(nodes)) == 2, nodes
    victim = nodes.index(worker.node_id)
    n = 0
    async for b in pool.stream():
        b.send(np.ones(2, np.int64)); n += 1
        if n == 50:
            break
    removed = time.monotonic()
    cluster.remove_node(worker)
    try:
        while True:
            b = await pool.recv(timeout=30)
            b.send(np.ones(2, np.int64))
    except ActorDied as e:
        took = time.monotonic() - removed
        assert e.actor == victim and e.env_ids == list(pool.env_ids_of(victim)), e
    rows = 0
    while rows < 100:
        b = await pool.recv(timeout=30)
        assert b.env_id[0] not in pool.env_ids_of(victim)
        rows += len(b)
        b.send(np.ones(2, np.int64))
    pool.close()
    print(f"reported after {took:.3f} s")
asyncio.run(main())
ray.shutdown()
cluster.shutdown()
"""
    seen, out, err, returncode = _run_watched(code)
    _reap(seen)  # the two nodes' processes, whatever happened
    assert returncode == 0, err[-3000:]
    took = float(out.split("reported after ")[1].split()[0])
    assert took < 5.0, f"node loss reported after {took} s"


@pytest.mark.slow  # ~20 s: a cluster of its own (3.4 s from the removal to the envs' return)
def test_with_restart_the_stream_goes_on_after_a_node_is_removed() -> None:
    code = """
import asyncio, time
import numpy as np, ray
from ray.cluster_utils import Cluster
from aiopool.distributed import make_remote
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
worker = cluster.add_node(num_cpus=1)
ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
def node_of(handle):
    return ray.get(handle.__ray_call__.remote(lambda s: ray.get_runtime_context().get_node_id()))
async def main():
    # Half a CPU each, spread over the two nodes: the head has room for both after the loss.
    start = time.monotonic()
    pool = make_remote("Counting-v0", num_envs=8, batch_size=2, num_actors=2, num_cpus=0.5,
                       placement_strategy="SPREAD", restart=True, step_ns=1_000_000)
    print(f"started in {time.monotonic() - start:.3f} s")
    nodes = [node_of(h) for h in pool.actors]
    assert sorted(nodes) == sorted([cluster.head_node.node_id, worker.node_id]), nodes
    victim = nodes.index(worker.node_id)
    lost = set(pool.env_ids_of(victim))
    n = 0
    async for b in pool.stream():
        b.send(np.ones(2, np.int64)); n += 1
        if n == 50:
            break
    removed = time.monotonic()
    cluster.remove_node(worker)
    back = {}
    rows = 0
    while len(back) < len(lost) or rows < 200:
        b = await pool.recv(timeout=60)  # ActorDied would fail the test
        for k, i in enumerate(b.env_id.tolist()):
            if i in lost and b.obs[k, 0] == 1:  # event 1: a reset, the first of a new life
                assert b.info["elapsed_step"][k] == 0 and b.obs[k, 1] == 0
                back.setdefault(i, time.monotonic() - removed)
        rows += len(b)
        b.send(np.ones(2, np.int64))
    assert pool.restarts[victim] == 1 and pool.restarts[1 - victim] == 0, pool.restarts
    assert node_of(pool.actors[victim]) == cluster.head_node.node_id
    pool.close()
    print(f"resumed after {max(back.values()):.3f} s")
asyncio.run(main())
ray.shutdown()
cluster.shutdown()
"""
    seen, out, err, returncode = _run_watched(code)
    _reap(seen)
    assert returncode == 0, err[-3000:]
    took = float(out.split("resumed after ")[1].split()[0])
    started = float(out.split("started in ")[1].split()[0])
    # 15 s, or more on a machine so busy that starting the pool's actors took over ~1 s.
    assert took < 15.0 + 4 * started, (
        f"the lost envs came back {took} s after the node was removed (the pool started in "
        f"{started} s)")


# -- no Ray process left behind ------------------------------------------------------------


@pytest.mark.slow  # Ray, 2-7 s: the exhaustive tier
def test_no_ray_process_left_after_close_and_shutdown() -> None:
    code = """
import asyncio, os, sys, time
import numpy as np, ray
from aiopool.distributed import make_remote
ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
async def main():
    async with make_remote("Counting-v0", num_envs=4, batch_size=2, num_actors=2,
                           num_cpus=0.5) as pool:
        n = 0
        async for b in pool.stream():
            b.send(np.zeros(2, np.int64)); n += 1
            if n == 50:
                break
asyncio.run(main())
ray.shutdown()
print("done")
"""
    seen, out, err, returncode = _run_watched(code)
    left = _reap(seen)
    assert returncode == 0 and "done" in out, err[-3000:]
    assert len(seen) >= 4, f"expected gcs_server, raylet and workers, saw {seen}"
    assert not left, f"processes left behind: {left}"


# -- rollout mode ---------------------------------------------------------------------------


class LinearPolicy:
    """A row-wise policy (each env's action depends on its own obs only), picklable by value:
    ``register_pickle_by_value`` below, since Ray's workers cannot import this test module."""

    def __init__(self, w: list[float], n: int = 2) -> None:
        self.w, self.n = np.asarray(w, dtype=np.float64), n

    def set_weights(self, w: Any) -> None:
        self.w = np.asarray(w, dtype=np.float64)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return ((obs.astype(np.float64) @ self.w).astype(np.int64) % self.n).astype(np.int64)


ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@ASYNCIO_ONLY
async def test_rollout_fragments_are_each_envs_own_steps_in_order() -> None:
    horizon = 16
    with _counting(num_envs=8, batch_size=2, num_actors=2, episode_length=5,
                   jitter_ns=100_000) as pool:
        policy = LinearPolicy([1.0, 0.0, 0.0, 0.0], n=7)  # action = events % 7
        last: dict[int, np.ndarray] = {}
        versions = []
        count = 0
        async for f in pool.rollouts(policy, horizon=horizon):
            count += 1
            assert f.obs.shape == (horizon, 4, 4) and f.actions.shape == (horizon, 4)
            assert f.reward.shape == f.terminated.shape == f.info["elapsed_step"].shape
            assert f.env_id.tolist() == list(pool.env_ids_of(f.actor))
            assert not f.obs.flags.writeable and not f.reward.flags.writeable
            events = f.obs[:, :, 0]
            scale = 1 + f.policy_version  # version 1: the weights pushed below
            np.testing.assert_array_equal(f.actions, scale * events % 7)  # row by row
            np.testing.assert_array_equal(np.diff(events, axis=0), 1)  # each env's own order
            np.testing.assert_array_equal(f.next_obs[:, 0], events[-1] + 1)
            reset = f.info["elapsed_step"] == 0  # next_step autoreset: the action is ignored
            np.testing.assert_array_equal(f.reward[~reset], f.actions[~reset])
            assert (f.reward[reset] == 0).all() and reset.any()
            if f.actor in last:  # the next fragment starts where the last one ended
                np.testing.assert_array_equal(f.obs[0], last[f.actor])
            last[f.actor] = f.next_obs
            versions.append(f.policy_version)
            if count == 4:
                assert pool.set_weights([2.0, 0.0, 0.0, 0.0]) == 1  # action = 2 * events % 7
            if count == 12:
                break
        assert versions[:4] == [0] * 4 and versions[-1] == 1
        with pytest.raises(ValueError, match="rollout mode"):
            pool.send(np.zeros(8, np.int64))


@ASYNCIO_ONLY
async def test_rollouts_report_each_killed_actor_then_that_nothing_can_come() -> None:
    policy = LinearPolicy([1.0, 0.0, 0.0, 0.0], n=7)

    async def until_it_raises(pool: RemotePool, kill: int | None = None) -> list[int]:
        actors = []
        async for f in pool.rollouts(policy, horizon=4):
            actors.append(f.actor)
            if len(actors) == 2 and kill is not None:
                os.kill(kill, signal.SIGKILL)
        return actors

    with _counting(num_envs=4, batch_size=2, num_actors=2, step_ns=100_000) as pool:
        first, second = pool.actor_pids()
        with pytest.raises(ActorDied) as info:
            await asyncio.wait_for(until_it_raises(pool, kill=first), 30)
        assert info.value.actor == 0 and info.value.env_ids == [0, 1]
        async for f in pool.rollouts(policy, horizon=4):  # the other actor goes on
            assert f.actor == 1
            break
        with pytest.raises(ActorDied) as info:
            await asyncio.wait_for(until_it_raises(pool, kill=second), 30)
        assert info.value.actor == 1
        with pytest.raises(aiopool.NothingInFlight):
            await asyncio.wait_for(until_it_raises(pool), 30)


def _fail_to_unpickle() -> None:
    raise ImportError("no module named 'policies_only_the_driver_has'")


class UnpicklablePolicy(LinearPolicy):
    """A policy whose class the actors cannot load (as one defined in a module only the
    driver can import)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _fail_to_unpickle, ()


@ASYNCIO_ONLY
async def test_rollouts_raise_when_an_actor_cannot_take_the_policy() -> None:
    """Rather than wait forever for fragments that wait for a policy that never came."""
    with _counting(num_envs=4, batch_size=2, num_actors=2) as pool:
        with pytest.raises(RuntimeError, match="could not take the policy"):
            async with asyncio.timeout(30):
                async for _ in pool.rollouts(UnpicklablePolicy([1.0, 0.0, 0.0, 0.0]),
                                             horizon=4):
                    pass


@ASYNCIO_ONLY
@pytest.mark.parametrize("batch_size", [2, 4])  # a stream of batches; lockstep (B = n/actor)
async def test_rollouts_equal_a_local_pool_stepped_with_the_same_policy(batch_size: int) -> None:
    n, horizon = 8, 40
    policy = LinearPolicy([0.0, 0.0, 1.0, 1.0])  # push the pole back: long episodes
    with aiopool.make("CartPole-v1", num_envs=n, seed=9, num_threads=1) as local:
        local.async_reset()
        obs = np.array((await local.recv(timeout=30)).obs)
        want_obs, want_rew = [], []
        for _ in range(2 * horizon):
            want_obs.append(obs)
            b = await local.step(policy(obs))
            want_rew.append(np.array(b.reward))
            obs = np.array(b.obs)
    frags: dict[int, list[Any]] = {0: [], 1: []}
    with make_remote("CartPole-v1", num_envs=n, batch_size=batch_size, num_actors=2, seed=9,
                     **HALF_CPU) as pool:
        async for f in pool.rollouts(policy, horizon=horizon):
            frags[f.actor].append(f)
            if all(len(v) >= 2 for v in frags.values()):
                break
    for j, cols in ((0, slice(0, 4)), (1, slice(4, 8))):
        got_obs = np.concatenate([f.obs for f in frags[j][:2]])
        got_rew = np.concatenate([f.reward for f in frags[j][:2]])
        np.testing.assert_array_equal(got_obs, np.array(want_obs)[:, cols])
        np.testing.assert_array_equal(got_rew, np.array(want_rew)[:, cols])


@pytest.mark.slow  # Ray, 2-7 s: the exhaustive tier
@ASYNCIO_ONLY
async def test_each_actors_fragments_come_in_the_order_it_made_them() -> None:
    """A slow consumer lets several fragments of an actor finish before it looks: they still
    come in the order the actor made them, each starting where the one before ended."""
    policy = LinearPolicy([0.0, 0.0, 1.0, 1.0])
    frags: dict[int, list[Any]] = {0: [], 1: []}
    with make_remote("CartPole-v1", num_envs=8, batch_size=4, num_actors=2, seed=3,
                     **HALF_CPU) as pool:
        async for f in pool.rollouts(policy, horizon=8, depth=4):
            frags[f.actor].append(f)
            if all(len(v) >= 8 for v in frags.values()):
                break
            await asyncio.sleep(0.1)  # the actors run up to 4 fragments ahead meanwhile
    for got in frags.values():
        for before, after in itertools.pairwise(got):
            np.testing.assert_array_equal(after.obs[0], before.next_obs)


@pytest.mark.asyncio
async def test_an_actors_fragments_run_in_the_order_sent_whatever_order_they_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray may start an async actor's calls out of order: fragment ``seq`` still runs after
    ``seq - 1`` and starts where it ended; calls of a generation given up on are refused."""
    from aiopool.distributed import _host

    monkeypatch.setattr(_host, "_was_reconstructed", lambda: False)  # not in an actor
    host = _host.PoolHost("CartPole-v1", 4, 4, 0, 3, {"num_threads": 1})
    host.set_policy(LinearPolicy([0.0, 0.0, 1.0, 1.0]))
    try:
        calls = {k: asyncio.ensure_future(host.fragment(5, 0, k)) for k in (2, 0, 3, 1)}
        got = [await calls[k] for k in range(4)]
        for before, after in itertools.pairwise(got):
            np.testing.assert_array_equal(after["obs"][0], before["next_obs"])
        # Generation 1: the driver gave up on gen 0's calls in flight (their replies lost), so
        # its envs start fresh episodes instead of leaving a gap, and gen 0's calls are over.
        newer = await host.fragment(5, 1, 0)
        assert newer["fields"]["elapsed_step"][0].tolist() == [1] * 4
        with pytest.raises(_host.StaleCall):
            await host.fragment(5, 0, 4)
        late = asyncio.ensure_future(host.fragment(5, 1, 2))  # cancelled as its turn comes:
        await asyncio.sleep(0)                                # fragment 3 still runs
        following = asyncio.ensure_future(host.fragment(5, 1, 3))
        one = await host.fragment(5, 1, 1)
        late.cancel()
        after = await asyncio.wait_for(following, 10)
        np.testing.assert_array_equal(after["obs"][0], one["next_obs"])
    finally:
        host.close()


@pytest.mark.asyncio
async def test_lockstep_fragments_do_not_depend_on_the_rows_finish_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The actor's lockstep loop (in process, no Ray): rows that arrive out of env order (as
    with several threads) are put in place before the policy sees them, so the fragments are
    those of rows in order. Every batch is reversed here, so the scatter path runs each step."""
    from aiopool.batch import Batch
    from aiopool.distributed import _host

    monkeypatch.setattr(_host, "_was_reconstructed", lambda: False)  # not in an actor

    async def fragments(reverse: bool) -> list[dict[str, Any]]:
        host = _host.PoolHost("CartPole-v1", 6, 6, 10, 3, {"num_threads": 1})
        host.set_policy(LinearPolicy([0.0, 0.0, 1.0, 1.0]))
        recv = host._pool.recv

        async def reversed_recv() -> Batch:
            b = await recv()
            fields = tuple(f[::-1] for f in b.fields())
            out = Batch((*fields[:5], None), b._names, b._pool)
            out._fields = fields
            return out

        if reverse:
            monkeypatch.setattr(host._pool, "recv", reversed_recv)
        try:
            return [await host.fragment(50, 0, k) for k in range(3)]
        finally:
            host.close()

    want, got = await fragments(False), await fragments(True)
    for w, g in zip(want, got, strict=True):
        for key in ("obs", "actions", "next_obs", "env_id"):
            np.testing.assert_array_equal(g[key], w[key])
        assert g["fields"].keys() == w["fields"].keys()
        for name in w["fields"]:
            np.testing.assert_array_equal(g["fields"][name], w["fields"][name])
    assert (want[-1]["fields"]["terminated"]).any()  # episodes ended (autoreset rows too)


class ColumnPolicy:
    """CEM's population in rollout mode: env ``j`` of each actor acts with its own linear
    weights ``w[j]`` (push ``w`` of shape ``(n, 5)``, ``n`` envs an actor). Lockstep rollouts
    (one batch of all an actor's envs) give it every env's obs in env order."""

    def __init__(self, w: np.ndarray) -> None:
        self.w = np.asarray(w, dtype=np.float64)

    def set_weights(self, w: Any) -> None:
        self.w = np.asarray(w, dtype=np.float64)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return (np.einsum("ij,ij->i", obs, self.w[:, :4]) + self.w[:, 4] > 0).astype(np.int64)


def _first_whole_episodes(f: Any, seen: int, first: dict[tuple[int, int], float]) -> None:
    """Record in ``first[(actor, env column)]`` the return of the first episode each env
    began under ``f.policy_version`` (after the actor's first ``seen`` steps under it): one
    unbiased sample per env, long episodes as likely as short ones."""
    t = seen + np.arange(f.reward.shape[0])[:, None]  # steps under this version before each row
    whole = (f.terminated | f.truncated) & (f.info["episode_length"] <= t)
    for row, col in zip(*np.nonzero(whole), strict=True):
        first.setdefault((f.actor, int(col)), float(f.info["episode_return"][row, col]))


@ASYNCIO_ONLY
async def test_rollout_mode_learns_cartpole_with_weight_pushes() -> None:
    """The cross-entropy method over rollout fragments: each generation pushes a population
    of linear policies (one per env column, played on both actors), scores each by the
    steps it played per pole that fell (its mean episode length, truncations aside), and
    refits, until half the population lets no pole fall in 600 steps (at most 60
    generations). The mean policy must then average a return of 150 or more over the first
    episode each env plays with it from start to end (random actions: ~22; episodes end at
    200; a linear policy can reach 200 every time). Every action of every fragment must be
    the one its ``policy_version``'s weights give for its obs.

    The sampling noise keeps a floor (0.1): with the floor decaying to nothing, 4 of 16
    probe runs collapsed on a policy that let poles fall and ended at 140-160 after 100
    generations; with it, 16 of 16 reached 200 within 49."""
    n, horizon = 32, 100  # envs an actor (the population); steps a fragment
    per_generation, per_evaluation = 3, 5  # fragments an actor; 5: every env's first
    # episode under the new weights has ended (the running one ends by 200, the next by 400)
    rng = np.random.default_rng(0)
    mean, std = np.zeros(5), np.ones(5)
    start = time.monotonic()
    with make_remote("CartPole-v1", num_envs=2 * n, batch_size=n, num_actors=2, seed=0,
                     max_episode_steps=200, **HALF_CPU) as pool:
        population = rng.normal(mean, std, size=(n, 5))
        pushed = {0: population}
        version, generations, evaluating = 0, 0, False
        seen = [0, 0]
        falls = np.zeros(n)
        first: dict[tuple[int, int], float] = {}
        async for f in pool.rollouts(ColumnPolicy(population), horizon=horizon):
            played = ColumnPolicy(pushed[f.policy_version])
            wrong = [t for t in range(horizon) if not np.array_equal(played(f.obs[t]),
                                                                      f.actions[t])]
            assert not wrong, (f"actor {f.actor}: the actions of steps {wrong[:5]} are not "
                               f"those of version {f.policy_version}'s weights")
            if f.policy_version != version:
                continue  # computed with older weights (depth 2: up to 2 an actor)
            falls += f.terminated.sum(0)
            _first_whole_episodes(f, seen[f.actor], first)
            seen[f.actor] += horizon
            if min(seen) < (per_evaluation if evaluating else per_generation) * horizon:
                continue
            if evaluating:
                break
            fitness = sum(seen) / (1 + falls)
            elite = population[np.argsort(fitness)[-max(2, n // 5):]]
            mean, std = elite.mean(0), elite.std(0) + max(0.5 / (1 + generations), 0.1)
            generations += 1
            evaluating = np.median(fitness) >= 600 or generations == 60  # no fall in 600
            population = (np.tile(mean, (n, 1)) if evaluating
                          else rng.normal(mean, std, size=(n, 5)))
            version = pool.set_weights(population)
            pushed[version] = population
            seen, falls, first = [0, 0], np.zeros(n), {}
    took = time.monotonic() - start
    assert len(first) == 2 * n, f"{len(first)} of {2 * n} envs ended an episode"
    returns = np.array(list(first.values()))
    assert returns.mean() >= 150, (
        f"mean return {returns.mean():.1f} of the learned policy after {generations} "
        f"generations (random: ~22)")
    assert took < 60, f"took {took:.1f} s"


# -- the example --------------------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_the_cem_example_runs_its_loop_on_a_remote_pool() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    try:
        import distributed_cem
    finally:
        sys.path.pop(0)
    args = distributed_cem.Args(num_envs=16, batch_size=4, generation=16, max_generations=2)
    with make_remote("CartPole-v1", num_envs=16, batch_size=4, num_actors=2,
                     **HALF_CPU) as pool:
        result = await distributed_cem.train(args, pool)
    assert result["generations"] == 2 and result["env_steps"] > 0


@pytest.mark.slow  # Ray, 2-7 s: the exhaustive tier
@ASYNCIO_ONLY
async def test_a_rendering_remote_pool_draws_each_actors_envs() -> None:
    """render_mode travels to the actors' pools; render / arender give the frames of envs held
    by both actors in the order asked, equal to gymnasium's, and refuse envs in flight."""
    with make_remote("CartPole-v1", num_envs=4, batch_size=2, num_actors=2, seed=3,
                     render_mode="rgb_array", **HALF_CPU) as pool:
        assert pool.render_mode == "rgb_array" and pool.render_fps == 50.0
        with pytest.raises(ValueError, match="not been reset"):
            pool.render()
        pool.async_reset()
        for _ in range(2):
            await pool.recv(timeout=30)
        frames = pool.render([3, 0, 2])
        assert frames.shape == (3, 400, 600, 3) and not frames.flags.writeable
        for row, i in enumerate([3, 0, 2]):
            ref = gym.make("CartPole-v1", render_mode="rgb_array")
            ref.reset(seed=3 + i)
            assert np.array_equal(frames[row], ref.render()), f"env {i}"
            ref.close()
        assert np.array_equal(await pool.arender([2, 3]), frames[[2, 0]])
        pool.send(np.zeros(2, np.int64), env_ids=[0, 1])
        with pytest.raises(ValueError, match="env 0 has a step in flight"):
            pool.render()
        await pool.recv(timeout=30)
        assert pool.render().shape == (4, 400, 600, 3)
    with make_remote("CartPole-v1", num_envs=2, num_actors=1, **HALF_CPU) as pool:
        with pytest.raises(ValueError, match="render_mode='rgb_array'"):
            pool.render()
