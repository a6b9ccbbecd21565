"""The asyncio side of the wait ladder: one reader per (pool, loop) and a FIFO of waiters.

A coroutine that found no batch on the fast path and the bounded spin (see ``Pool.recv``)
parks a future here. The pool's eventfd is registered once with the running loop; the native
side rings it only while "armed". The callback drains the fd once, then hands batches to
waiting futures in FIFO order until either runs out; it must tolerate finding nothing (a fast
path may have taken the batch first). While futures still wait it re-arms and re-checks, so a
batch published between the check and the arm is never missed.

Each waiter parks with its holder (its task): a batch is handed out to that holder the moment
it is set on the future (``hand_out``), so a batch on its way to a waiter still counts as one
that may be sent back. A fault that ``take`` raises (an env error, a dead worker of a
process-backed pool) is handed to the first waiter the same way, and then ``stranded`` checks
whether the waiters left can still be served.

Loop changes: the reader is registered on the loop of the first wait; a wait from another loop
moves it (the old loop's futures are dropped: their loop is gone or no longer waits here).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .batch import Batch
from .errors import NothingInFlight, PoolClosed

Item = Batch | BaseException  # what a waiter gets, and what goes back to the queue


class Doorbell:
    """Waiting futures of one pool, and its eventfd reader on one loop at a time."""

    def __init__(self, native: Any, take: Callable[[], Batch | None],
                 push_back: Callable[[Item], None],
                 hand_out: Callable[[Batch, object], None],
                 give_back: Callable[[Batch], None],
                 stranded: Callable[[], None]) -> None:
        self._native = native
        self._fd: int = native.fileno()
        self._take = take
        self._push_back = push_back
        self._hand_out = hand_out
        self._un_hand_out = give_back
        self._stranded = stranded
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: deque[tuple[asyncio.Future[Batch], object]] = deque()
        # The same deque, for a pool's receive: while it is empty nobody is parked and
        # serve() has nothing to do (a Python call a batch saved).
        self.queue = self._waiters

    @property
    def num_waiting(self) -> int:
        return sum(1 for f, _ in self._waiters if not f.done())

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def parked(self) -> set[object]:
        """The holders whose receives are parked here (their futures not yet set)."""
        return {holder for f, holder in self._waiters if not f.done()}

    async def wait(self, holder: object) -> Batch:
        """Wait for the next batch in FIFO order with other waiters of this pool.

        Cancellation: a batch (or a fault with its batch) already handed to this waiter goes
        back to the front of the pool's queue, so nothing is lost.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._move_to(loop)
        fut: asyncio.Future[Batch] = loop.create_future()
        self._waiters.append((fut, holder))
        self._native.arm()
        self._dispatch()
        try:
            return await fut
        except BaseException as raised:
            if fut.done() and not fut.cancelled():
                exc = fut.exception()
                if exc is None:
                    self.give_back(fut.result())
                elif exc is not raised and not isinstance(exc, NothingInFlight | PoolClosed):
                    self.give_back(exc)  # an env's error or a death: delivered later, not lost
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((fut, holder))
            # The exception's traceback keeps this frame: it must not keep the future, and
            # through it the exception and its batch (a cycle only the gc frees; the batch
            # would count as held, and receivers parked for it would wait, until then).
            del fut
            exc = None
            raise

    def serve(self) -> int:
        """Hand ready batches to parked waiters (FIFO) before anyone else may take one;
        returns how many still wait. ~50 ns when nobody waits."""
        if not self._waiters:
            return 0
        self._dispatch()
        return self.num_waiting

    def give_back(self, item: Item) -> None:
        """Put a batch (or a fault) a cancelled receiver already held back at the front of the
        queue, and hand it to the next waiter at once (the eventfd only rings for native
        blocks)."""
        if isinstance(item, Batch):
            self._un_hand_out(item)
            item = item._moved()
        elif isinstance(getattr(item, "batch", None), Batch):  # an env's error and its batch
            self._un_hand_out(item.batch)  # type: ignore[attr-defined]
            item.batch = item.batch._moved()  # type: ignore[attr-defined]
        self._push_back(item)
        self._dispatch()

    def fail_parked(self, exc: Callable[[], BaseException]) -> None:
        """Fail every parked waiter with a fresh ``exc()`` (no batch can come for them)."""
        while self._waiters:
            fut, _ = self._waiters.popleft()
            if not fut.done() and not fut.get_loop().is_closed():
                fut.set_exception(exc())

    def _move_to(self, loop: asyncio.AbstractEventLoop) -> None:
        self.detach()
        loop.add_reader(self._fd, _on_readable, weakref.ref(self))
        self._loop = loop

    def _dispatch(self) -> None:
        self._native.drain()
        waiters = self._waiters
        faulted = False
        while waiters:
            while waiters and waiters[0][0].done():
                waiters.popleft()
            if not waiters:
                break
            try:
                batch = self._take()
                if batch is None:
                    self._native.arm()
                    batch = self._take()  # re-check after arming: the Dekker half on our side
            except Exception as e:  # an env or worker fault of a process-backed pool
                fut, holder = waiters.popleft()
                if isinstance(getattr(e, "batch", None), Batch):
                    self._hand_out(e.batch, holder)  # type: ignore[attr-defined]
                fut.set_exception(e)
                faulted = True
                continue
            if batch is None:
                break
            fut, holder = waiters.popleft()
            self._hand_out(batch, holder)
            fut.set_result(batch)
        if faulted:
            # The fault's traceback keeps take's frame, and so this one (its f_back): it must
            # keep no future or batch, or they live as long as the exception (in a cycle with
            # it, through the future: the error's batch would count as held until the gc ran).
            del fut, holder
            batch = None
            if waiters:
                self._stranded()  # a death may have taken the steps the others waited for

    def detach(self) -> None:
        """Remove the reader (before the fd closes: asyncio loses a reused fd otherwise)."""
        loop, self._loop = self._loop, None
        self._waiters.clear()
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)

    def fail_all(self, exc: BaseException) -> None:
        """Fail every waiting future with ``exc`` (on close)."""
        while self._waiters:
            fut, _ = self._waiters.popleft()
            if not fut.done() and not fut.get_loop().is_closed():
                fut.set_exception(exc)


def _on_readable(ref: weakref.ReferenceType[Doorbell]) -> None:
    bell = ref()
    if bell is not None:
        bell._dispatch()
