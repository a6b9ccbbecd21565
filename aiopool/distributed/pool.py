"""RemotePool: aiopool pools in Ray actors, merged on the driver behind the pool contract.

The data path, per batch::

    batch.send(actions) ─▶ route to the actor owning those envs ─▶ actor.call(SEND, recv=True)
                                                                        │ the actor's pool steps
    recv() ◀─ ready deque ◀─ _drain (loop thread) ◀─ inbox ◀─ Ray's thread ◀─ the next batch

Each call to an actor sends what it carries and returns that actor's next batch: one RPC per
batch. The calls in flight are the "lanes" (``findings/ray.md``): an actor with ``n`` envs in
batches of ``B`` has up to ``n // B`` of them, so it never waits for the network while it has
envs to step, and never runs ahead of the actions (bounded by construction: the driver holds at
most ``num_envs // batch_size`` batches).

Threads: Ray completes calls on its own thread; its callback only appends to ``_Mailbox`` (a
deque) and rings the loop with ``call_soon_threadsafe`` (once per drain, not per call). All
pool state is touched on the loop thread (or the caller's thread, for the sync methods).
Batches are never split or joined across actors: each actor's batch arrives whole, in
completion order. Their arrays are read-only views of what Ray received (inline in the reply
or, from 100 KiB, in the object store, pinned while a view lives).

Faults: a call that fails ends its actor's generation; results of older generations are
dropped, so nothing is delivered twice. Without ``restart`` the failure reaches ``recv`` as
``ActorDied`` naming the env ids lost; with it, the actor is restarted (by Ray, ``max_restarts``;
never task retries) and its lost envs reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future as ConcurrentFuture
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, cast

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import ray
from ray.exceptions import ActorDiedError, RayActorError, RayTaskError

from .._holders import Holders, call_soon_weakly, current_holder, weak_call
from ..batch import Batch
from ..errors import NothingInFlight, PoolClosed
from ..pool import check_action_dtype, per_env_seeds
from ..spec import EnvSpec
from ._host import Op
from .errors import ActorDied
from .rollout import Fragment, Rollouts

_YIELD_EVERY = 8
_WAIT_MAX = 3600.0  # longest single thread-event wait (longer ones overflow time_t)


class _State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


@dataclass(eq=False)
class _Actor:
    """One actor as the driver sees it. ``gen`` is the generation of its envs' life (bumped on
    each failure); ``seq`` numbers its calls within a generation; ``recvs`` counts calls in
    flight that will return a batch; ``unclaimed`` counts rows in flight no call waits for."""

    index: int
    handle: Any
    offset: int
    size: int
    pid: int
    gen: int = 0
    seq: int = 0
    recvs: int = 0
    unclaimed: int = 0
    dead: bool = False
    restarts: int = 0  # times its envs were started over (restart=True)
    answered: bool = False  # a call of this generation succeeded
    down_since: float | None = None  # when the current run of failures began
    flushes: list[int] = field(default_factory=list)  # rows of flush calls landed (-1: timeout)
    life: str | None = None  # the actor's incarnation the calls are for (None: not known yet)

    @property
    def ids(self) -> range:
        return range(self.offset, self.offset + self.size)


@dataclass(frozen=True, slots=True)
class _Death:
    """An actor's death, queued for the next receiver (at the front): ``ActorDied`` is built
    when it is handed out, so sends made before the user heard of it count as lost."""

    actor: int
    how: str
    cause: BaseException


_Item = Batch | BaseException | _Death


@dataclass(frozen=True, slots=True)
class _Call:
    actor: int
    gen: int
    op: int
    recv: bool


class _Mailbox:
    """Calls completed on Ray's thread, waiting for the loop. Holds no reference to the pool,
    so a pool dropped with calls in flight is still collected."""

    def __init__(self) -> None:
        self.inbox: deque[tuple[_Call, ConcurrentFuture[Any]]] = deque()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.drain: Any = None  # the pool's _drain, through a weak reference
        self.wake_pending = False
        self.arrived = threading.Event()  # for recv_blocking / flush

    def landed(self, call: _Call, fut: ConcurrentFuture[Any]) -> None:
        """Ray's thread: the deque holds the truth; the loop is rung once per drain."""
        self.inbox.append((call, fut))
        self.arrived.set()
        loop = self.loop
        if loop is None or self.wake_pending:
            return
        self.wake_pending = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(self.drain)


