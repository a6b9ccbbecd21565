"""Several consumers on one pool get disjoint batches; each is delivered exactly once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from helpers import Ledger, counting, needs_local_doorbell

import aiopool
from aiopool._holders import ROWS

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.mark.asyncio
@pytest.mark.parametrize("consumers", [2, 4])
async def test_consumers_share_the_stream_exactly_once(consumers: int) -> None:
    with counting(num_envs=32, batch_size=4, jitter_ns=20_000) as pool:
        ledger = Ledger(32)
        pool.async_reset()
        seen: list[int] = []

        async def consume() -> None:
            while ledger.rows < 4000:
                batch = await pool.recv(timeout=5)
                ledger.record(batch)
                seen.append(id(batch))
                await asyncio.sleep(0)
                batch.send(np.ones(len(batch), dtype=np.int64))

        await asyncio.wait_for(asyncio.gather(*(consume() for _ in range(consumers))), 60)
        assert ledger.rows >= 4000


@pytest.mark.asyncio
async def test_waiters_are_served_in_fifo_order() -> None:
    with counting(num_envs=4, batch_size=1, step_ns=20_000_000, recv_spin_us=0) as pool:
        pool.async_reset()
        for _ in range(4):
            (await pool.recv(timeout=5)).send([0])  # steps take 20 ms: every waiter parks
        order: list[int] = []

        async def wait(i: int) -> None:
            await pool.recv(timeout=5)
            order.append(i)

        tasks = [asyncio.create_task(wait(i)) for i in range(4)]
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3]


# -- more consumers than batches: a receiver waits while a batch can still come -------------


@pytest.mark.asyncio
@pytest.mark.parametrize(("consumers", "num_envs", "batch_size"),
                         [(2, 64, 32), (3, 64, 32), (8, 64, 32), (16, 64, 32), (4, 4, 2)])
async def test_more_consumers_than_batches_wait_their_turn(consumers: int, num_envs: int,
                                                           batch_size: int) -> None:
    """The README's actor loop: every actor shares one DynamicBatcher policy. With more
    actors than batches, the extra ones wait for the batches the others send back."""
    from aiopool.inference import DynamicBatcher

    async def forward(obs: np.ndarray) -> np.ndarray:
        await asyncio.sleep(0)
        return np.ones(len(obs), dtype=np.int64)

    policy = DynamicBatcher(forward)
    ledger = Ledger(num_envs)
    served: list[int] = []
    with counting(num_envs=num_envs, batch_size=batch_size) as pool:

        async def actor(i: int) -> None:
            async for batch in pool.stream():
                ledger.record(batch)
                served.append(i)
                batch.send(await policy(batch.obs))
                if ledger.rows >= 40 * num_envs:
                    return

        await asyncio.wait_for(asyncio.gather(*(actor(i) for i in range(consumers))), 60)
    assert ledger.rows >= 40 * num_envs
    assert len(set(served)) == consumers, "every actor got batches"


async def _holding(pool: Any, held: list[Any], release: asyncio.Event, how: str) -> None:
    """Take one batch and hold it, unsent, until ``release``; then let it go ``how``."""
    batch = await pool.recv(timeout=5)
    held.append(batch)
    await release.wait()
    held.remove(batch)
    if how == "release":
        batch.release()
    elif how == "raise":
        raise RuntimeError("the holder failed")
    # "drop": the last reference goes with this frame


async def _receive_once(pool: Any, via: str) -> Any:
    """One batch by ``recv()``, or as the first of an ``async for ... in pool.stream()``."""
    if via == "recv":
        return await pool.recv()
    async for batch in pool.stream():
        return batch
    raise AssertionError("the stream ended")


@pytest.mark.asyncio
@pytest.mark.parametrize("via", ["recv", "stream"])
@pytest.mark.parametrize("how", ["drop", "release", "raise"])
async def test_parked_receiver_waits_for_held_batches_then_fails_when_none_can_come(
        how: str, via: str) -> None:
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        held: list[Any] = []
        go = [asyncio.Event(), asyncio.Event()]
        holders = [asyncio.create_task(_holding(pool, held, go[k], how)) for k in range(2)]
        while len(held) < 2:
            await asyncio.sleep(0.01)
        waiter = asyncio.create_task(_receive_once(pool, via))
        await asyncio.sleep(0.2)
        assert not waiter.done(), "two other tasks hold batches they may still send"
        go[0].set()
        await asyncio.gather(holders[0], return_exceptions=True)
        await asyncio.sleep(0.2)
        assert not waiter.done(), "the second holder may still send"
        go[1].set()
        await asyncio.gather(holders[1], return_exceptions=True)
        with pytest.raises(aiopool.NothingInFlight):
            await asyncio.wait_for(waiter, 2)  # promptly, once no batch can come


@pytest.mark.asyncio
async def test_a_parked_receiver_gets_the_batch_another_task_sends_back() -> None:
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        first = await pool.recv(timeout=5)
        second = await pool.recv(timeout=5)
        other = asyncio.create_task(pool.recv(timeout=5))  # this task holds both batches
        await asyncio.sleep(0.1)
        assert not other.done()
        first.send(np.ones(2, dtype=np.int64))
        got = await asyncio.wait_for(other, 5)
        assert sorted(got.env_id.tolist()) == sorted(first.env_id.tolist())
        del second


@pytest.mark.asyncio
async def test_a_receiver_holding_every_unsent_batch_fails_at_once() -> None:
    """Its own batches cannot come back while it waits: NothingInFlight at once, as before."""
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        kept = [await pool.recv(timeout=5), await pool.recv(timeout=5)]
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=2)  # not wait_for: on 3.11 it receives in a task of its own
        kept[0].send(np.ones(2, dtype=np.int64))  # the pool is as it was
        assert len(await pool.recv(timeout=5)) == 2


@pytest.mark.asyncio
async def test_a_holder_parked_in_a_receive_of_its_own_does_not_count() -> None:
    """Task A holds one batch and waits; task B holds the other and waits too: neither can
    send while it waits, so B fails at once, and A goes on waiting while B may still send."""
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        a_has_one, b_has_one = asyncio.Event(), asyncio.Event()

        async def task_a() -> Any:
            mine = await pool.recv(timeout=5)
            a_has_one.set()
            await b_has_one.wait()
            return mine, await pool.recv(timeout=5)

        async def task_b() -> Any:
            await a_has_one.wait()
            mine = await pool.recv(timeout=5)
            b_has_one.set()
            await asyncio.sleep(0.1)  # A is parked by now
            try:
                await pool.recv(timeout=2)
            except aiopool.NothingInFlight:
                return mine
            raise AssertionError("B waited though every batch was held by parked tasks")

        a_waits = asyncio.create_task(task_a())
        b_batch = await asyncio.wait_for(asyncio.create_task(task_b()), 5)
        await asyncio.sleep(0.1)
        assert not a_waits.done(), "B holds a batch it may still send"
        b_batch.send(np.ones(2, dtype=np.int64))
        _, a_second = await asyncio.wait_for(a_waits, 5)
        assert sorted(a_second.env_id.tolist()) == sorted(b_batch.env_id.tolist())


@pytest.mark.asyncio
async def test_a_batch_returned_by_a_finished_task_counts_until_dropped() -> None:
    """A task that received a batch and returned it hands it on (gather, wait_for on 3.11):
    it still counts, and stops counting once the last reference goes (the task's too)."""
    with counting(num_envs=2, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        got: Any = await asyncio.create_task(pool.recv(timeout=5))
        waiter = asyncio.create_task(pool.recv())
        await asyncio.sleep(0.2)
        assert not waiter.done(), "the batch the finished task returned may still be sent"
        del got
        with pytest.raises(aiopool.NothingInFlight):
            await asyncio.wait_for(waiter, 2)


@pytest.mark.asyncio
async def test_a_batch_given_back_by_a_cancelled_receiver_can_be_dropped_by_the_next() -> None:
    """The cancelled task keeps its CancelledError, whose traceback keeps what it was handed:
    the batch goes on in a new object, so the receiver that drops it really drops it."""
    # Steps far longer than recv's spin, so `a` parks (resets take no time: a receive of the
    # resets' batch returned it, and nothing was given back).
    with counting(num_envs=2, batch_size=2, num_threads=1, step_ns=5_000_000) as pool:
        pool.async_reset()
        (await pool.recv()).send(np.zeros(2, dtype=np.int64))
        a = asyncio.ensure_future(pool.recv())
        await asyncio.sleep(0)
        assert not a.done()
        time.sleep(0.05)
        assert pool.try_recv() is None  # serves the parked receiver first
        a.cancel()
        await asyncio.wait([a])  # `a` (and its traceback) stays alive

        async def consumer() -> None:
            batch = await pool.recv(timeout=5)
            del batch

        await asyncio.create_task(consumer())
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=2)
        assert a.cancelled()


@pytest.mark.asyncio
@pytest.mark.parametrize("ids", ["the batch's env_id", "reordered", "every env", "part"])
async def test_pool_send_to_a_batchs_envs_stops_it_counting_as_held(ids: str) -> None:
    """``pool.send(actions, env_ids)`` is ``batch.send`` for the batches whose envs it covers,
    whichever path counts them: a send to every env (as the sync adapters make each step) and
    a send to a batch's own env_id skip the per-batch search, which cost the adapters ~13 µs a
    step (its speed: the adapter overhead rows of benchmarks/throughput.py)."""
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        first, second = await pool.recv(timeout=5), await pool.recv(timeout=5)
        if ids == "every env":
            pool.send(np.ones(4, dtype=np.int64), [3, 2, 1, 0])
        else:
            env_id = {"the batch's env_id": first.env_id, "reordered": first.env_id[::-1],
                      "part": first.env_id[:1]}[ids]
            pool.send(np.ones(len(env_id), dtype=np.int64), env_id)
            second.send(np.ones(2, dtype=np.int64))
        assert [h[ROWS] for h in pool._holders._held.values()] == ([1] if ids == "part" else [])


# -- holds are counted per batch and per env: the same rule for every way a row is sent --------


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["batch.send", "pool.send", "released, then batch.send"])
async def test_a_batchs_send_after_its_envs_were_sent_ends_the_newer_batchs_hold(
        how: str) -> None:
    """Task T holds A = [0, 1]; this task sends envs 0 and 1 (A's hold ends), and task U
    receives their next rows, B = [0, 1]. Sending A's actions now (a second send to envs 0
    and 1) is B's send, whichever way: ``batch.send`` ended nothing (it only ended A's own
    count, gone already), so the receive after it waited for B's rows, which can never come,
    instead of raising NothingInFlight; so did ``batch.send`` of a released batch."""
    with counting(num_envs=2, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        got: asyncio.Queue[aiopool.Batch] = asyncio.Queue()

        async def keeps() -> None:
            await got.put(await pool.recv(timeout=5))
            await asyncio.Event().wait()

        t = asyncio.create_task(keeps())
        a = await got.get()
        pool.send(np.zeros(2, dtype=np.int64), [0, 1])
        u = asyncio.create_task(keeps())
        b = await got.get()
        if how == "pool.send":
            pool.send(np.zeros(2, dtype=np.int64), a.env_id)
        else:
            if how.startswith("released"):
                a.release()
            a.send(np.zeros(2, dtype=np.int64))
        (await pool.recv(timeout=5)).release()  # the rows that send stepped
        start = time.monotonic()
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=5)
        assert time.monotonic() - start < 2
        del b
        t.cancel()
        u.cancel()
        await asyncio.wait([t, u])


