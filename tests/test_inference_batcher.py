"""DynamicBatcher: concurrent calls coalesced into forwards per loop tick, results sliced back,
errors and cancellations kept to the callers they concern; and a pool streamed through it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import pytest

import aiopool
from aiopool.inference import DynamicBatcher, PolicyClosed, from_callable


class Recorder:
    """A sync backend: action = row sum (int64), recording each forward's rows."""

    def __init__(self, block: threading.Event | None = None, fail_on: int | None = None) -> None:
        self.forwards: list[int] = []
        self.block = block
        self.fail_on = fail_on

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.forwards.append(len(obs))
        if self.block is not None:
            self.block.wait(5)
        if self.fail_on is not None and (obs[:, 0] == self.fail_on).any():
            raise KeyError(f"row {self.fail_on}")
        return obs.sum(axis=1).astype(np.int64)


def _obs(first: int, rows: int) -> np.ndarray:
    return np.arange(first, first + rows * 2, dtype=np.float32).reshape(rows, 2)


@pytest.mark.asyncio
async def test_concurrent_calls_share_one_forward_and_get_their_own_rows() -> None:
    backend = Recorder()
    batcher = DynamicBatcher(backend)
    sizes = [1, 3, 7, 2, 5]
    inputs = [_obs(100 * k, n) for k, n in enumerate(sizes)]
    results = await asyncio.gather(*(batcher(o) for o in inputs))
    for o, r in zip(inputs, results, strict=True):
        np.testing.assert_array_equal(r, backend.__class__()(o))
    assert backend.forwards == [sum(sizes)]
    assert batcher.stats.requests == 5 and batcher.stats.forwards == 1
    assert batcher.stats.rows_per_forward == sum(sizes)
    await batcher.aclose()


@pytest.mark.asyncio
async def test_max_batch_rows_splits_and_natural_batching_fills_the_next_forward() -> None:
    backend = Recorder()
    batcher = DynamicBatcher(backend, max_batch_rows=8)
    results = await asyncio.gather(*(batcher(_obs(10 * k, 3)) for k in range(6)))
    assert [len(r) for r in results] == [3] * 6
    assert all(n <= 8 for n in backend.forwards) and sum(backend.forwards) == 18
    assert len(backend.forwards) == 3  # 6 + 6 + 6 rows: two calls per forward
    await batcher.aclose()


@pytest.mark.asyncio
async def test_calls_made_during_a_forward_go_together_in_the_next() -> None:
    gate = threading.Event()
    backend = Recorder(block=gate)
    batcher = DynamicBatcher(backend)
    first = asyncio.ensure_future(batcher(_obs(0, 2)))
    await asyncio.sleep(0.02)  # the first forward is running (blocked on the gate)
    later = [asyncio.ensure_future(batcher(_obs(10 * k, 1))) for k in range(1, 5)]
    await asyncio.sleep(0.02)
    gate.set()
    await asyncio.gather(first, *later)
    assert backend.forwards == [2, 4]
    # The second forward waited (briefly) for the first's caller, who did not call again.
    assert batcher.stats.delayed == 1
    await batcher.aclose()


