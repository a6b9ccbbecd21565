"""Close: idempotent, pending awaits fail with PoolClosed, reader removed before the fd
closes, pools dropped without close are finalised, forked children get a clear error."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest
from helpers import counting

import aiopool

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.mark.asyncio
async def test_close_fails_pending_recv_and_is_idempotent() -> None:
    pool = counting(num_envs=2, batch_size=2, step_ns=200_000_000)
    pool.async_reset()
    await pool.recv()
    pool.send(np.zeros(2, dtype=np.int64))
    task = asyncio.create_task(pool.recv())
    while pool._doorbell.num_waiting == 0:
        await asyncio.sleep(0)
    pool.close()
    with pytest.raises(aiopool.PoolClosed):
        await task
    pool.close()
    await pool.aclose()
    with pytest.raises(aiopool.PoolClosed):
        await pool.recv()
    with pytest.raises(aiopool.PoolClosed):
        pool.send(np.zeros(2, dtype=np.int64))
    with pytest.raises(aiopool.PoolClosed):
        pool.try_recv()


@pytest.mark.asyncio
async def test_stream_ends_when_the_pool_closes() -> None:
    pool = counting(num_envs=4, batch_size=2)
    n = 0
    async for batch in pool.stream():
        n += 1
        batch.send(np.zeros(len(batch), dtype=np.int64))
        if n == 50:
            pool.close()
    assert n == 50


@pytest.mark.asyncio
async def test_fd_number_reused_by_the_next_pool_still_wakes() -> None:
    # asyncio keeps a stale selector key if remove_reader is skipped before the fd closes;
    # the next pool then gets the same fd number and never wakes.
    for _ in range(3):
        async with counting(num_envs=2, batch_size=2, step_ns=5_000_000, recv_spin_us=0) as pool:
            pool.async_reset()
            await pool.recv(timeout=5)
            pool.send(np.zeros(2, dtype=np.int64))
            assert len(await pool.recv(timeout=5)) == 2  # woken through the eventfd


@pytest.mark.asyncio
async def test_pool_dropped_without_close_is_finalised() -> None:
    pool = counting(num_envs=2, batch_size=2, step_ns=1_000_000, recv_spin_us=0)
    pool.async_reset()
    await pool.recv(timeout=5)
    pool.send(np.zeros(2, dtype=np.int64))
    await pool.recv(timeout=5)  # the reader is registered now
    native = pool._native
    ref = weakref.ref(pool)
    del pool
    gc.collect()
    assert ref() is None
    assert native.closed
    async with counting(num_envs=2, batch_size=2, step_ns=1_000_000, recv_spin_us=0) as again:
        again.async_reset()
        await again.recv(timeout=5)
        again.send(np.zeros(2, dtype=np.int64))
        assert len(await again.recv(timeout=5)) == 2


def test_close_wakes_a_thread_in_recv_blocking() -> None:
    pool = counting(num_envs=2, batch_size=2, step_ns=500_000_000)
    pool.async_reset()
    pool.recv_blocking(timeout=5)
    pool.send(np.zeros(2, dtype=np.int64))
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            pool.recv_blocking()
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=wait)
    t.start()
    t.join(0.05)
    pool.close()
    t.join(5)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], aiopool.PoolClosed)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_gets_a_clear_error_and_makes_pools_of_its_own() -> None:
    """The parent's pools stay in the child for good (their threads are the parent's): a
    child that made a pool of its own and ended by the interpreter's exit (not os._exit) freed
    them there, joining threads it does not have (SIGABRT)."""
    code = """
import os, sys, numpy as np, aiopool
pool = aiopool.make("Counting-v0", num_envs=2)
pool.async_reset()
pool.recv_blocking(timeout=5)
lake = aiopool.make("FrozenLake-v1", num_envs=1)  # another native module (nanobind domain)
pid = os.fork()
if pid == 0:
    try:
        pool.send(np.zeros(2, dtype=np.int64))
        os._exit(4)
    except aiopool.PoolClosed as e:
        if "fork" not in str(e):
            os._exit(3)
    own = aiopool.make("CartPole-v1", num_envs=1)
    own.async_reset()
    own.recv_blocking(timeout=5)
    own.close()
    sys.exit(0)
_, status = os.waitpid(pid, 0)
pool.send(np.zeros(2, dtype=np.int64))
assert len(pool.recv_blocking(timeout=5)) == 2
sys.exit(os.waitstatus_to_exitcode(status))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "leaked" not in r.stderr and "terminate" not in r.stderr, r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_children_can_drop_inherited_batches() -> None:
    # While batches are hoarded the workers allocate blocks under the store's mutex; a fork
    # can copy that mutex locked. A child dropping inherited batches must not wait on it.
    code = """
import os, time, aiopool
n = 1024
pool = aiopool.make("Counting-v0", num_envs=n, batch_size=1, num_threads=2)
pool.async_reset()
kept = [pool.recv_blocking(timeout=5) for _ in range(n)]  # a replay buffer: no block reused
hung = 0
for trial in range(20):
    pool.send([0] * n)  # the workers now allocate a fresh block per row, under the mutex
    time.sleep(0.0001 * (trial % 5))
    pid = os.fork()
    if pid == 0:
        kept.clear()  # every inherited batch goes back to its store
        os._exit(0)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0]:
            break
        time.sleep(0.002)
    else:
        hung += 1
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    kept += [pool.recv_blocking(timeout=5) for _ in range(n)]
print("hung", hung)
raise SystemExit(hung)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_interpreter_exit_with_a_daemon_thread_in_recv_blocking() -> None:
    code = """
import threading, numpy as np, aiopool
pool = aiopool.make("Counting-v0", num_envs=2, step_ns=300_000_000)
pool.async_reset()
pool.recv_blocking(timeout=5)
pool.send(np.zeros(2, dtype=np.int64))
def wait():
    try:
        pool.recv_blocking()
    except aiopool.PoolClosed:
        pass
threading.Thread(target=wait, daemon=True).start()
print("exiting")
"""
    for _ in range(3):
        r = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "terminate" not in r.stderr
