"""The policy contract and DynamicBatcher: many coroutines, one forward per loop tick.

A policy is ``async def __call__(obs) -> actions`` (optionally ``async def aclose()``):

- ``obs`` is ``[B, *obs_shape]`` and valid only until the call returns (a batch's block may be
  reused after ``batch.send``), so a policy copies what it keeps;
- the result is ``[B, *action_shape]`` in the action space's dtype;
- many coroutines call it concurrently; a cancelled caller never breaks the others; an
  exception reaches exactly the callers it concerns (every caller of a failed forward).

``DynamicBatcher`` coalesces the calls that arrive in one turn of the event loop into one
forward: the flush is scheduled with ``loop.call_soon``, so it runs after every coroutine woken
in the same iteration (all consumers woken by one eventfd read, or by the previous forward's
results) has called. No timers: asyncio rounds sub-millisecond waits up to 1 ms. While a forward
runs, new calls queue and go together in the next one ("natural batching"). Forwards of a sync
backend run in an executor thread, so the loop stays free to step envs.

When the forward is the bottleneck (calls queued behind the one that just finished), the next
forward waits briefly for the callers just served to call again, up to half a forward's duration:
without that wait, two groups of callers that fell out of phase (a pool's two batches reaching
eight consumers in different loop turns) alternate through half-full forwards for good; with it,
they merge again into one forward. The wait polls the loop with ``call_soon`` (no timer) and
ends as soon as the rows are there. It adapts as the pool's receive spin does: after
``_DELAY_GIVE_UP`` waits in a row ran out before the rows came (the callers' envs step slower
than a forward), forwards stop waiting but for a probe every ``_DELAY_PROBE_EVERY``-th time; a
wait that gets its rows turns waiting back on.

Example:
    >>> policy = DynamicBatcher(torch_policy(model))
    >>> async def actor(pool):
    ...     async for batch in pool.stream():
    ...         batch.send(await policy(batch.obs))
    >>> await asyncio.gather(*(actor(pool) for _ in range(8)))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..errors import PolicyClosed

_MAX_DELAY_NS = 1_000_000  # the adaptive wait for the previous forward's callers, at most
_DELAY_GIVE_UP = 8
_DELAY_PROBE_EVERY = 64

Array = npt.NDArray[Any]
SyncBackend = Callable[[Array], Any]
AsyncBackend = Callable[[Array], Awaitable[Any]]

__all__ = ["BatcherStats", "DynamicBatcher", "Policy", "from_callable"]


@runtime_checkable
class Policy(Protocol):
    """``await policy(obs)`` -> actions; see the module docstring for the contract."""

    async def __call__(self, obs: Array, /) -> Array: ...


@dataclass(frozen=True)
class BatcherStats:
    """Requests served, forwards run, rows forwarded, and rows per forward on average;
    ``delayed``: forwards that waited for the callers of the previous one (``max_delay_us``)."""

    requests: int
    forwards: int
    rows: int
    delayed: int = 0

    @property
    def rows_per_forward(self) -> float:
        return self.rows / self.forwards if self.forwards else 0.0


@dataclass
class _Call:
    obs: Array
    future: asyncio.Future[Array]


class DynamicBatcher:
    """Coalesces concurrent ``await batcher(obs)`` calls into forwards of ``backend``.

    Args:
        backend: a sync callable ``obs -> actions`` (run in an executor thread), or an async
            policy (awaited on the loop, e.g. a ``KServePolicy``).
        max_batch_rows: rows per forward at most; more waiting rows go in the next forward (a
            single call with more rows is forwarded alone).
        max_inflight: forwards running at once.
        max_delay_us: how long a forward may wait for the rows of the callers the previous
            forward served, when calls queued behind that forward (default ``None``: half the
            average forward's duration, at most 1 ms; ``0``: never wait).
        executor: the executor for a sync backend (default: one of ``max_inflight`` threads,
            shut down by ``aclose``).
    """

    def __init__(self, backend: SyncBackend | AsyncBackend | Policy, *,
                 max_batch_rows: int = 1024, max_inflight: int = 1,
                 executor: concurrent.futures.Executor | None = None,
                 max_delay_us: float | None = None) -> None:
        if max_batch_rows < 1 or max_inflight < 1:
            raise ValueError(f"max_batch_rows ({max_batch_rows}) and max_inflight "
                             f"({max_inflight}) must be >= 1")
        if max_delay_us is not None and not max_delay_us >= 0:
            raise ValueError(f"max_delay_us ({max_delay_us}) must be >= 0 or None")
        self._backend = backend
        self._is_async = _is_async(backend)
        self.max_batch_rows = max_batch_rows
        self.max_inflight = max_inflight
        self._executor = executor
        self._own_executor = executor is None
        self._pending: deque[_Call] = deque()
        self._inflight = 0
        self._tick: asyncio.Handle | None = None
        self._closed = False
        self._requests = self._forwards = self._rows = self._delayed = 0
        self._max_delay_ns = None if max_delay_us is None else int(max_delay_us * 1000)
        self._forward_ns = 0.0  # moving average of a forward's duration, flush to done
        self._expect_rows = 0  # rows the next forward waits for (0: it does not wait) ...
        self._expect_until = 0  # ... until this perf_counter_ns
        self._delay_misses = 0  # consecutive waits that ran out (or were skipped)

    @property
    def stats(self) -> BatcherStats:
        return BatcherStats(self._requests, self._forwards, self._rows, self._delayed)

    async def __call__(self, obs: npt.ArrayLike, /) -> Array:
        """The actions for ``obs`` (``[B, *obs_shape]``), computed in a shared forward.

        Raises:
            PolicyClosed: the batcher was closed (before or while this call waited).
            Exception: whatever the backend raised for the forward this call was in.

        Cancellation: a call cancelled before its forward starts is dropped from it; one
        cancelled during its forward leaves the others' results intact.
        """
        if self._closed:
            raise PolicyClosed("this DynamicBatcher is closed")
        loop = asyncio.get_running_loop()
        call = _Call(np.asarray(obs), loop.create_future())
        if call.obs.ndim == 0:
            raise ValueError("obs is a scalar, expected [B, *obs_shape] (one row per env)")
        self._pending.append(call)
        self._requests += 1
        self._schedule(loop)
        return await call.future

    async def aclose(self) -> None:
        """Fail the calls still waiting for a forward with PolicyClosed, wait for the forwards
        running, shut down the executor it made, then close the backend (its ``async
        aclose()``, where it has one: a ``KServePolicy`` the batcher wraps is closed with it).
        Later calls raise PolicyClosed.

        Cancellation: the waiting calls are failed at once; the wait for running forwards is
        cancelled with the caller (they finish in their threads).
        """
        self._closed = True
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        while self._pending:
            call = self._pending.popleft()
            if not call.future.done():
                call.future.set_exception(PolicyClosed(
                    "the DynamicBatcher was closed while this call waited for a forward"))
        while self._inflight:
            await asyncio.sleep(0.001)
        if self._own_executor and self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
        closer = getattr(self._backend, "aclose", None)
        if closer is not None and inspect.iscoroutinefunction(closer):
            await closer()

    async def __aenter__(self) -> DynamicBatcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- internals ------------------------------------------------------------------------

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._inflight >= self.max_inflight or not self._pending:
            return
        if sum(len(c.obs) for c in self._pending) >= self.max_batch_rows:
            self._flush(loop)
        elif self._tick is None:
            self._tick = loop.call_soon(self._on_tick, loop)

    def _on_tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._tick = None
        if self._inflight >= self.max_inflight:
            return
        if self._expect_rows:
            if sum(len(c.obs) for c in self._pending) >= self._expect_rows:
                self._delay_misses = 0  # the callers came in time: waiting pays
            elif time.perf_counter_ns() < self._expect_until:
                self._tick = loop.call_soon(self._on_tick, loop)  # poll: no timer is that fine
                return
            self._expect_rows = 0
        self._flush(loop)

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        calls: list[_Call] = []
        rows = 0
        while self._pending:
            call = self._pending[0]
            if call.future.done():  # cancelled before its forward: dropped
                self._pending.popleft()
                continue
            if calls and rows + len(call.obs) > self.max_batch_rows:
                break
            calls.append(self._pending.popleft())
            rows += len(call.obs)
        if not calls:
            return
        # A copy: a caller cancelled during the forward may reuse its obs at once.
        try:
            obs = np.concatenate([c.obs for c in calls]) if len(calls) > 1 else calls[0].obs.copy()
        except ValueError:  # rows of different shapes: no forward; each of these callers is told
            shapes = sorted({c.obs.shape[1:] for c in calls})
            for c in calls:
                if not c.future.done():
                    c.future.set_exception(ValueError(
                        f"observations with rows of shapes {shapes} came in one batch: every "
                        "call to a batcher must pass rows of one shape ([B, *obs_shape])"))
            if self._pending:
                self._schedule(loop)
            return
        self._inflight += 1
        self._forwards += 1
        self._rows += rows
        started = time.perf_counter_ns()
        if self._is_async:
            task = loop.create_task(self._backend(obs))  # type: ignore[arg-type]
            task.add_done_callback(lambda f: self._done(loop, f, calls, rows, started))
        else:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    self.max_inflight, thread_name_prefix="aiopool-forward")
            fut = loop.run_in_executor(self._executor, self._backend, obs)
            fut.add_done_callback(lambda f: self._done(loop, f, calls, rows, started))
        if self._pending:  # more than one forward's worth waiting, or room for another
            self._schedule(loop)

    def _done(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any],
              calls: list[_Call], rows: int, started: int) -> None:
        self._inflight -= 1
        now = time.perf_counter_ns()
        took = now - started
        self._forward_ns = took if not self._forward_ns else 0.8 * self._forward_ns + 0.2 * took
        self._expect_callers(rows, now)
        error: BaseException | None = None
        out: Array | None = None
        if fut.cancelled():
            error = asyncio.CancelledError("the forward was cancelled")
        elif fut.exception() is not None:
            error = fut.exception()
        else:
            out = np.asarray(fut.result())
            if out.ndim == 0 or len(out) != rows:
                error = ValueError(f"the policy returned {out.shape} for {rows} rows, "
                                   "expected one action per row ([B, *action_shape])")
        start = 0
        for call in calls:
            n = len(call.obs)
            if not call.future.done():
                if error is not None:
                    call.future.set_exception(error)
                else:
                    assert out is not None
                    call.future.set_result(out[start:start + n])
            start += n
        if not self._closed:
            self._schedule(loop)

    def _expect_callers(self, served: int, now: int) -> None:
        """After a forward of ``served`` rows: if calls queued behind it (the forward is the
        bottleneck), let the next forward wait for those callers' rows too, briefly."""
        waiting = sum(len(c.obs) for c in self._pending if not c.future.done())
        delay = (min(self._forward_ns / 2, _MAX_DELAY_NS) if self._max_delay_ns is None
                 else self._max_delay_ns)
        self._expect_rows = 0
        if not waiting or delay <= 0 or self._closed or waiting >= self.max_batch_rows:
            return
        self._delay_misses += 1
        if (self._delay_misses > _DELAY_GIVE_UP
                and self._delay_misses % _DELAY_PROBE_EVERY != 0):
            return
        self._expect_rows = min(waiting + served, self.max_batch_rows)
        self._expect_until = now + int(delay)
        self._delayed += 1


def _is_async(backend: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one (a Policy)."""
    if inspect.iscoroutinefunction(backend):
        return True
    call = next((k.__dict__["__call__"] for k in type(backend).__mro__ if "__call__" in k.__dict__),
                None)
    return inspect.iscoroutinefunction(call)


class _FromCallable:
    def __init__(self, fn: SyncBackend, offload: bool,
                 executor: concurrent.futures.Executor | None) -> None:
        self._fn, self._offload, self._executor = fn, offload, executor

    async def __call__(self, obs: Array, /) -> Array:
        if not self._offload:
            return np.asarray(self._fn(obs))
        loop = asyncio.get_running_loop()
        return np.asarray(await loop.run_in_executor(self._executor, self._fn, np.array(obs)))


def from_callable(fn: SyncBackend, *, offload: bool = True,
                  executor: concurrent.futures.Executor | None = None) -> Policy:
    """A policy from a sync ``fn(obs) -> actions``: one executor call per request
    (``offload=False``: called inline, for functions cheaper than a thread hop, ~55 µs here).
    Wrap it in ``DynamicBatcher`` to coalesce concurrent calls instead."""
    return _FromCallable(fn, offload, executor)