class Sleeper:
    """A sync backend whose forward takes ``seconds`` whatever its rows (a model's overhead)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.forwards: list[int] = []

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.forwards.append(len(obs))
        time.sleep(self.seconds)
        return obs.sum(axis=1).astype(np.int64)


async def _caller(batcher: DynamicBatcher, first: int, calls: int) -> None:
    for k in range(calls):
        out = await batcher(_obs(first + k, 1))
        assert out[0] == 2 * (first + k) + 1
        for _ in range(3):  # the env steps: a few loop turns before the next call
            await asyncio.sleep(0)


@pytest.mark.asyncio
@pytest.mark.parametrize("max_delay_us", [None, 0.0])
async def test_callers_that_fell_out_of_phase_merge_again_unless_max_delay_is_0(
        max_delay_us: float | None) -> None:
    # Two callers that each call again right after their result: started out of phase, so
    # the second waits behind the first's forward and the two alternate through one-row
    # forwards. A forward that had a caller queued behind it waits for its own caller, so the
    # second forward holds both rows, and so does every one after it.
    backend = Sleeper(0.01)
    batcher = DynamicBatcher(backend, max_delay_us=max_delay_us)
    a = asyncio.ensure_future(_caller(batcher, 0, 12))
    while not backend.forwards:  # until a's first forward runs (a fixed sleep raced it on a
        await asyncio.sleep(0.0005)  # loaded machine: b's first call made a forward of its own)
    b = asyncio.ensure_future(_caller(batcher, 100, 12))
    await asyncio.gather(a, b)
    if max_delay_us is None:
        assert backend.forwards == [1] + [2] * 11 + [1], backend.forwards
        assert batcher.stats.delayed >= 1
    else:
        assert backend.forwards == [1] * 24
        assert batcher.stats.delayed == 0
    await batcher.aclose()


@pytest.mark.asyncio
async def test_forwards_stop_waiting_for_callers_slower_than_the_wait() -> None:
    # Forwards of 20 ms, callers whose envs take 14 ms: each forward has the other caller
    # queued behind it, and waits (half a forward, 10 ms) for its own caller, who comes 4 ms
    # too late. After _DELAY_GIVE_UP such waits in a row, forwards stop waiting.
    from aiopool.inference.batching import _DELAY_GIVE_UP

    async def slow_caller(first: int) -> None:
        for k in range(10):
            await batcher(_obs(first + k, 1))
            await asyncio.sleep(0.014)

    backend = Sleeper(0.02)
    batcher = DynamicBatcher(backend)
    a = asyncio.ensure_future(slow_caller(0))
    await asyncio.sleep(0.003)
    await asyncio.gather(a, slow_caller(100))
    assert backend.forwards == [1] * 20
    assert batcher.stats.delayed == _DELAY_GIVE_UP
    await batcher.aclose()


@pytest.mark.asyncio
async def test_a_lone_caller_never_waits() -> None:
    # Nothing queues behind a lone caller's forward: no forward waits for rows.
    backend = Sleeper(0.002)
    batcher = DynamicBatcher(backend)
    await _caller(batcher, 0, 10)
    assert backend.forwards == [1] * 10 and batcher.stats.delayed == 0
    await batcher.aclose()


def test_max_delay_us_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="max_delay_us"):
        DynamicBatcher(Recorder(), max_delay_us=-1)


@pytest.mark.asyncio
async def test_a_failed_forward_fails_exactly_its_callers() -> None:
    backend = Recorder(fail_on=300.0)
    batcher = DynamicBatcher(backend, max_batch_rows=4)
    calls = [batcher(_obs(100 * k, 2)) for k in range(6)]  # forwards: k 0-1, 2-3, 4-5
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert [type(r).__name__ for r in results] == ["ndarray", "ndarray", "KeyError",
                                                   "KeyError", "ndarray", "ndarray"]
    assert "row 300" in str(results[2])
    await batcher.aclose()


@pytest.mark.asyncio
async def test_cancelled_callers_are_dropped_or_leave_the_others_intact() -> None:
    gate = threading.Event()
    backend = Recorder(block=gate)
    batcher = DynamicBatcher(backend)
    running = [asyncio.ensure_future(batcher(_obs(10 * k, 1))) for k in range(3)]
    await asyncio.sleep(0.02)  # their forward runs
    queued = [asyncio.ensure_future(batcher(_obs(100 + 10 * k, 2))) for k in range(3)]
    await asyncio.sleep(0)
    running[1].cancel()  # during its forward
    queued[0].cancel()  # before its forward: its rows are dropped
    gate.set()
    done = await asyncio.gather(*running, *queued, return_exceptions=True)
    assert isinstance(done[1], asyncio.CancelledError)
    assert isinstance(done[3], asyncio.CancelledError)
    np.testing.assert_array_equal(done[0], [1])
    np.testing.assert_array_equal(done[2], [41])
    assert backend.forwards == [3, 4]  # the cancelled queued call's 2 rows never went
    await batcher.aclose()


@pytest.mark.asyncio
async def test_aclose_fails_waiting_callers_and_later_calls() -> None:
    gate = threading.Event()
    batcher = DynamicBatcher(Recorder(block=gate))
    running = asyncio.ensure_future(batcher(_obs(0, 1)))
    await asyncio.sleep(0.02)
    waiting = asyncio.ensure_future(batcher(_obs(10, 1)))
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(batcher.aclose())
    await asyncio.sleep(0)
    with pytest.raises(PolicyClosed, match="closed while this call waited"):
        await waiting
    gate.set()
    np.testing.assert_array_equal(await running, [1])  # a running forward completes
    await closing
    with pytest.raises(PolicyClosed):
        await batcher(_obs(0, 1))


@pytest.mark.asyncio
async def test_no_timer_is_ever_scheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()

    def no_timers(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("DynamicBatcher scheduled a timer")

    monkeypatch.setattr(loop, "call_later", no_timers)
    monkeypatch.setattr(loop, "call_at", no_timers)
    batcher = DynamicBatcher(Recorder())
    for _ in range(3):
        await asyncio.gather(*(batcher(_obs(k, 2)) for k in range(4)))
    await batcher.aclose()


@pytest.mark.asyncio
async def test_an_async_backend_is_awaited_on_the_loop() -> None:
    seen: list[int] = []

    async def remote(obs: np.ndarray) -> np.ndarray:
        seen.append(len(obs))
        await asyncio.sleep(0)
        return obs.sum(axis=1)

    batcher = DynamicBatcher(remote)
    results = await asyncio.gather(*(batcher(_obs(k, 2)) for k in range(5)))
    assert seen == [10] and [len(r) for r in results] == [2] * 5
    direct = from_callable(Recorder(), offload=False)
    np.testing.assert_array_equal(await direct(_obs(0, 2)), [1, 5])
    await batcher.aclose()


@pytest.mark.asyncio
async def test_a_wrong_sized_result_is_a_clear_error() -> None:
    batcher = DynamicBatcher(lambda obs: np.zeros(1))
    with pytest.raises(ValueError, match=r"returned \(1,\) for 3 rows"):
        await batcher(_obs(0, 3))
    await batcher.aclose()


@pytest.mark.asyncio
async def test_rows_of_different_shapes_in_one_batch_fail_those_callers() -> None:
    """Calls whose rows cannot form one batch get a ValueError each (they hung: the batch
    was built outside the forward's error handling); the batcher goes on serving."""
    batcher = DynamicBatcher(lambda obs: obs.sum(axis=1))
    results = await asyncio.wait_for(asyncio.gather(
        batcher(np.ones((2, 2))), batcher(np.ones((2, 3))), return_exceptions=True), 5)
    assert all(isinstance(r, ValueError) and "rows of shapes [(2,), (3,)]" in str(r)
               for r in results), results
    assert (await batcher(np.ones((2, 3)))).tolist() == [3.0, 3.0]
    await batcher.aclose()


@pytest.mark.asyncio
async def test_eight_consumers_stream_a_pool_through_a_torch_policy() -> None:
    """The snippet of the README: one DynamicBatcher, eight consumers over one pool."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")
    from aiopool.inference import torch_policy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    direct = torch_policy(model)
    policy = DynamicBatcher(torch_policy(model))
    mismatches: list[str] = []
    async with aiopool.make("CartPole-v1", num_envs=64, batch_size=8, num_threads=1) as pool:

        async def actor(batches: int) -> None:
            stream = pool.stream()
            for _ in range(batches):
                batch = await asyncio.wait_for(anext(stream), 10)
                obs = np.array(batch.obs)
                actions = await policy(batch.obs)
                if not np.array_equal(actions, direct(obs)):
                    mismatches.append(f"env {batch.env_id.tolist()}")
                batch.send(actions)

        await asyncio.gather(*(actor(50) for _ in range(8)))
    await policy.aclose()
    assert not mismatches, mismatches[:3]
    stats = policy.stats
    assert stats.requests == 400 and stats.forwards < stats.requests, stats