class RemotePool:
    """Envs in aiopool pools inside Ray actors, with the pool contract. Make one with
    ``aiopool.distributed.make_remote``.

    Env ids are global: actor ``j`` holds envs ``offset_j .. offset_j + n_j - 1`` (the envs are
    split as evenly as possible, the first actors taking one more), and env ``i`` seeded ``s``
    gets ``s + i`` wherever it runs, so a remote pool steps exactly as ``aiopool.make`` with the
    same ``num_envs`` and seed. Batches come from one actor each, ``batch_size`` rows (never
    split or merged across actors), in the order they arrive; their arrays are read-only.

    Example:
        >>> pool = aiopool.distributed.make_remote("Pong-v5", num_envs=256, batch_size=64,
        ...                                        num_actors=4, num_cpus=8)
        >>> async for batch in pool.stream():
        ...     batch.send(policy(batch.obs))
    """

    backend = "ray"

    def __init__(self, actors: list[_Actor], described: dict[str, Any], *, restart: bool,
                 max_restarts: int, restart_timeout: float = 60.0,
                 placement_group: Any = None) -> None:
        self._actors = actors
        self.spec: EnvSpec = described["spec"]
        self.num_envs = sum(a.size for a in actors)
        self.batch_size: int = described["batch_size"]
        self.autoreset: str = described["autoreset"]
        self.restart = restart
        self._max_restarts = max_restarts
        self._restart_timeout = restart_timeout
        self._names: tuple[str, ...] = described["field_names"]
        self._threads: int = described["num_threads"] or 0
        self._max_seed: int = described["max_seed"]
        self._render_fps: float = described.get("render_fps", 0.0)
        self._pg = placement_group
        self._state = _State.OPEN
        self._offsets = np.array([a.offset for a in actors], dtype=np.int64)
        n = self.num_envs
        self._all_ids = np.arange(n, dtype=np.int32)
        self._all_ids.flags.writeable = False
        self._busy = np.zeros(n, dtype=bool)         # sent or reset; not yet handed to the user
        self._held = np.zeros(n, dtype=bool)         # its row is at the driver, not handed out
        self._unreset = np.ones(n, dtype=bool)       # never reset
        self._ended = np.zeros(n, dtype=bool)        # ended with autoreset="disabled"
        self._lost = np.zeros(n, dtype=bool)         # its actor died for good
        self._ready: deque[_Item] = deque()
        self._waiters: deque[asyncio.Future[_Item]] = deque()
        self._waiter_holder: dict[asyncio.Future[_Item], object] = {}  # whose receive it is
        self._sync_parked: dict[object, int] = {}  # threads waiting in recv_blocking
        self._holders = Holders(n)  # batches handed out and not yet sent (see _holders.py)
        self._holders.on_release = weak_call(weakref.WeakMethod(self._schedule_check))
        self._check_pending = False
        self._ever_reset = False
        self._roll: Rollouts | None = None
        self._streak = 0
        self._weak = weakref.ref(self)
        self._mail = _Mailbox()
        self._mail.drain = functools.partial(_drain_weak, self._weak)
        self._action_space = self.spec.action_space
        self._action_dtype = np.dtype(self._action_space.dtype)
        self._action_shape = tuple(self._action_space.shape or ())
        self._rejects_nan = (isinstance(self._action_space, gym.spaces.Box)
                             and self.spec.rejects_nan_actions)
        self._finalizer = weakref.finalize(self, _kill, [a.handle for a in actors], self._pg)

    # -- description ----------------------------------------------------------------------

    @property
    def single_observation_space(self) -> gym.spaces.Space[Any]:
        return self.spec.observation_space

    @property
    def single_action_space(self) -> gym.spaces.Space[Any]:
        return self.spec.action_space

    @property
    def num_threads(self) -> int:
        """Each actor's pool threads."""
        return self._threads

    @property
    def num_actors(self) -> int:
        return len(self._actors)

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    @property
    def actors(self) -> list[Any]:
        """The Ray actor handles, actor ``j`` holding ``env_ids_of(j)``."""
        return [a.handle for a in self._actors]

    def env_ids_of(self, actor: int) -> range:
        """The global env ids actor ``actor`` holds."""
        return self._actors[actor].ids

    @property
    def num_waiting(self) -> int:
        """Receivers parked in ``recv`` (as ``Pool``'s doorbell counts them)."""
        return self._num_waiting()

    @property
    def rows_in_flight(self) -> int:
        """Env steps sent (or resets) whose rows have not reached the driver yet."""
        return int((self._busy & ~self._held).sum())

    @property
    def restarts(self) -> list[int]:
        """How many times each actor's envs were started over after a failure."""
        return [a.restarts for a in self._actors]

    # -- sending --------------------------------------------------------------------------

    def async_reset(self, seed: int | Sequence[int | None] | None = None,
                    env_ids: npt.ArrayLike | None = None) -> None:
        """Reset envs without waiting; their first observations arrive through ``recv``.

        Args:
            seed: as ``Pool.async_reset``: an int re-seeds env ``i`` with ``seed + i`` (global
                ids, so the same as a local pool); a sequence gives the k-th env of ``env_ids``
                ``seed[k]`` (None: not re-seeded); None continues each env's stream.
            env_ids: the envs to reset (default all). None may have an action in flight.
        """
        self._check_open()
        ids = self._all_ids if env_ids is None else self._as_ids(env_ids)
        self._check_envs(ids, "async_reset", need_reset=False)
        seeds: list[int | None] | None = None
        if seed is not None:
            seeded, values = per_env_seeds(seed, ids, self._max_seed)
            by_env = dict(zip(seeded.tolist(), values, strict=True))
            seeds = [by_env.get(i) for i in ids.tolist()]
        for a, rows in self._route(ids):
            if a.dead:  # its death is not reported yet: these envs are counted lost then
                continue
            local = (ids[rows] - a.offset).astype(np.int32)
            payload = None if seeds is None else [seeds[k] for k in rows.tolist()]
            self._dispatch(a, Op.RESET, local, payload)
        self._busy[ids] = True
        self._unreset[ids] = False
        self._ended[ids] = False
        self._ever_reset = True
        if self._holders:  # a reset is the envs' next action: their held rows are sent
            self._holders.sent_ids(None if env_ids is None else ids)

    def send(self, actions: npt.ArrayLike, env_ids: npt.ArrayLike | None = None) -> None:
        """Step the envs ``env_ids`` (default all) with one action each; returns at once.

        Validated here, as ``Pool.send`` validates: the actors get only what they accept.

        Raises:
            ValueError: wrong shape or dtype, discrete actions out of range, NaN in continuous
                actions where ``spec.rejects_nan_actions`` (not MuJoCo's nor the Control
                Suite's), env ids out of range or repeated, an env
                with an action in flight, never reset, ended with ``autoreset="disabled"``, or
                lost with its actor. Nothing is sent; the pool stays usable.
            PoolClosed: the pool is closed.
        """
        self._send(actions, env_ids)
        if self._holders:
            self._holders.sent_ids(env_ids)

    def _send(self, actions: npt.ArrayLike, env_ids: npt.ArrayLike | None) -> None:
        self._check_open()
        ids = self._all_ids if env_ids is None else self._as_ids(env_ids)
        self._check_envs(ids, "send", need_reset=True)
        acts = self._as_actions(actions, len(ids))
        for a, rows in self._route(ids):
            if a.dead:  # its death is not reported yet: these envs are counted lost then
                continue
            local = (ids[rows] - a.offset).astype(np.int32)
            self._dispatch(a, Op.SEND, local, acts if len(rows) == len(ids) else acts[rows])
        self._busy[ids] = True

    def _dispatch(self, a: _Actor, op: Op, local_ids: npt.NDArray[np.int32],
                  payload: Any) -> None:
        """Send ``op`` for ``local_ids`` and ask for every batch the rows now fill: the first
        with the same call, any more with recv-only calls (only after resets of many envs)."""
        a.unclaimed += len(local_ids)
        batches, a.unclaimed = divmod(a.unclaimed, self.batch_size)
        self._call(a, op, local_ids, payload, recv=batches > 0)
        for _ in range(batches - 1):
            self._call(a, Op.NONE, None, None, recv=True)

    def _call(self, a: _Actor, op: Op, local_ids: npt.NDArray[np.int32] | None, payload: Any,
              recv: bool) -> None:
        ref = a.handle.call.remote((a.gen, a.seq, int(op), local_ids, payload, recv, a.life))
        a.seq += 1
        if recv:
            a.recvs += 1
        ref.future().add_done_callback(
            functools.partial(self._mail.landed, _Call(a.index, a.gen, int(op), recv)))

    # -- receiving ------------------------------------------------------------------------

    def try_recv(self) -> Batch | None:
        """The next batch that has arrived, or None at once (or if every arrived batch is owed
        to a ``recv`` already waiting: waiters are served first, in order).

        Raises:
            ActorDied: as ``recv``.
        """
        self._check_open()
        self._drain()
        if self._num_waiting() or not self._ready:
            return None
        return self._hand_out(self._ready.popleft(), current_holder())

    async def recv(self, timeout: float | None = None) -> Batch:
        """The next batch to arrive from any actor.

        Raises:
            TimeoutError: nothing arrived within ``timeout`` seconds.
            NothingInFlight: no call in flight will ever bring a batch for this receiver
                (raised at once instead of hanging).
            ActorDied: an actor died and the pool was made without ``restart=True`` (once;
                the other actors go on).
            PoolClosed: the pool is closed, before or while waiting.

        Cancellation: nothing is lost. A batch already handed to a cancelled ``recv`` goes
        back to the front of the queue and the next ``recv`` gets it.
        """
        self._check_open()
        timeout = _finite_or_none(timeout)
        loop = asyncio.get_running_loop()
        if self._mail.loop is not loop:
            self._mail.loop = loop
        self._drain()
        holder = current_holder()
        if self._ready and not self._num_waiting():
            self._streak += 1
            if self._streak >= _YIELD_EVERY:  # let the loop's other tasks run now and then
                self._streak = 0
                item = self._ready.popleft()
                try:
                    await asyncio.sleep(0)
                except BaseException:
                    self._give_back(item)
                    raise
                self._check_open()
                return self._hand_out(item, holder)
            return self._hand_out(self._ready.popleft(), holder)
        self._streak = 0
        self._check_can_complete(holder)
        fut: asyncio.Future[_Item] = loop.create_future()
        self._waiters.append(fut)
        self._waiter_holder[fut] = holder
        try:
            if timeout is None:
                item = await fut
            else:
                async with asyncio.timeout(timeout):
                    item = await fut
        except BaseException as e:
            if fut.done() and not fut.cancelled():
                if not isinstance(fut.result(), NothingInFlight | PoolClosed):
                    self._give_back(fut.result())
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            if isinstance(e, TimeoutError):  # asyncio's says nothing
                raise TimeoutError(f"no batch arrived within {timeout} s") from None
            raise
        finally:
            self._waiter_holder.pop(fut, None)
        return self._hand_out(item, holder)

    async def stream(self) -> AsyncIterator[Batch]:
        """Receive batches forever; ends when the pool closes (at once if it is closed).

        Resets every env first if the pool was never reset. Send each batch's actions
        (``batch.send(...)``) before asking for the next one, or the stream runs dry and
        ``recv`` raises ``NothingInFlight``.

        Cancellation: as ``recv``.
        """
        if not self._ever_reset:
            if self._state is _State.CLOSED:
                return
            self.async_reset()
        while True:
            try:
                batch = await self.recv()
            except PoolClosed:
                return
            yield batch

    async def step(self, actions: npt.ArrayLike) -> Batch:
        """Step every env once and return all rows ordered by env_id (sync semantics).

        Needs every env idle and each actor's share of envs divisible by ``batch_size``.

        Cancellation: batches already received go back to the front of the queue; those
        still in flight arrive through later ``recv`` calls.
        """
        self._check_open()
        uneven = [a.size for a in self._actors if a.size % self.batch_size]
        if uneven:
            raise ValueError(
                f"step() needs each actor's envs divisible by batch_size ({self.batch_size}), "
                f"but actors hold {[a.size for a in self._actors]}; use send()/recv()")
        if self._busy.any() or self._ready:
            raise ValueError(f"step() needs every env idle, but {int(self._busy.sum())} results "
                             "are in flight or waiting; receive them first")
        self.send(actions)
        received: list[Batch] = []
        try:
            for _ in range(self.num_envs // self.batch_size):
                received.append(await self.recv())
        except BaseException:
            for b in reversed(received):
                self._give_back(b)
            raise
        if len(received) == 1 and bool((received[0].env_id[1:] > received[0].env_id[:-1]).all()):
            return received[0]
        out = Batch.sorted_concat(received)
        self._hand_out(out, current_holder())  # before the parts are dropped
        return out

    async def rollouts(self, policy: Any, horizon: int = 128,
                       depth: int = 2) -> AsyncIterator[Fragment]:
        """Rollout mode: each actor runs ``policy`` over its envs and returns fragments of
        ``horizon`` lockstep steps; yields them as they arrive, from any actor, forever.

        Args:
            policy: a picklable ``policy(obs) -> actions`` (obs ``(n, *obs_shape)`` of the
                actor's ``n`` envs; may be ``async``), with ``set_weights(weights)`` if you
                push weights. It is sent to every actor once, through the object store.
            horizon: steps per fragment (``T``).
            depth: fragments per actor in flight or waiting to be taken (bounded: an actor
                runs at most ``depth`` fragments ahead of the consumer).

        A pool is used either through ``send``/``recv``/``stream`` or through rollouts:
        after the first call, the stepping methods raise. Calling again (after a ``break``)
        goes on with the same policy and the fragments already under way; nothing is
        delivered twice. Needs each actor's envs divisible by ``batch_size``.

        Raises:
            ActorDied: an actor died without ``restart=True`` (a restarted actor gets the
                policy and the latest weights again and starts fresh episodes).
            Exception: what the policy raised in an actor (that fragment is lost).
            RuntimeError: an actor could not take the policy or pushed weights (they do
                not unpickle there: a class its workers cannot import); its fragments
                would otherwise wait forever.

        Cancellation: nothing is lost; fragments under way are kept for the next call.
        """
        if self._state is _State.CLOSED:
            return
        if self._roll is None:
            if self._ever_reset:
                raise ValueError("rollouts() on a pool already stepped with send/recv/stream; "
                                 "make a new pool for rollout mode")
            self._roll = Rollouts(self, policy, horizon, depth)
            self._ever_reset = True
        elif policy is not self._roll.policy or horizon != self._roll.horizon:
            raise ValueError("rollouts() again with another policy or horizon; push new "
                             "weights with set_weights(), or make a new pool")
        async for fragment in self._roll.run():
            yield fragment

    def set_weights(self, weights: Any) -> int:
        """Push new policy weights to every actor (rollout mode); returns their version.

        Non-blocking: ``weights`` go into the object store once; each actor applies them
        (``policy.set_weights(weights)``) before its next fragment, whose
        ``policy_version`` says so.
        """
        if self._roll is None:
            raise ValueError("set_weights() needs rollout mode: call rollouts() first")
        self._check_not_closed()
        return self._roll.set_weights(weights)

    def recv_blocking(self, timeout: float | None = None) -> Batch:
        """``recv`` for sync code: waits on a thread event (Ray completes calls on its own
        thread, so nothing else needs to run).

        Raises:
            TimeoutError, NothingInFlight, ActorDied, PoolClosed: as ``recv``.
        """
        self._check_open()
        timeout = _finite_or_none(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        holder = current_holder()
        parked = self._sync_parked
        parked[holder] = parked.get(holder, 0) + 1
        try:
            while True:
                self._mail.arrived.clear()
                self._drain()
                if self._ready and not self._num_waiting():
                    return self._hand_out(self._ready.popleft(), holder)
                self._check_can_complete(holder)
                remaining = _WAIT_MAX if deadline is None else max(
                    0.0, deadline - time.monotonic())
                if not self._mail.arrived.wait(min(remaining, _WAIT_MAX)) and (
                        deadline is not None and time.monotonic() >= deadline):
                    raise TimeoutError(f"no batch arrived within {timeout} s")
                self._check_open()
        finally:
            parked[holder] -= 1
            if not parked[holder]:
                del parked[holder]

    def flush(self, timeout: float | None = None) -> int:
        """Hand out a partly filled batch from each actor: the rows finished since its last
        full one (as ``Pool.flush``, per actor; blocks the calling thread).

        Returns:
            The short batches' rows in all; 0 if every batch was full; -1 if an actor still
            had env steps in flight when ``timeout`` ran out (nothing was published there).
        """
        self._check_open()
        timeout = _finite_or_none(timeout)
        flushing = [(a, a.gen) for a in self._actors if a.unclaimed and not a.dead]
        for a, _ in flushing:
            a.flushes.clear()
            self._call(a, Op.FLUSH, None, timeout, recv=True)
        while True:
            self._mail.arrived.clear()
            self._drain()
            if all(a.flushes or a.gen != gen for a, gen in flushing):  # landed, or failed
                break
            self._mail.arrived.wait()
            self._check_open()
        rows = [a.flushes[0] if a.flushes else 0 for a, _ in flushing]
        return -1 if -1 in rows else sum(rows)

    def env_error(self, env_id: int) -> str:
        """The last error an env's simulator raised, or "" (see ``Pool.env_error``)."""
        self._check_open()
        a = self._actors[self._owner(int(env_id))]
        return str(ray.get(a.handle.env_error.remote(int(env_id) - a.offset)))

    @property
    def render_mode(self) -> str | None:
        """``"rgb_array"`` where the pool was made to render (``render_mode=`` of make)."""
        return self.spec.render_mode

    @property
    def render_fps(self) -> float:
        """The frame rate of the envs' videos (as ``Pool.render_fps``)."""
        return self._render_fps

    def render(self, env_ids: npt.ArrayLike | None = None) -> npt.NDArray[np.uint8]:
        """The current frames of ``env_ids`` (default all), batch-first, read-only: each
        actor's pool draws its envs (``Pool.render``) and the frames come back in the order
        asked. Envs with a step in flight or never reset are refused, as ``Pool.render``
        refuses them."""
        return self._gather_frames(self._render_calls(env_ids), ray.get)

    async def arender(self, env_ids: npt.ArrayLike | None = None) -> npt.NDArray[np.uint8]:
        """``render`` without blocking the event loop."""
        calls = self._render_calls(env_ids)
        parts = await asyncio.gather(*(ref for _, ref in calls))
        return self._gather_frames(calls, lambda refs: parts)

    def _render_calls(self, env_ids: npt.ArrayLike | None) -> list[tuple[Any, Any]]:
        """(positions, the actor's render call) per actor holding some of ``env_ids``."""
        self._check_open()
        if self.spec.render_mode is None:
            raise ValueError(f"this {self.spec.id} pool renders nothing: make it with "
                             "render_mode='rgb_array'")
        ids = self._all_ids if env_ids is None else self._as_ids(env_ids)
        for mask, why in ((self._lost, "was lost with its actor"),
                          (self._unreset, "has not been reset yet; call async_reset() first"),
                          (self._busy & ~self._held, "has a step in flight; receive its row "
                                                     "first")):
            if mask[ids].any():
                raise ValueError(f"render: env {int(ids[mask[ids]][0])} {why}")
        return [(where, a.handle.render.remote((ids[where] - a.offset).astype(np.int32)))
                for a, where in self._route(ids)]

    def _gather_frames(self, calls: list[tuple[Any, Any]],
                       get: Any) -> npt.NDArray[np.uint8]:
        parts = get([ref for _, ref in calls]) if calls else []
        if not calls:
            return np.zeros((0, 0, 0, 3), np.uint8)
        first = np.asarray(parts[0])
        frames = np.empty((sum(len(w) for w, _ in calls), *first.shape[1:]), np.uint8)
        for (where, _), part in zip(calls, parts, strict=True):
            frames[where] = part
        frames.flags.writeable = False
        return frames

    def actor_pids(self) -> list[int]:
        """The process id of each actor (on its node)."""
        return [int(p) for p in ray.get([a.handle.pid.remote() for a in self._actors])]

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the actors (their envs and threads go with them) and remove the placement
        group the pool made. Idempotent. Pending ``recv`` calls raise PoolClosed; batches
        already received stay valid."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self._ready.clear()
        self._mail.arrived.set()  # a thread in recv_blocking / flush wakes and sees it
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done() and not fut.get_loop().is_closed():
                fut.set_result(PoolClosed("the pool was closed while this recv waited"))
        self._holders.close()
        self._finalizer()

    async def aclose(self) -> None:
        """``close()`` from a coroutine.

        Cancellation: close runs to completion; it does not await anything.
        """
        self.close()

    def __enter__(self) -> RemotePool:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> RemotePool:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"RemotePool({self.spec.id!r}, num_envs={self.num_envs}, batch_size="
                f"{self.batch_size}, num_actors={self.num_actors}, autoreset={self.autoreset!r},"
                f" state={self._state.value})")

    # -- the loop side: completed calls ---------------------------------------------------

    def _drain(self) -> None:
        mail = self._mail
        mail.wake_pending = False  # before popping: a later landing rings again
        inbox = mail.inbox
        while inbox:
            call, fut = inbox.popleft()
            self._land(call, fut)
        self._serve()

    def _land(self, call: _Call, fut: ConcurrentFuture[Any]) -> None:
        a = self._actors[call.actor]
        exc = fut.exception()  # read either way: Ray logs errors nobody read
        if call.gen != a.gen or self._state is _State.CLOSED:
            return  # a generation given up on: nothing of it reaches the user
        if exc is not None:
            self._failed(a, exc)
            return
        a.answered = True
        if call.op == Op.RECOVER:  # the life this generation runs in
            a.life = fut.result()
            return
        if call.recv:
            a.recvs -= 1
        result = fut.result()
        if call.op == Op.FLUSH:
            rows, result = result
            a.flushes.append(rows)
            if rows > 0:
                a.unclaimed -= rows
        if result is not None:
            self._ready.append(self._batch(result))

    def _batch(self, fields: tuple[Any, ...]) -> Batch:
        for arr in fields:
            _read_only(arr)
        ids = fields[4]
        self._held[ids] = True
        if self.autoreset == "disabled":
            self._ended[ids] = fields[2] | fields[3]
        batch = Batch((*fields[:5], None), self._names, cast(Any, self._weak))
        batch._fields = fields
        return batch

    def _serve(self) -> None:
        """Hand arrived batches (and errors) to parked receivers, first come first served."""
        waiters, ready = self._waiters, self._ready
        while waiters and ready:
            fut = waiters.popleft()
            if not fut.done():
                item = ready.popleft()
                if isinstance(item, Batch):  # on its way to a holder: counts as held already
                    self._hold(item, self._waiter_holder.get(fut))
                fut.set_result(item)

    def _hold(self, batch: Batch, holder: object) -> None:
        if batch._token is None:
            self._holders.hand_out(batch, holder, self._owner(int(batch.env_id[0])))

    def _hand_out(self, item: _Item, holder: object) -> Batch:
        if isinstance(item, _Death):
            raise self._reported(item)
        if isinstance(item, BaseException):
            raise item
        ids = item.env_id
        self._busy[ids] = False
        self._held[ids] = False
        self._hold(item, holder)
        return item

    def _give_back(self, item: _Item) -> None:
        """A batch a cancelled receiver held goes back to the front, to the next waiter."""
        if isinstance(item, Batch):
            if item._token is not None:
                self._holders.give_back(item._token)
                item._token = None
            item = item._moved()  # the cancelled task's traceback may keep the old object
            self._busy[item.env_id] = True
            self._held[item.env_id] = True
        self._ready.appendleft(item)
        self._serve()

    def _failed(self, a: _Actor, exc: BaseException) -> None:
        """A call of actor ``a``'s current generation failed: its envs' steps in flight are
        lost. Start them over (``restart=True``, unless Ray says the actor is dead for good) or
        report the actor dead.

        A restart counts against ``max_restarts`` once the actor had answered in the failed
        generation; calls that fail while Ray is still restarting it (``ActorUnavailableError``
        "The actor is restarting") are tried again without counting, for up to
        ``restart_timeout`` seconds.
        """
        mine = np.arange(a.offset, a.offset + a.size, dtype=np.int32)
        lost = mine[self._busy[mine] & ~self._held[mine]]
        a.gen += 1
        a.seq = a.recvs = a.unclaimed = 0
        a.life = None  # the next call that answers says which life it reached
        now = time.monotonic()
        new_run = a.answered or a.down_since is None  # not a retry while Ray restarts it
        if new_run:
            a.down_since = now
        a.answered = False
        assert a.down_since is not None
        if (self.restart and not isinstance(exc, ActorDiedError)
                and now - a.down_since < self._restart_timeout
                and (not new_run or a.restarts < self._max_restarts)):
            a.restarts += new_run
            self._call(a, Op.RECOVER, None, None, recv=False)
            if len(lost):  # their next rows are resets; the others reset at their next send
                self._ended[lost] = False
                self._dispatch(a, Op.RESET, (lost - a.offset).astype(np.int32), None)
            return
        a.dead = True
        with contextlib.suppress(Exception):
            ray.kill(a.handle, no_restart=True)
        theirs = [b for b in self._ready
                  if isinstance(b, Batch) and a.offset <= int(b.env_id[0]) < a.offset + a.size]
        for b in theirs:  # arrived, not handed out: lost with the rest (no send could follow)
            self._ready.remove(b)
            self._held[b.env_id] = False
        how = _describe(exc)
        if self.restart:
            how += (f" and could not be restarted ({a.restarts} restarts of max_restarts="
                    f"{self._max_restarts}; down for {now - a.down_since:.1f} s)")
        self._ready.appendleft(_Death(a.index, how, exc))  # reported first, not after a queue
        self._serve()
        self._fail_stranded()

    def _reported(self, death: _Death) -> ActorDied:
        """The user hears of the death now: from here on its envs refuse sends."""
        a = self._actors[death.actor]
        mine = np.arange(a.offset, a.offset + a.size, dtype=np.int32)
        lost = mine[self._busy[mine]]
        self._lost[mine] = True
        self._busy[mine] = False
        if self._holders:  # their held rows can never be sent (a send is refused)
            self._holders.lost_ids(mine)
        return ActorDied(a.index, death.how, [int(i) for i in lost], [int(i) for i in mine],
                         death.cause, self.restart)

    def _fail_stranded(self) -> None:
        """Parked receivers get NothingInFlight once no batch can come for them any more (an
        actor died, a holder dropped its batch): neither a call in flight nor rows other
        holders may still send."""
        live = [f for f in self._waiters if not f.done()]
        if not live or self._batches_coming(self._parked()):
            return
        for fut in live:
            fut.set_result(NothingInFlight(
                "recv() would wait forever: no call in flight will bring a batch, and no task "
                "holds one it may still send (lost with an actor, or dropped unsent)"))

    def _schedule_check(self) -> None:
        """Held rows went away (a batch dropped or released, a task ended): check the parked
        receivers soon, on their loop (this may run in a finaliser, on any thread)."""
        loop = self._mail.loop
        if (loop is None or self._check_pending or self._state is _State.CLOSED
                or not self._num_waiting()):  # a later receiver checks for itself
            return
        self._check_pending = call_soon_weakly(loop, self._check_parked)

    def _check_parked(self) -> None:
        self._check_pending = False
        if self._state is not _State.CLOSED:
            self._drain()
            self._fail_stranded()

    def _parked(self) -> set[object]:
        """Holders waiting in a receive now: their batches cannot be sent meanwhile."""
        parked = {self._waiter_holder.get(f) for f in self._waiters if not f.done()}
        parked.update(self._sync_parked)
        return parked

    def _batches_coming(self, parked: set[object]) -> int:
        """Batches that can still come: arrived, asked for by calls in flight, or filled by
        the rows in flight with those other (not parked) holders may send, per actor (batches
        never span actors)."""
        held = self._holders.held_by_others(parked) if self._holders else {}
        return len(self._ready) + sum(
            a.recvs + (a.unclaimed + held.get(a.index, 0)) // self.batch_size
            for a in self._actors if not a.dead)

    # -- checks ---------------------------------------------------------------------------

    def _num_waiting(self) -> int:
        return sum(1 for f in self._waiters if not f.done())

    def _check_not_closed(self) -> None:
        if self._state is _State.CLOSED:
            raise PoolClosed("the pool is closed")

    def _check_open(self) -> None:
        """Open, and stepped through send/recv (not in rollout mode)."""
        self._check_not_closed()
        if self._roll is not None:
            raise ValueError("this pool is in rollout mode (rollouts() was called): its actors "
                             "step the envs themselves; make another pool for send/recv")

    def _check_can_complete(self, holder: object) -> None:
        """Raise NothingInFlight unless a batch can still come for this receiver: each recv
        call in flight brings one, and rows other holders (not parked) may send can fill
        more. Parked receivers ahead do not matter: what they get, they may send back."""
        parked = self._parked()
        parked.add(holder)
        if self._batches_coming(parked):
            return
        live = [a for a in self._actors if not a.dead]
        unclaimed = sum(a.unclaimed for a in live)
        held = sum(self._holders.held_by_others(parked).values())
        missing = self.batch_size - max((a.unclaimed for a in live), default=0)
        raise NothingInFlight(
            f"recv() would wait forever: {unclaimed} env steps are in flight that fill no "
            f"batch, other tasks hold {held} rows they may still send ({len(parked) - 1} other "
            f"receivers waiting, batch_size {self.batch_size}, batches never span actors); "
            f"send actions (or async_reset) for at least {missing} more envs of one actor "
            "first, or flush()")

    def _as_ids(self, env_ids: npt.ArrayLike) -> npt.NDArray[np.int32]:
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
            raise ValueError(
                f"env_ids has shape {ids.shape} and dtype {ids.dtype}, expected a 1-d array "
                "of integers")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_envs):
            bad = ids[(ids < 0) | (ids >= self.num_envs)][0]
            raise ValueError(f"env_ids contains {bad}, expected 0 <= env_id < {self.num_envs}")
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        if len(np.unique(ids)) != len(ids):
            values, counts = np.unique(ids, return_counts=True)
            raise ValueError(f"env_ids names env {int(values[counts > 1][0])} twice; give each "
                             "env at most one action")
        return ids

    def _check_envs(self, ids: npt.NDArray[np.int32], what: str, need_reset: bool) -> None:
        checks = [(self._lost, " was lost with its actor (make the pool with restart=True to "
                               "restart dead actors)"),
                  (self._busy, " still has an action in flight; receive its result before "
                               "sending it another")]
        if need_reset:
            checks += [(self._unreset, " has not been reset yet; call async_reset() first"),
                       (self._ended, " ended its episode and autoreset is 'disabled'; call "
                                     "async_reset(env_ids=[...]) for it first")]
        for mask, why in checks:
            bad = mask[ids]
            if bad.any():
                raise ValueError(f"{what}: env {int(ids[np.argmax(bad)])}{why}")

    def _as_actions(self, actions: npt.ArrayLike, n: int) -> npt.NDArray[Any]:
        a = np.asarray(actions)
        space = self._action_space
        check_action_dtype(a, space)
        if a.shape != (n, *self._action_shape):
            raise ValueError(
                f"actions has shape {a.shape}, expected {(n, *self._action_shape)} — "
                "one action per env in env_ids")
        if isinstance(space, gym.spaces.Discrete):
            out_of_range = (a < space.start) | (a >= space.start + space.n)
            if out_of_range.any():
                j = int(np.argmax(out_of_range))
                raise ValueError(f"actions[{j}] is {int(a[j])}, expected {space.start} <= "
                                 f"action < {space.start + space.n} ({space})")
        elif self._rejects_nan:
            bad = np.isnan(a.reshape(n, -1)).any(axis=1)
            if bad.any():
                j = int(np.argmax(bad))
                raise ValueError(f"actions[{j}] contains nan; this env's actions must not be NaN "
                                 "(out-of-range values and inf are clipped as the reference env "
                                 "clips them)")
        with np.errstate(over="ignore"):  # 1e40 to float32 is inf, which the env clips
            return np.ascontiguousarray(a, dtype=self._action_dtype)

    def _owner(self, env_id: int) -> int:
        return int(np.searchsorted(self._offsets, env_id, side="right")) - 1

    def _route(self, ids: npt.NDArray[np.int32]) -> list[tuple[_Actor, npt.NDArray[np.intp]]]:
        """The actors ``ids`` belong to, each with the positions of its ids (in order)."""
        if not len(ids):
            return []
        lo, hi = self._owner(int(ids.min())), self._owner(int(ids.max()))
        if lo == hi:  # one actor (every batch.send): no grouping
            return [(self._actors[lo], np.arange(len(ids)))]
        owners = np.searchsorted(self._offsets, ids, side="right") - 1
        return [(self._actors[j], np.flatnonzero(owners == j)) for j in range(lo, hi + 1)
                if (owners == j).any()]