@pytest.mark.asyncio
async def test_a_second_send_to_an_env_ends_the_newer_batchs_hold_not_the_older_ones() -> None:
    """Another task holds [0, 1] and has sent neither. This task sends env 0, receives its next
    row (a flushed short batch) and sends env 0 again: that second send is the newer batch's,
    so env 1's row still counts, and the receive waits for it (it raised NothingInFlight at
    once, the older batch's count being taken twice)."""
    with counting(num_envs=2, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        has_it, send_it = asyncio.Event(), asyncio.Event()

        async def holder() -> None:
            batch = await pool.recv(timeout=5)
            assert sorted(batch.env_id.tolist()) == [0, 1]
            has_it.set()
            await send_it.wait()
            await asyncio.sleep(0.2)  # the receiver below is parked by now
            pool.send(np.ones(1, dtype=np.int64), [1])

        task = asyncio.create_task(holder())
        await asyncio.wait_for(has_it.wait(), 5)
        pool.send(np.ones(1, dtype=np.int64), [0])
        assert pool.flush(timeout=5) == 1
        assert (await pool.recv(timeout=5)).env_id.tolist() == [0]
        pool.send(np.ones(1, dtype=np.int64), [0])
        send_it.set()
        got = await pool.recv(timeout=5)  # waits for env 1's row, which the holder sends
        assert sorted(got.env_id.tolist()) == [0, 1]
        await asyncio.wait_for(task, 5)


@pytest.mark.asyncio
@pytest.mark.parametrize("via", ["batch.send", "pool.send"])
async def test_a_reset_ends_the_hold_of_its_envs_rows_whichever_send_follows(via: str) -> None:
    """A reset is its envs' next action, as a send is: resetting the envs of another task's
    held batch ends that batch's hold. Then ``batch.send`` and ``pool.send(actions,
    batch.env_id)`` end the same hold (the newer batch's), and a receive that nothing can serve
    raises NothingInFlight at once with both (one waited forever, the other did not)."""
    with counting(num_envs=2, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        has_it, done = asyncio.Event(), asyncio.Event()

        async def holder() -> None:
            batch = await pool.recv(timeout=5)
            has_it.set()
            await done.wait()
            del batch

        task = asyncio.create_task(holder())
        await asyncio.wait_for(has_it.wait(), 5)
        pool.async_reset(env_ids=[0, 1])
        batch = await pool.recv(timeout=5)
        if via == "batch.send":
            batch.send(np.ones(2, dtype=np.int64))
        else:
            pool.send(np.ones(2, dtype=np.int64), batch.env_id)
        kept = await pool.recv(timeout=5)
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=2)  # not wait_for: on 3.11 it receives in a task of its own
        assert len(kept) == 2
        done.set()
        await asyncio.wait_for(task, 5)


@pytest.mark.asyncio
async def test_a_receive_that_waits_long_for_held_batches_warns_naming_their_tasks(
        caplog: pytest.LogCaptureFixture) -> None:
    """Waiting is the rule while another task holds a batch it may still send (here: a task
    that gathers two receives while it holds every unsent batch). After
    ``stuck_warning_after`` seconds with no env step in flight, each such receive logs one
    warning that names the holding task, so that a deadlock says where it is."""
    needs_local_doorbell()
    with counting(num_envs=2, batch_size=1, num_threads=1) as pool:
        pool.stuck_warning_after = 0.2
        pool.async_reset()

        async def holds_everything() -> Any:
            kept = [await pool.recv(timeout=5), await pool.recv(timeout=5)]
            waits = asyncio.gather(pool.recv(), pool.recv())  # receives of other tasks
            done, _ = await asyncio.wait([waits], timeout=0.7)
            assert not done, "another task holds batches it may still send: they wait"
            kept[0].send(np.ones(1, dtype=np.int64))
            kept[1].send(np.ones(1, dtype=np.int64))
            return await asyncio.wait_for(waits, 5)

        with caplog.at_level("WARNING", logger="aiopool"):
            got = await asyncio.create_task(holds_everything(), name="the-holder")
        assert sorted(int(b.env_id[0]) for b in got) == [0, 1]
        warnings = [r.getMessage() for r in caplog.records if "waited 0.2 s" in r.getMessage()]
        assert sum(int(w.split()[0]) for w in warnings) == 2, warnings  # each receive once
        assert all("task 'the-holder'" in w and ": 2 rows" in w for w in warnings), warnings


@pytest.mark.asyncio
async def test_a_receive_loop_that_hands_batches_to_a_sender_fails_fast_then_waits_its_turn(
        ) -> None:
    """The batches a receive loop hands on are still its own: its next receive cannot count on
    them (it cannot tell a hand-over from a batch it forgot to send), so it raises
    NothingInFlight at once while none is sent yet, as a lone consumer holding every batch
    does. The loop that waits for the sender first (``queue.join()``) goes on."""
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        sent = 0

        async def sender() -> None:
            nonlocal sent
            while True:
                batch = await queue.get()
                await asyncio.sleep(0.01)  # the policy
                batch.send(np.ones(len(batch), dtype=np.int64))
                sent += 1
                del batch
                queue.task_done()

        for _ in range(2):
            await queue.put(await pool.recv(timeout=5))
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=2)  # nothing sent yet: it cannot know a sender exists
        task = asyncio.create_task(sender())
        for _ in range(20):
            try:
                batch = await pool.recv(timeout=5)
            except aiopool.NothingInFlight:
                await asyncio.wait_for(queue.join(), 5)  # the sender sends what it was given
                continue
            await queue.put(batch)
            del batch
        await asyncio.wait_for(queue.join(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert sent >= 10
