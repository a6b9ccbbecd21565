"""Who holds the batches a pool handed out and not yet sent back: the channel rule of ``recv``.

A receiver waits while a batch can still come: env steps in flight, batches given back by
cancelled receivers, or batches handed to another task (or thread) that may still send their
actions. A batch held by a task that is itself parked in a receive cannot come back while it
waits. So of the rows handed out, those held by holders that are not parked count as rows that
may still be sent; when they, the steps in flight and the given-back batches can fill no batch,
no receiver can ever be served and each gets ``NothingInFlight``.

A handed-out batch stops counting when its actions are sent (``batch.send`` or ``pool.send``
to its envs; row by row, each env's row in the one batch that holds it unsent), when its envs
are reset (``async_reset``: their next action) or lost with their worker, when it is released
(``batch.release()``), when it is dropped (garbage), or when the task that holds it ends by an
exception or cancellation (its traceback keeps the batch alive, but nobody will send it). Each
end of held rows that no send replaces (a release, a drop, a task's end, lost envs) calls
``on_release`` so the pool can check its parked receivers again; a send or a reset moves the
rows from held to in flight, so what can come for a receiver never shrinks there. Only the
loop's thread (or one sync thread) hands batches out; ``release`` may run from a finaliser
on any thread, so it only touches a dict and a callback.

A pool's close (or its finaliser) closes its holders: nothing counts as held any more, and the
tasks watched drop their callbacks. A long-lived task that makes and closes a pool at a time
(a periodic evaluation) would otherwise keep each pool's holders, and through an unsent batch's
``env_id`` its whole block, until that task ends; the callbacks hold the holders weakly too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .batch import Batch


def current_holder() -> object:
    """Who is receiving: a weak reference to the running task, or the thread's id where no
    event loop runs. Weak: a finished task whose result is a batch must not be kept alive by
    the count of held batches (it would keep the batch, and so its count, forever)."""
    if asyncio._get_running_loop() is not None:
        return task_holder()
    return threading.get_ident()


# task_of(loop): the task running on ``loop`` now, or None.
if sys.version_info >= (3, 12):
    task_of = asyncio.current_task
else:  # 3.11's current_task is Python code that reads this dict of C's (3.12's is C)
    task_of = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined]


class _LastLoop(threading.local):
    loop: asyncio.AbstractEventLoop | None = None


_LAST_LOOP = _LastLoop()


def task_holder() -> object:
    """``current_holder()`` where a loop runs (a receive's coroutine), once a batch. The loop
    last seen running on this thread is asked for its current task first: asking for the
    running loop costs a getpid() system call per call (CPython 3.11's fork check), a third of
    a CartPole batch's Python time. That loop has a current task only while it runs, and a
    thread runs one loop at a time, so a task found is this coroutine's; none found (the loop
    stopped, another one runs), the running loop is asked and remembered. (A loop that moved
    to another thread while this one runs a loop of its own would be asked wrongly: asyncio
    runs a loop on the thread that made it, in practice.)"""
    loop = _LAST_LOOP.loop
    task = task_of(loop) if loop is not None else None
    if task is None:
        loop = _LAST_LOOP.loop = asyncio.get_running_loop()
        task = task_of(loop)
        if task is None:
            return threading.get_ident()
    return weakref.ref(task)


def weak_call(method: weakref.WeakMethod[Callable[[], None]]) -> Callable[[], None]:
    """A callback that calls ``method`` while its object lives (callbacks a pool's doorbell
    and holders keep must not keep the pool alive)."""

    def call() -> None:
        fn = method()
        if fn is not None:
            fn()

    return call


def call_soon_weakly(loop: asyncio.AbstractEventLoop, method: Callable[[], None]) -> bool:
    """Call ``method`` soon on ``loop``, from any thread, without keeping its object alive;
    False if the loop is closed (nobody waits on it then)."""
    try:
        loop.call_soon_threadsafe(weak_call(weakref.WeakMethod(method)))
    except RuntimeError:
        return False
    return True


# A held batch's record, a list (made per batch handed out: a list costs a third of a slotted
# object's construction): [holder, env_id, rows not sent yet, group (batches never span groups:
# a Ray actor's envs; 0 elsewhere), which rows were sent (None until some, not all, were by
# pool.send / async_reset: made then, never per batch handed out)].
HOLDER, ENV_ID, ROWS, GROUP, SENT = range(5)
_Held = list[Any]
# A held batch's token: a weak reference to the batch (Holders.hand_out).
Token = weakref.ReferenceType[Any]


class Holders:
    """The batches handed out and not yet sent, released or dropped, by holder."""

    def __init__(self, num_envs: int) -> None:
        self._num_envs = num_envs
        self._held: dict[Token, _Held] = {}
        self._picked = np.zeros(num_envs, dtype=bool)  # sent_ids' scratch: the envs sent
        self._watched: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self._last_watched: object = None  # the holder of the last batch handed out
        self._on_task_done = _weak_task_done(weakref.ref(self))  # one object: removable
        self._on_drop = _weak_drop(weakref.ref(self))  # every token's callback
        self.on_release: Callable[[], None] | None = None
        # sent(token, None): every row of the batch ``token`` was sent, it counts as in flight
        # now (the dict's own pop: no Python call per batch sent).
        self.sent: Callable[[Token, None], _Held | None] = self._held.pop

    def __bool__(self) -> bool:
        """Whether any batch is held (one dict read: safe beside a finaliser's release)."""
        return bool(self._held)

    def hand_out(self, batch: Batch, holder: object, group: int = 0) -> None:
        """Count ``batch``'s rows as held by ``holder`` (``current_holder()``). Its token
        (``batch._token``) is a weak reference to it whose callback releases the rows if the
        batch is dropped unsent: a send pops the record, and so the reference, first, so a
        batch that was sent costs nothing when it goes. A native pool's ``take_held`` does
        the same in C++ (``configure_batches``: this dict, ``_on_drop`` and ``watch``)."""
        env_id = batch.env_id
        batch._token = token = weakref.ref(batch, self._on_drop)
        self._held[token] = [holder, env_id, len(env_id), group, None]
        if holder is not self._last_watched:
            self.watch(holder)

    def watch(self, holder: object) -> None:
        """A batch went to ``holder``, not to the holder of the batch handed out before: if
        it is a task, its end by an exception or cancellation releases what it holds."""
        if isinstance(holder, weakref.ref):
            task = holder()
            if isinstance(task, asyncio.Task) and task not in self._watched:
                self._watched.add(task)
                task.add_done_callback(self._on_task_done)
        # A task's weak reference is one object while it lives (weakref.ref(task) gives it
        # back): the next batch of the same task skips the WeakSet's lookup.
        self._last_watched = holder

    def close(self) -> None:
        """The pool closed: no batch counts as held, and no task calls back any more. Any
        thread: a task's callbacks are removed on its loop's thread."""
        self._held.clear()
        here = asyncio._get_running_loop()
        while True:  # (a task added meanwhile, on the loop's thread: read them again)
            try:
                watched = list(self._watched)
                break
            except RuntimeError:
                continue
        for task in watched:
            if task.done():
                continue
            loop = task.get_loop()
            if loop is here or loop.is_closed():
                task.remove_done_callback(self._on_task_done)
            else:
                with contextlib.suppress(RuntimeError):  # closed meanwhile: it never runs again
                    loop.call_soon_threadsafe(task.remove_done_callback, self._on_task_done)
        self._watched = weakref.WeakSet()
        self._last_watched = None

    def sent_ids(self, env_ids: npt.ArrayLike | None) -> int:
        """``pool.send`` or ``async_reset`` to ``env_ids`` (None: every env): each env's held
        row is sent; returns how many held rows that ended.

        Counted per batch and per env: an env's row is unsent in at most one held batch (its
        next row can only be received once this one was sent, which marks it here, or its
        batch was sent, released or dropped). So a second send to an env ends the hold of the
        newer batch that brought its row back, never the older one's other rows; and
        ``pool.send(actions, batch.env_id)`` ends exactly what ``batch.send`` ends. The pool
        checked the ids first (unique, in range): as many as its envs are every env, as the
        sync adapters send each step, and a held batch's own env_id (none of its rows sent)
        is that batch; both skip the search (np.isin per held batch cost ~13 µs a step)."""
        if env_ids is None or len(env_ids) == self._num_envs:  # type: ignore[arg-type]
            ended: int = sum(held[ROWS] for held in list(self._held.values()))
            self._held.clear()
            return ended
        ids = np.asarray(env_ids)
        items = list(self._held.items())  # a finaliser may release one meanwhile
        for token, held in items:
            own = held[ENV_ID]
            if held[SENT] is None and (own is ids or (
                    own.shape == ids.shape and np.array_equal(own, ids))):
                self._held.pop(token, None)  # pool.send(actions, batch.env_id): no search
                return int(held[ROWS])
        picked = self._picked
        picked[ids] = True
        ended = 0
        for token, held in items:
            hit = picked[held[ENV_ID]]
            if held[SENT] is not None:
                hit &= ~held[SENT]
            n = int(np.count_nonzero(hit))
            if not n:
                continue
            ended += n
            held[ROWS] -= n
            if held[ROWS] <= 0:
                self._held.pop(token, None)
            elif held[SENT] is None:
                held[SENT] = hit
            else:
                held[SENT] |= hit
        picked[ids] = False
        return ended

    def lost_ids(self, env_ids: npt.ArrayLike) -> None:
        """``env_ids`` were lost with their worker process: their held rows can never be
        sent (a send to them is refused), so they stop counting, as a release."""
        if self.sent_ids(env_ids) and self.on_release is not None:
            self.on_release()

    def give_back(self, token: Token) -> None:
        """A cancelled receiver put the batch back in the queue: it is queued, not held."""
        self._held.pop(token, None)

    def release(self, token: Token) -> None:
        """The batch ``token`` will not be sent (released, dropped): its rows stop counting."""
        held = self._held.pop(token, None)
        if held is not None and held[ROWS] > 0 and self.on_release is not None:
            self.on_release()

    def held_by(self, holder: object) -> int:
        """Rows ``holder`` holds: batches it received and has not sent."""
        return sum(held[ROWS] for held in list(self._held.values()) if held[HOLDER] is holder)

    def held_by_others(self, parked: Collection[object]) -> dict[int, int]:
        """Rows held by holders not in ``parked``, by group: rows that may still be sent."""
        out: dict[int, int] = {}
        for held in list(self._held.values()):  # a finaliser may release one meanwhile
            if held[HOLDER] not in parked:
                out[held[GROUP]] = out.get(held[GROUP], 0) + held[ROWS]
        return out

    def describe_others(self, parked: Collection[object]) -> list[str]:
        """Who holds the rows ``held_by_others`` counts: ``task 'name' (coroutine)``, or a
        thread, with how many rows each holds (for the warning of a receive that waits long)."""
        rows: dict[object, int] = {}
        for held in list(self._held.values()):
            if held[HOLDER] not in parked:
                rows[held[HOLDER]] = rows.get(held[HOLDER], 0) + held[ROWS]
        out = []
        for holder, n in rows.items():
            task = holder() if isinstance(holder, weakref.ref) else None
            if isinstance(task, asyncio.Task):
                coro = task.get_coro()
                what = getattr(coro, "__qualname__", type(coro).__name__)
                state = ", done" if task.done() else ""
                out.append(f"task {task.get_name()!r} ({what}{state}): {n} rows")
            elif isinstance(holder, int):
                out.append(f"thread {holder}: {n} rows")
            else:
                out.append(f"a task that is gone: {n} rows")
        return out

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        """A task that ended by an exception or cancellation sends nothing more; one that
        returned may have handed its batches on (its result, a queue), so they keep counting
        until dropped. ``_exception`` is read, not ``exception()``, which would mark the
        exception retrieved and silence asyncio's "never retrieved" warning."""
        if not task.cancelled() and getattr(task, "_exception", None) is None:
            return
        key = weakref.ref(task)
        for token in [t for t, h in list(self._held.items()) if h[HOLDER] == key]:
            self.release(token)


def _weak_drop(holders: weakref.ref[Holders]) -> Callable[[Token], None]:
    """The tokens' callback: a batch handed out went unsent (any thread: a finaliser's)."""

    def dropped(token: Token) -> None:
        live = holders()
        if live is not None:
            live.release(token)

    return dropped


def _weak_task_done(holders: weakref.ref[Holders]) -> Callable[[asyncio.Task[Any]], None]:
    def task_done(task: asyncio.Task[Any]) -> None:
        live = holders()
        if live is not None:
            live._task_done(task)

    return task_done
