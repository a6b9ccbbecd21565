"""recv(timeout=) raises TimeoutError; recv() that could never complete raises at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np
import pytest
from helpers import counting, num_waiting

import aiopool

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.mark.asyncio
async def test_recv_timeout_raises_and_the_batch_still_arrives() -> None:
    # Steps far longer than the timeout, so that a loaded machine's scheduling delays (tens
    # of ms) cannot make the timeout look late or let the batch arrive first.
    with counting(num_envs=2, batch_size=2, step_ns=500_000_000) as pool:
        pool.async_reset()
        await pool.recv()
        pool.send(np.zeros(2, dtype=np.int64))
        start = time.monotonic()
        with pytest.raises(TimeoutError, match=r"no batch arrived within 0\.02 s"):
            await pool.recv(timeout=0.02)
        assert time.monotonic() - start < 0.4  # the timeout, not the step, ended the wait
        batch = await pool.recv(timeout=5)
        assert sorted(batch.env_id.tolist()) == [0, 1]


@pytest.mark.asyncio
async def test_recv_with_nothing_in_flight_raises_at_once() -> None:
    with counting(num_envs=4, batch_size=4) as pool:
        with pytest.raises(aiopool.NothingInFlight, match="0 env steps are in flight"):
            await pool.recv()
        pool.async_reset(env_ids=[0, 1])
        with pytest.raises(aiopool.NothingInFlight, match="at least 2 more envs"):
            await asyncio.wait_for(pool.recv(), 1)
        pool.async_reset(env_ids=[2, 3])
        assert len(await pool.recv(timeout=5)) == 4
        with pytest.raises(aiopool.NothingInFlight):
            pool.recv_blocking()


@pytest.mark.asyncio
@pytest.mark.parametrize("first_does", ["send", "drop"])
async def test_a_second_receiver_waits_while_the_first_may_send_its_batch_back(
        first_does: str) -> None:
    """One batch in flight, two receivers: the second waits (a channel's rule: the first may
    send its batch back), and gets NothingInFlight once the first drops it unsent."""
    with counting(num_envs=2, batch_size=2, step_ns=50_000_000) as pool:
        pool.async_reset()
        await pool.recv()
        pool.send(np.zeros(2, dtype=np.int64))

        async def first() -> int:
            batch = await pool.recv()
            if first_does == "send":
                batch.send(np.ones(2, dtype=np.int64))
            return len(batch)

        task = asyncio.create_task(first())
        while num_waiting(pool) == 0:
            await asyncio.sleep(0)
        if first_does == "send":
            assert len(await pool.recv(timeout=5)) == 2
        else:
            with pytest.raises(aiopool.NothingInFlight, match="would wait forever"):
                await pool.recv(timeout=5)
        assert await task == 2


def test_recv_blocking_timeout() -> None:
    with counting(num_envs=2, batch_size=2, step_ns=100_000_000) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=5)
        pool.send(np.zeros(2, dtype=np.int64))
        with pytest.raises(TimeoutError):
            pool.recv_blocking(timeout=0.01)
        assert len(pool.recv_blocking(timeout=5)) == 2


@pytest.mark.asyncio
async def test_infinite_timeout_means_none() -> None:
    with counting(num_envs=2, batch_size=2) as pool:
        pool.async_reset()
        assert len(await pool.recv(timeout=float("inf"))) == 2
        pool.send(np.zeros(2, dtype=np.int64))
        assert len(pool.recv_blocking(timeout=float("inf"))) == 2
        pool.send(np.zeros(2, dtype=np.int64))
        assert len(pool.recv_blocking(timeout=1e12)) == 2  # beyond the clock's nanosecond range
        pool.send(np.zeros(2, dtype=np.int64))
        with pytest.raises(ValueError, match="nan"):
            await pool.recv(timeout=float("nan"))
        assert len(await pool.recv(timeout=5)) == 2


def test_recv_stops_spinning_when_batches_take_longer_than_the_spin() -> None:
    """Batches of 2 ms against a 0.2 ms spin: after a few spins that catch nothing, recv_blocking
    stops busy-polling (sleeping on the eventfd instead) and only probes now and then; a probe
    that catches a batch turns spinning back on."""
    with aiopool.make("Counting-v0", num_envs=1, num_threads=1, step_ns=2_000_000,
                      recv_spin_us=200) as pool:
        caught: list[bool] = []  # one entry per spinning wait: did its spin catch a batch?
        take_held = pool._take_held

        def recording_take(holder: object, spin_ns: int = 0) -> aiopool.Batch | None:
            batch = take_held(holder, spin_ns)
            if spin_ns > 0:
                caught.append(batch is not None)
            return batch

        pool._take_held = recording_take
        pool.async_reset()
        pool.recv_blocking()
        for _ in range(200):
            pool.send(np.zeros(1, dtype=np.int64))
            pool.recv_blocking()
        # A spin can still catch a batch when the machine is loaded (this thread descheduled for
        # the rest of the 2 ms); each catch buys up to 8 more spins. Anything beyond that bound
        # would mean recv never stopped spinning.
        catches = sum(caught)
        assert len(caught) >= 8, caught
        assert len(caught) <= 8 * (1 + catches) + 200 // 64 + 1, caught
        assert len(caught) < 100, f"{len(caught)} of 200 waits spun"


    # Batches of 50 µs against a 50 ms spin, with spinning given up: the next probe catches a
    # batch and every later wait spins again. (A 5 ms spin missed every probe in 1 of 6 runs
    # with two busy processes beside it: a worker process waited longer than that for a core.)
    # A wait whose batch is already there when recv_blocking looks takes it without spinning,
    # and on a loaded machine most do, so the loop runs until a probe has come round (every
    # _SPIN_PROBE_EVERY spinning waits), not for a fixed number of receives.
    with aiopool.make("Counting-v0", num_envs=1, num_threads=1, step_ns=50_000,
                      recv_spin_us=50_000) as pool:
        pool.async_reset()
        pool.recv_blocking()
        pool._spin_misses = 1000
        for _ in range(20_000):
            pool.send(np.zeros(1, dtype=np.int64))
            pool.recv_blocking()
            if pool._spin_misses < 1000:
                break
        assert pool._spin_misses < 1000, "no probe caught a batch"
        for _ in range(100):
            pool.send(np.zeros(1, dtype=np.int64))
            pool.recv_blocking()
        assert pool._spin_misses <= 1, pool._spin_misses


def test_workers_stop_spinning_when_the_consumer_is_slower_than_their_spin() -> None:
    """A consumer that takes 2 ms per batch against a 1 ms worker spin: after a few spins that
    catch nothing, the worker sleeps at once (probing now and then) instead of burning 1 ms of
    CPU per batch, which on a loaded machine is CPU taken from the consumer."""
    import resource

    def others_cpu(loop: Callable[[], None]) -> float:
        """CPU time this process's other threads use while this one runs ``loop``."""
        cpu0, mine0 = resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
        loop()
        cpu1, mine1 = resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
        process = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
        return process - (mine1 - mine0)

    # First the level of the threads that are not the pool's (in a whole-suite run, those of
    # other tests: Ray's driver, render threads), over the same 200 policy steps.
    def idle_loop() -> None:
        for _ in range(200):
            time.sleep(0.002)

    background = others_cpu(idle_loop)
    with aiopool.make("Counting-v0", num_envs=1, num_threads=1, worker_spin_us=1000,
                      recv_spin_us=0) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=5)

        def policy_loop() -> None:
            for _ in range(200):
                time.sleep(0.002)  # the policy: slower than the worker's spin
                pool.send(np.zeros(1, dtype=np.int64))
                pool.recv_blocking(timeout=5)

        workers = others_cpu(policy_loop) - background
    # Spinning every wait would burn ~200 ms; 8 give-up spins and a probe every 64 waits,
    # ~12 ms. The bound leaves room for scheduling noise and the waits' own syscalls.
    assert workers < 0.08, (f"the worker burned {workers * 1e3:.0f} ms of CPU in 200 waits "
                            f"(beyond the other threads' {background * 1e3:.0f} ms)")
