"""Batches are zero-copy views whose block is recycled only when the last view dies."""

from __future__ import annotations

import asyncio
import gc
import weakref

import numpy as np
import pytest
from helpers import counting

import aiopool


@pytest.mark.asyncio
async def test_kept_batches_stay_intact_while_the_pool_runs_on() -> None:
    with counting(num_envs=8, batch_size=4) as pool:
        pool.async_reset()
        kept = []
        copies = []
        async for batch in pool.stream():
            kept.append(batch)
            copies.append((batch.obs.copy(), batch.env_id.copy(), batch.reward.copy()))
            batch.send(np.full(len(batch), len(kept) % 1000, dtype=np.int64))
            if len(kept) == 300:
                break
        for batch, (obs, env_id, reward) in zip(kept, copies, strict=True):
            assert np.array_equal(batch.obs, obs)
            assert np.array_equal(batch.env_id, env_id)
            assert np.array_equal(batch.reward, reward)
        assert pool._native.blocks_allocated >= 300  # kept blocks were never reused


@pytest.mark.asyncio
async def test_dropped_batches_are_recycled() -> None:
    with counting(num_envs=8, batch_size=4) as pool:
        pool.async_reset()
        n = 0
        async for batch in pool.stream():
            batch.send(np.zeros(len(batch), dtype=np.int64))
            n += 1
            if n == 2000:
                break
        assert pool._native.blocks_allocated < 20


@pytest.mark.asyncio
async def test_views_outlive_the_pool() -> None:
    pool = counting(num_envs=4, batch_size=4)
    pool.async_reset()
    batch = await pool.recv()
    obs, info = batch.obs, batch.info
    expected = obs.copy()
    pool.close()
    del pool, batch
    gc.collect()
    churn = [np.full(obs.shape, 7, dtype=np.int64) for _ in range(100)]  # reuse freed memory
    assert np.array_equal(obs, expected)
    assert info["draw"].shape == (4,)
    del churn


@pytest.mark.asyncio
async def test_batch_send_after_the_pool_is_gone() -> None:
    import aiopool

    pool = counting(num_envs=2, batch_size=2)
    pool.async_reset()
    batch = await pool.recv()
    pool.close()
    with pytest.raises(aiopool.PoolClosed):
        batch.send(np.zeros(2, dtype=np.int64))
    del pool
    gc.collect()
    with pytest.raises(aiopool.PoolClosed):
        batch.send(np.zeros(2, dtype=np.int64))


@pytest.mark.asyncio
@pytest.mark.parametrize("end", ["close", "drop"])
async def test_pools_made_and_ended_inside_one_task_are_freed(end: str) -> None:
    """A periodic evaluation: pools made and closed (or dropped) one at a time inside one
    long-lived task, each left with a batch it never sent. Each pool's count of held batches
    goes with it, and with it the unsent batch's block (the task's done-callback kept both
    until the task ended: ~1.5 MB per Atari evaluation)."""
    gone = []
    for _ in range(3):
        pool = counting(num_envs=4, batch_size=4)
        pool.async_reset()
        batch = await pool.recv()  # handed out to this task, never sent
        gone.append(weakref.ref(pool._holders))
        if end == "close":
            pool.close()
        del pool, batch
        gc.collect()
    assert [ref() for ref in gone] == [None] * 3


@pytest.mark.asyncio
async def test_a_batch_made_in_cpp_is_the_batch_python_makes() -> None:
    """A native pool makes its batches in C++ (``take_held``); a process-backed pool in Python
    (``Batch()`` and ``Holders.hand_out``). Both are held the same way and behave alike."""
    from aiopool.batch import Batch

    for backend in ("threads", "processes"):
        with aiopool.make("CartPole-v1", num_envs=4, batch_size=2, seed=0,
                          backend=backend) as pool:
            pool.async_reset()
            batch = await pool.recv()
            assert type(batch) is Batch and not batch._sent
            assert (batch.obs.shape, batch.env_id.dtype) == ((2, 4), np.int32)
            assert set(batch.info) >= {"elapsed_step", "episode_return", "episode_length"}
            token = batch._token
            assert token is not None and token() is batch
            held = pool._holders._held[token]
            assert held[1] is batch.env_id and held[2] == 2
            del batch, held
            for _ in range(2):  # the loop's last callback keeps the receive's future a while
                await asyncio.sleep(0)
            assert token() is None and token not in pool._holders._held  # dropped: released
            batch = await pool.recv()
            batch.send(np.zeros(2, dtype=np.int64))
            assert batch._token is None and not pool._holders


@pytest.mark.parametrize("body", [
    "pass",  # no slots at all
    "__slots__ = ('obs',)",  # some missing
    "__slots__ = ()\n    def __del__(self): pass",  # a finaliser take_held would skip
])
def test_configure_batches_refuses_a_class_it_cannot_fill(body: str) -> None:
    from aiopool.batch import Batch

    namespace: dict[str, object] = {"Batch": Batch}
    exec(f"class Sub(Batch):\n    {body}\nclass Plain:\n    {body}\n", namespace)
    with aiopool.make("CartPole-v1", num_envs=2, batch_size=2) as pool:
        for cls in (namespace["Sub"], namespace["Plain"]):
            if cls is namespace["Sub"] and body.startswith("__slots__ = ('obs'"):
                continue  # Batch's own slots are inherited: a fine class
            with pytest.raises(TypeError):
                pool._native.configure_batches(cls, (), weakref.ref(pool), {}, print, print)