def _drain_weak(ref: weakref.ReferenceType[RemotePool]) -> None:
    pool = ref()
    if pool is not None:
        pool._drain()


def _kill(handles: list[Any], pg: Any) -> None:
    """Close (or finaliser of a pool dropped without close): kill the actors, remove the
    placement group. Quiet if Ray is already shut down."""
    if not ray.is_initialized():
        return
    for h in handles:
        with contextlib.suppress(Exception):
            ray.kill(h, no_restart=True)
    if pg is not None:
        from ray.util.placement_group import remove_placement_group

        with contextlib.suppress(Exception):
            remove_placement_group(pg)


def _read_only(arr: Any) -> None:
    if isinstance(arr, np.ndarray):
        arr.flags.writeable = False
    elif isinstance(arr, dict):
        for v in arr.values():
            _read_only(v)
    elif isinstance(arr, tuple):
        for v in arr:
            _read_only(v)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ActorDiedError):
        return "died (Ray: ActorDiedError)"
    if isinstance(exc, RayActorError):
        return f"became unreachable (Ray: {type(exc).__name__})"
    if isinstance(exc, RayTaskError):
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        return f"failed a call with {type(cause).__name__}: {cause}"
    return f"failed a call with {type(exc).__name__}: {exc}"


def _finite_or_none(timeout: float | None) -> float | None:
    if timeout is None or math.isfinite(timeout):
        return timeout
    if math.isnan(timeout):
        raise ValueError("timeout is nan, expected seconds or None")
    return None if timeout > 0 else 0.0

