"""Pool: send actions, receive finished batches, from asyncio or from sync code.

The wait ladder of ``recv``: (a) take a ready batch (~1 µs); (b) busy-poll for up to
``recv_spin_us`` (a sleeping thread takes ~20 µs to wake on a VM, and the worker that wakes it
pays ~10 µs for the ring: 200 µs by default where a core is left free for the receiver, 20 µs
where every core steps); (c) arm the eventfd doorbell and await it through the loop (see
``_waiting.py``). The spin adapts: after ``_SPIN_GIVE_UP`` spins in a row found nothing
(batches take longer than the spin, as MuJoCo's do, or the workers are starved of CPU), ``recv``
stops spinning and only probes with one spin every ``_SPIN_PROBE_EVERY`` waits; a probe that
catches a batch turns spinning back on. Every ``_YIELD_EVERY`` fast-path returns, or after ~1 ms
without one, ``recv`` yields to the loop so other tasks on it (inference, logging, the learner)
are never starved.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import ctypes
import enum
import logging
import math
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from ._holders import Holders, call_soon_weakly, current_holder, task_holder, task_of, weak_call
from ._waiting import Doorbell, Item
from .batch import Batch, splitter
from .errors import EnvError, NothingInFlight, PoolClosed, WorkerDied
from .spec import EnvSpec, text_dtype

_log = logging.getLogger("aiopool")

if TYPE_CHECKING:
    from ._render import Renderer

_YIELD_EVERY = 8
_YIELD_AFTER_NS = 1_000_000
_SPIN_GIVE_UP = 8
_SPIN_PROBE_EVERY = 64
_SYNC_SLICE = 0.1  # recv_blocking re-checks that a batch can still come this often (s)


class PoolState(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"
    FORKED = "forked"  # this process is a fork() child of the pool's owner


class Pool:
    """A pool of ``num_envs`` envs stepped by C++ worker threads. Build it with ``aiopool.make``.

    Example:
        >>> pool = aiopool.make("CartPole-v1", num_envs=64, batch_size=32)
        >>> pool.async_reset()
        >>> async for batch in pool.stream():
        ...     batch.send(policy(batch.obs))
    """

    backend = "threads"
    # A receive parked this long while no env step is in flight (it waits only for batches
    # other tasks hold) logs one warning naming those tasks: a deadlock then says where it is.
    stuck_warning_after: float = 10.0

    def __init__(self, native: Any, spec: EnvSpec, *, seed: int | None, autoreset: str,
                 recv_spin_us: float, renderer: Renderer | None = None) -> None:
        self._native = native
        self._renderer = renderer
        self._render_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.spec = spec
        self.num_envs: int = native.num_envs
        self.batch_size: int = native.batch_size
        self.autoreset = autoreset
        self._state = PoolState.OPEN
        self._names = tuple(native.field_names)
        self._all_ids = _all_ids_of(native)
        self._weak = weakref.ref(self)
        self._returned: deque[Item] = deque()  # given back by cancelled receivers
        self._holders = Holders(self.num_envs)
        self._holders.on_release = weak_call(weakref.WeakMethod(self._schedule_check))
        self._sync_parked: dict[object, int] = {}  # threads waiting in recv_blocking
        self._check_pending = False
        self._parked_since: dict[object, float] = {}  # parked async receivers (inf: warned)
        self._stuck_timer: asyncio.TimerHandle | None = None
        self._spin_ns = int(recv_spin_us * 1000)
        self._spin_misses = 0  # consecutive waits whose spin found nothing (or were skipped)
        self._streak = 0
        self._last_yield = time.perf_counter_ns()
        self._ever_reset = False
        self._helping = False  # the native caller_helps flag, read here per recv_blocking
        self._action_space = spec.action_space
        self._action_dtype = np.dtype(spec.action_space.dtype)
        self._action_shape = tuple(spec.action_space.shape or ())
        self._max_seed: int = int(native.spec.get("max_seed", -1))
        # The doorbell and the finaliser must not reach `self`, or the pool is never collected.
        self._take, self._take_held = _takers(
            native, self._returned, self._names, self._weak, self._holders,
            splitter(spec.obs_parts, self._names, _part_dtypes(spec)))
        self._doorbell = Doorbell(native, self._take, self._returned.appendleft,
                                  _hander(self._holders), _un_hander(self._holders),
                                  weak_call(weakref.WeakMethod(self._fail_stranded)))
        self._stage_seeds(self._all_ids, seed)
        self._finalizer = weakref.finalize(self, _release, native, self._doorbell,
                                           self._holders)
        _LIVE.add(self)

    # -- spaces ---------------------------------------------------------------------------

    @property
    def single_observation_space(self) -> gym.spaces.Box:
        return self.spec.observation_space

    @property
    def single_action_space(self) -> gym.spaces.Space[Any]:
        return self.spec.action_space

    @property
    def num_threads(self) -> int:
        return int(self._native.num_threads)

    @property
    def render_mode(self) -> str | None:
        """``"rgb_array"`` where the pool was made to render (``make(..., render_mode=)``)."""
        return self.spec.render_mode

    @property
    def render_fps(self) -> float:
        """The frame rate gymnasium's env declares for its videos (``metadata["render_fps"]``)."""
        if self._renderer is not None:
            return self._renderer.fps
        if self.spec.render_fps:
            return self.spec.render_fps
        from ._render import atari_fps, registered_fps

        if self.spec.family == "atari":
            return atari_fps()
        return registered_fps(self.spec.id) or 30.0

    def render(self, env_ids: npt.ArrayLike | None = None) -> npt.NDArray[np.uint8]:
        """The current frames of ``env_ids`` (default all), batch-first: a read-only ``uint8``
        array ``[k, height, width, 3]``, each frame equal to what the reference renders for that
        env's state (``render_mode="rgb_array"``): gymnasium's ``env.render()``, ale-py's, or
        for the Control Suite dm_control's ``physics.render`` with the pool's ``width``,
        ``height`` and ``camera_id`` (a camera's name too).

        An env's current state is the one of its last received row: its episode's last frame
        after a step that ended it (``next_step``), the new episode's first with ``same_step``.

        Frames drawn by gymnasium's code (classic control, toy text, Box2D; MuJoCo and the
        Control Suite where ``MUJOCO_GL`` picks a backend other than EGL) are drawn on the
        pool's render thread, where its GL context lives, the caller waiting; Atari's, MuJoCo's
        and the Control Suite's in C++ on the calling thread; a process-backed pool's by each
        env's own ``render()`` in its worker process. Either way the GIL is released while GL
        or C++ draws.

        Raises:
            ValueError: the pool was made without ``render_mode``; an env has a step in flight
                (receive its row first) or was never reset.
            RuntimeError: (process backend) an env's ``render()`` raised in its worker, or the
                worker died while it drew.
            PoolClosed: the pool is closed.
        """
        ids = self._render_ids(env_ids)
        if self._renderer is None:
            return self._draw(ids)
        return self._render_thread().submit(self._draw, ids).result()

    async def arender(self, env_ids: npt.ArrayLike | None = None) -> npt.NDArray[np.uint8]:
        """``render`` without blocking the event loop: the frames are drawn on the pool's
        render thread while the loop runs other tasks. Do not send to ``env_ids`` until it
        returns (an env stepping when its turn to be drawn comes raises ValueError, and a send
        to an env being drawn raises ValueError too).

        Cancellation: no more of its frames are drawn; the frame being drawn when it came is
        finished first (the cancellation waits for it), so that once it has propagated the
        pool is as before and its envs take sends.
        """
        ids = self._render_ids(env_ids)
        cancelled = threading.Event()
        job = self._render_thread().submit(self._draw, ids, cancelled)
        drawn = asyncio.wrap_future(job)
        try:
            return await asyncio.shield(drawn)
        except asyncio.CancelledError:
            if job.cancel():  # not started: nothing drawn, nothing claimed
                raise
            cancelled.set()
            while not drawn.done():  # the env being drawn is claimed until its frame is done
                with contextlib.suppress(asyncio.CancelledError):  # (a second cancel: still)
                    await asyncio.wait([drawn])
            if not drawn.cancelled():
                drawn.exception()  # retrieved: its frames are dropped, whatever happened
            raise

    def _render_ids(self, env_ids: npt.ArrayLike | None) -> npt.NDArray[np.int32]:
        self._check_open()
        if self.spec.render_mode is None:
            raise ValueError(f"this {self.spec.id} pool renders nothing: make it with "
                             "render_mode='rgb_array'")
        return self._all_ids if env_ids is None else self._as_ids(env_ids)

    def _render_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._render_executor is None:
            with _RENDER_THREADS_LOCK:  # two first renders at once: one thread, not two
                if self._render_executor is None:
                    self._render_executor = concurrent.futures.ThreadPoolExecutor(
                        1, thread_name_prefix=f"aiopool-render-{self.spec.id}")
                    _with_render_threads(self)
        return self._render_executor

    def _free_renderer_at_exit(self) -> None:
        """At interpreter exit, before the render thread stops: the renderer's GL context is
        freed on that thread, where it is current. dm_control frees its contexts from the main
        thread at exit, which fails (EGL_BAD_ACCESS) while one is current on another thread.
        The pool itself stays open for threads still running (atexit closes it)."""
        executor, renderer = self._render_executor, self._renderer
        if executor is None or renderer is None or self._state is not PoolState.OPEN:
            return
        self._renderer = _FreedRenderer(renderer.fps)
        with contextlib.suppress(RuntimeError):
            executor.submit(renderer.close).result()

    def _draw(self, ids: npt.NDArray[np.int32],
              cancelled: threading.Event | None = None) -> npt.NDArray[np.uint8]:
        self._check_open()
        if cancelled is not None:  # arender: env by env, so that its cancellation stops
            each = []              # before the next
            for k in range(len(ids)):
                if cancelled.is_set():
                    return np.zeros((0, 0, 0, 3), np.uint8)  # nobody reads it
                each.append(self._draw(ids[k:k + 1]))
            out = np.concatenate(each) if each else self._draw(ids)
            out.flags.writeable = False
            return out
        if self._renderer is not None:
            frames = np.stack([self._renderer.frame(self._native, int(i)) for i in ids]) if len(
                ids) else np.zeros((0, 0, 0, 3), np.uint8)
        else:
            frames = np.empty((len(ids), *self.spec.render_shape), dtype=np.uint8)
            self._native.render(ids, frames)
        frames.flags.writeable = False
        return frames

    @property
    def closed(self) -> bool:
        return self._state is not PoolState.OPEN

    # -- sending --------------------------------------------------------------------------

    def async_reset(self, seed: int | Sequence[int | None] | None = None,
                    env_ids: npt.ArrayLike | None = None) -> None:
        """Reset envs without waiting; their first observations arrive through ``recv``.

        Args:
            seed: an int re-seeds env ``i`` with ``seed + i`` (as ``gymnasium.make(id).reset(
                seed=seed + i)``); a sequence gives the k-th env of ``env_ids`` the seed
                ``seed[k]`` (None: not re-seeded), as gymnasium's vector envs take a list of
                seeds. None continues each env's random stream, as gymnasium's unseeded
                ``reset()`` does (the first reset uses the seed given to ``make``).
            env_ids: the envs to reset (default all). None of them may have an action in flight.
        """
        self._check_open()
        ids = self._all_ids if env_ids is None else self._as_ids(env_ids)
        if seed is not None:
            self._native.check_reset(ids)  # a refused reset stages no seed, None's envs too
            self._stage_seeds(ids, seed)
        self._native.reset(ids)
        self._ever_reset = True
        if self._holders:  # a reset is the envs' next action: their held rows are sent
            self._holders.sent_ids(None if env_ids is None else ids)

    def send(self, actions: npt.ArrayLike, env_ids: npt.ArrayLike | None = None) -> None:
        """Step the envs ``env_ids`` (default all) with one action each; returns at once.

        Raises:
            ValueError: wrong shape or dtype, NaN in continuous actions where the pool's
                ``spec.rejects_nan_actions`` (classic control, Box2D; MuJoCo envs pass NaN to
                MuJoCo as gymnasium does; ±inf is clipped as gymnasium clips it), discrete actions
                out of range, env ids out of range or repeated, an env that still has an
                action in flight (or, with ``autoreset="disabled"``, ended its episode). The
                pool is unchanged and stays usable.
            PoolClosed: the pool is closed.
        """
        self._send(actions, env_ids)
        if self._holders:
            self._holders.sent_ids(env_ids)

    def _send(self, actions: npt.ArrayLike, env_ids: npt.ArrayLike | None) -> None:
        if self._state is not PoolState.OPEN:
            self._check_open()
        ids = self._all_ids if env_ids is None else env_ids
        if self._returned:
            self._check_not_given_back(ids)
        try:
            self._native.send(actions, ids)  # numpy arrays of the right dtypes: no conversion
        except TypeError:  # convert, or explain what is wrong
            checked = self._all_ids if env_ids is None else self._as_ids(env_ids)
            self._native.send(self._as_actions(actions, len(checked)), checked)

    # -- receiving ------------------------------------------------------------------------

    def try_recv(self) -> Batch | None:
        """The next finished batch, or None at once if none is ready (or every ready batch is
        owed to a ``recv`` that is already waiting: waiters are served first, in order)."""
        self._check_open()
        if self._doorbell.serve():
            return None
        holder = current_holder()
        try:
            return self._take_held(holder)
        except EnvError as e:
            self._hand_out(e.batch, holder)
            raise

    async def recv(self, timeout: float | None = None) -> Batch:
        """The next ``batch_size`` env steps to finish.

        A receiver waits while a batch can still come for it: env steps in flight, batches
        given back by cancelled receivers, or batches another task (or thread) holds and may
        still send. Batches its own task holds do not count (they cannot come back while it
        waits), nor do those of tasks parked in a receive themselves. A batch stops being held
        when its actions are sent, when it is released (``batch.release()``) or dropped, or
        when its task ends by an exception or cancellation. Any number of consumers may share
        a pool, whatever ``num_envs / batch_size`` is. A receive that has waited
        ``stuck_warning_after`` seconds with no env step in flight logs one warning naming the
        tasks whose batches it waits for.

        Raises:
            TimeoutError: nothing arrived within ``timeout`` seconds.
            NothingInFlight: no batch can ever come for this receiver (raised at once instead
                of hanging; a parked receiver gets it as soon as that becomes true).
            PoolClosed: the pool is closed, before or while waiting.

        Cancellation: nothing is lost. A batch already claimed for a cancelled ``recv`` (or
        an env's error or a worker's death already handed to it) goes back to the front of
        the queue and the next ``recv`` gets it.
        """
        if self._state is not PoolState.OPEN:
            self._check_open()
        if timeout is not None:
            timeout = _finite_or_none(timeout)
        holder = task_holder()
        batch = self._recv_now(timeout, holder)
        if batch is None:
            return await self._park(timeout, holder)
        if self._streak >= _YIELD_EVERY or (
                time.perf_counter_ns() - self._last_yield > _YIELD_AFTER_NS):
            await self._yield_holding(batch)
        return batch

    def _recv_now(self, timeout: float | None, holder: object) -> Batch | None:
        """``recv`` up to parking: a batch handed to ``holder``, or None (it must park)."""
        self._streak += 1
        if not self._doorbell.queue:  # a ready batch nobody parked waits for: the first rung
            try:
                batch = self._take_held(holder)
            except EnvError as e:
                self._hand_out(e.batch, holder)
                raise
            if batch is not None:
                return batch
            return self._recv_rest(timeout, holder, tried=True)
        return self._recv_rest(timeout, holder, tried=False)

    def _recv_rest(self, timeout: float | None, holder: object, tried: bool) -> Batch | None:
        """``recv``'s ladder after its first rung (``tried``: nobody was parked and no batch
        was ready; else parked receivers are served first, then a ready batch taken)."""
        try:
            batch = (self._after_first_rung(0, timeout, holder) if tried
                     else self._take_in_turn(timeout, holder))
        except EnvError as e:
            self._hand_out(e.batch, holder)
            raise
        if batch is not None:
            return batch
        self._streak = 0
        self._last_yield = time.perf_counter_ns()
        return None

    async def _yield_holding(self, batch: Batch) -> None:
        """Yield to the loop with the batch in hand, so receivers are still served in call
        order (every ``_YIELD_EVERY`` batches received without waiting, or after ~1 ms)."""
        try:
            await asyncio.sleep(0)
        except BaseException:
            self._doorbell.give_back(batch)
            raise
        self._check_open()
        self._streak = 0
        self._last_yield = time.perf_counter_ns()

    async def _park(self, timeout: float | None, holder: object) -> Batch:
        """``recv``'s last rung: wait in the doorbell for the next batch."""
        self._parked_since[holder] = time.monotonic()
        if self._stuck_timer is None:
            self._stuck_timer = asyncio.get_running_loop().call_later(
                self.stuck_warning_after, weak_call(weakref.WeakMethod(self._warn_if_stuck)))
        try:
            if timeout is None:
                return await self._doorbell.wait(holder)
            try:
                async with asyncio.timeout(timeout):
                    return await self._doorbell.wait(holder)
            except TimeoutError:  # asyncio's says nothing
                raise TimeoutError(f"no batch arrived within {timeout} s") from None
        finally:
            self._parked_since.pop(holder, None)

    async def stream(self) -> AsyncIterator[Batch]:
        """Receive batches forever; ends when the pool closes (at once if it is closed).

        Resets every env first if the pool was never reset. Send each batch's actions
        (``batch.send(...)``) before asking for the next one, or the stream runs dry and
        ``recv`` raises ``NothingInFlight``. Several streams may share a pool: each waits for
        the batches the others hold and may still send (the rule of ``recv``).

        Cancellation: as ``recv``; a batch received but not yet yielded goes back to the queue.
        """
        if not self._ever_reset:
            if self._state is PoolState.CLOSED:
                return
            self.async_reset()
        # recv's steps, inline: a batch that is ready costs no coroutine of its own. The holder
        # is the task that iterates the stream, asked again only where another task does.
        loop = asyncio.get_running_loop()
        holder = task_holder()
        parked, take_held = self._doorbell.queue, self._take_held
        while True:
            if self._state is not PoolState.OPEN:
                return
            if holder.__class__ is not weakref.ref or holder() is not task_of(loop):
                holder = task_holder()
            try:
                self._streak += 1  # _recv_now's steps, inline
                batch = None if parked else take_held(holder)
                if batch is None:
                    batch = self._recv_rest(None, holder, tried=not parked)
                    if batch is None:
                        batch = await self._park(None, holder)
                elif self._streak >= _YIELD_EVERY or (
                        time.perf_counter_ns() - self._last_yield > _YIELD_AFTER_NS):
                    await self._yield_holding(batch)
            except EnvError as e:
                self._hand_out(e.batch, holder)
                raise
            except PoolClosed:
                return
            yield batch

    async def step(self, actions: npt.ArrayLike) -> Batch:
        """Step every env once and return all rows ordered by env_id (sync semantics).

        Needs every env idle and ``num_envs`` divisible by ``batch_size``. The result is the
        received batch itself when its rows already come in env_id order, else a read-only
        copy in that order.

        Cancellation: batches this call already received go back to the front of the queue;
        those still in flight arrive through later ``recv`` calls.
        """
        self._check_step_allowed()
        self.send(actions)
        received: list[Batch] = []
        try:
            for _ in range(self.num_envs // self.batch_size):
                received.append(await self.recv())
        except BaseException:
            for b in reversed(received):
                self._doorbell.give_back(b)
            raise
        if len(received) == 1:
            ids = received[0].env_id
            if bool((ids[1:] > ids[:-1]).all()):  # rows already in env_id order: no copy
                return received[0]
        out = Batch.sorted_concat(received)
        self._hand_out(out, current_holder())  # before the parts are dropped
        return out

    def recv_blocking(self, timeout: float | None = None) -> Batch:
        """``recv`` for sync code: waits in C++ with the GIL released.

        In the sync adapters' pools (``_caller_helps``), and without a timeout, the calling
        thread first steps envs whose actions are still queued (as a worker thread would, GIL
        released), since it would only wait for them otherwise.

        Raises:
            TimeoutError, NothingInFlight, PoolClosed: as ``recv``.
        """
        self._check_open()
        if timeout is not None:
            timeout = _finite_or_none(timeout)
        elif self._helping:
            self._native.help()
            self._check_open()  # closed meanwhile: PoolClosed, not a batch it finished
        holder = current_holder()
        try:
            batch = self._take_in_turn(timeout, holder)
            if batch is None:
                batch = self._wait_blocking(timeout, holder)
        except EnvError as e:
            self._hand_out(e.batch, holder)
            raise
        return batch

    def _wait_blocking(self, timeout: float | None, holder: object) -> Batch:
        """recv_blocking's last rung: wait in C++ in slices, checking between them that a
        batch can still come (other holders may drop theirs meanwhile)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        parked = self._sync_parked
        parked[holder] = parked.get(holder, 0) + 1
        try:
            while True:
                remaining = _SYNC_SLICE if deadline is None else max(
                    0.0, min(_SYNC_SLICE, deadline - time.monotonic()))
                self._native.wait(remaining)
                self._check_open()
                if not self._doorbell.serve():
                    batch = self._take_held(holder)
                    if batch is not None:
                        return batch
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"no batch arrived within {timeout} s")
                self._check_can_complete(holder, parked_self=True)
        finally:
            parked[holder] -= 1
            if not parked[holder]:
                del parked[holder]

    def flush(self, timeout: float | None = None) -> int:
        """Hand out a partly filled batch: the rows finished since the last full one.

        A batch normally holds ``batch_size`` rows. After a send (or ``async_reset``) of fewer
        envs than that, ``flush`` waits (GIL released, as ``recv_blocking``) until every env
        step sent so far has finished, then publishes the rows written since the last full
        batch as one short batch (``len(batch) < batch_size``) that the next ``recv``,
        ``try_recv`` or ``recv_blocking`` returns. Later sends fill new batches as before. A
        second flush before the first one's batch is received publishes a second short batch
        (the rows since the first); receives take them in flush order.

        Returns:
            The short batch's rows; 0 if there were none (every batch was full); -1 if env
            steps were still in flight when ``timeout`` ran out (nothing was published).

        Raises:
            PoolClosed: the pool is closed.
            WorkerDied: (process backend) a worker died and was not replaced; its lost envs
                are named, receivers parked for their rows are told, and the next flush goes
                on.
        """
        self._check_open()
        if timeout is not None:
            timeout = _finite_or_none(timeout)
        try:
            rows = int(self._native.flush(-1.0 if timeout is None else timeout))
        except WorkerDied as e:
            if self._holders:
                self._holders.lost_ids(np.asarray(e.env_ids, dtype=np.int32))
            self._schedule_check()  # parked receivers may have waited for the lost rows
            raise
        self._check_open()  # closed meanwhile from another thread
        if rows > 0:
            self._doorbell.serve()
        return rows

    def env_error(self, env_id: int) -> str:
        """The last error an env's simulator raised, or "" (MuJoCo envs; others never raise).

        A MuJoCo step that raises (``mju_error``: e.g. a model with too little ``<size
        memory>``) does not end the process: that env's row has ``info["mujoco_error"]`` set,
        reward 0 and ``truncated`` set (its episode ends; the next step resets it), and this
        returns MuJoCo's message. The other envs and the pool go on.
        """
        self._check_open()
        return str(self._native.env_error(int(env_id)))

    def _caller_helps(self, on: bool = True) -> None:
        """For a pool used only through ``send`` + ``recv_blocking`` (the sync adapters'):
        ``recv_blocking`` without a timeout steps queued envs on the calling thread, GIL
        released, instead of waiting for a worker, and each send is cut into tickets for one
        thread more than ``num_threads``. A sync loop so gets one stepping thread more (its
        thread only spun or slept while the workers stepped), and the rows it writes are in
        its own cache when it reads them. Rows may then come out of env id order, as with
        several workers. Results are the same whichever thread steps an env: each env's state
        and random stream are its own. Not for ``recv``: the event loop must stay free."""
        self._native.caller_helps = on
        self._helping = on

    def _take_in_turn(self, timeout: float | None, holder: object) -> Batch | None:
        """The ladder's first rungs, in turn with receivers already parked: serve those first
        (FIFO), then take a ready batch; else raise NothingInFlight if none can come for this
        caller, else spin (for itself if nobody is parked; else what it catches is theirs)."""
        waiting = self._doorbell.serve()
        if not waiting:
            batch = self._take_held(holder)
            if batch is not None:
                return batch
        return self._after_first_rung(waiting, timeout, holder)

    def _after_first_rung(self, waiting: int, timeout: float | None,
                          holder: object) -> Batch | None:
        """The ladder after a ready batch was looked for (``waiting``: receivers parked)."""
        self._check_can_complete(holder)
        if not waiting:
            return self._spin(timeout, holder)
        # Spin for the receivers parked ahead: what it catches goes to the first of them at
        # once, without the eventfd's wake-up (more consumers than batches take turns so).
        try:
            batch = self._spin(timeout, holder)
        except (EnvError, WorkerDied) as e:  # theirs too: the first parked receiver gets it,
            self._doorbell.give_back(e)      # and the others are checked (a death strands them)
            self._check_can_complete(holder)
            return None
        if batch is not None:
            self._doorbell.give_back(batch)
        return None

    def _hand_out(self, batch: Any, holder: object) -> None:
        if isinstance(batch, Batch) and batch._token is None:
            self._holders.hand_out(batch, holder)

    def _spin(self, timeout: float | None, holder: object) -> Batch | None:
        """Busy-poll for a batch for up to recv_spin_us (and the timeout), adaptively; one
        caught is held by ``holder``."""
        spin_ns = self._spin_ns if timeout is None else min(self._spin_ns, int(timeout * 1e9))
        if spin_ns <= 0:
            return None
        self._spin_misses += 1
        if (self._spin_misses > _SPIN_GIVE_UP
                and self._spin_misses % _SPIN_PROBE_EVERY != 0):
            return None
        batch = self._take_held(holder, spin_ns)
        if batch is not None:
            self._spin_misses = 0
        return batch

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop and join the workers. Idempotent. Pending ``recv`` calls raise PoolClosed.

        Batches already received stay valid.
        """
        if self._state is PoolState.CLOSED:
            return
        forked = self._state is PoolState.FORKED
        self._state = PoolState.CLOSED
        self._finalizer.detach()
        self._returned.clear()
        if forked:
            self._holders.close()
            return
        self._doorbell.fail_all(PoolClosed("the pool was closed while this recv waited"))
        self._doorbell.detach()
        self._native.close()
        self._holders.close()
        executor, self._render_executor = self._render_executor, None
        if self._renderer is not None:
            if executor is None:
                self._renderer.close()
            else:  # its GL context is current on the render thread
                # At interpreter exit the executor's thread takes no more work: leave it.
                with contextlib.suppress(RuntimeError):
                    executor.submit(self._renderer.close).result()
        if executor is not None:
            executor.shutdown(wait=True)

    async def aclose(self) -> None:
        """``close()`` from a coroutine.

        Cancellation: close runs to completion; it does not await anything.
        """
        self.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Pool({self.spec.id!r}, num_envs={self.num_envs}, batch_size={self.batch_size},"
                f" num_threads={self.num_threads}, autoreset={self.autoreset!r},"
                f" state={self._state.value})")

    # -- internals ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state is PoolState.CLOSED:
            raise PoolClosed("the pool is closed")
        if self._state is PoolState.FORKED:
            raise PoolClosed(
                "this pool was created before os.fork(); its worker threads live only in the "
                "parent process. Make a new pool in the child.")

    def _parked(self) -> set[object]:
        """Holders waiting in a receive now: their batches cannot be sent meanwhile."""
        parked = self._doorbell.parked()
        if self._sync_parked:
            parked.update(self._sync_parked)
        return parked

    def _rows_coming(self, parked: set[object]) -> tuple[int, int]:
        """(rows sent and not yet taken, rows held by holders not in ``parked``): rows fill
        blocks in claim order, so every whole ``batch_size`` of their sum can still be a
        batch (the rows in flight are counted on this thread only)."""
        held = self._holders.held_by_others(parked).get(0, 0) if self._holders else 0
        return int(self._native.rows_in_flight), held

    def _check_can_complete(self, holder: object, parked_self: bool = False) -> None:
        """Raise NothingInFlight unless a batch can still come: one given back, or one that
        rows in flight and rows other (not parked) holders may send can fill. Parked
        receivers ahead do not matter: what they get, they may send back."""
        if self._returned:
            return
        if int(self._native.rows_in_flight) >= self.batch_size:
            return  # the steps in flight fill a batch: no need to count the holders' rows
        parked = self._parked()
        parked.add(holder)
        untaken, held = self._rows_coming(parked)
        if untaken + held >= self.batch_size:
            return
        mine = self._holders.held_by(holder) if self._holders else 0
        raise NothingInFlight(self._nothing_message(untaken, held, len(parked) - 1, mine))

    def _nothing_message(self, untaken: int, held: int, others: int, mine: int = 0) -> str:
        missing = self.batch_size - untaken - held
        head = (f"recv() would wait forever: {untaken} env steps are in flight, other tasks "
                f"hold {held} rows they may still send ({others} other receivers waiting), "
                f"and batch_size is {self.batch_size}; ")
        if mine:
            head += (f"this task holds {mine} rows of batches it received and has not sent "
                     "(send their actions first: batch.send); ")
        lost = int(getattr(self._native, "lost_envs", 0))  # the process backend's dead workers
        alive = self.num_envs - lost
        if alive < self.batch_size:
            return head + (
                f"{lost} of the {self.num_envs} envs were lost with their worker processes, "
                f"and the {alive} left cannot fill a batch: flush() hands out their rows as a "
                "short batch; or close the pool (make it with restart=True to replace dead "
                "workers)")
        return head + (f"send actions (or async_reset) for at least {missing} more envs first"
                       + (f" ({lost} envs were lost with their worker processes)" if lost else ""))

    def _fail_stranded(self) -> None:
        """Every parked receiver gets NothingInFlight if no batch can come any more."""
        if self._state is not PoolState.OPEN or self._returned:
            return
        parked = self._doorbell.parked()
        if not parked:
            return
        if self._sync_parked:
            parked.update(self._sync_parked)
        untaken, held = self._rows_coming(parked)
        if untaken + held < self.batch_size:
            msg = self._nothing_message(untaken, held, len(parked) - 1)
            self._doorbell.fail_parked(lambda: NothingInFlight(msg))

    def _warn_if_stuck(self) -> None:
        """Receivers parked ``stuck_warning_after`` s while no env step is in flight wait only
        for batches that other tasks hold (the channel rule): warn once for each, naming those
        tasks. Runs while receivers are parked, once per ``stuck_warning_after``."""
        self._stuck_timer = None
        since = self._parked_since
        if self._state is not PoolState.OPEN or not since:
            return
        now, after = time.monotonic(), self.stuck_warning_after
        due = [h for h, t in since.items() if now - t >= after]
        if due and not self._returned and not self._native.rows_in_flight:
            for h in due:
                since[h] = math.inf
            holding = self._holders.describe_others(self._parked()) if self._holders else []
            _log.warning(
                "%d recv() of this %s pool waited %g s with no env step in flight, for the "
                "batches other tasks hold and may still send: %s. If they never send them, "
                "send them (batch.send) or release them (batch.release()) in those tasks",
                len(due), self.spec.id, after, "; ".join(holding) or "none")
        first = min(since.values(), default=math.inf)
        if first < math.inf:
            loop = self._doorbell.loop
            if loop is not None:
                self._stuck_timer = loop.call_later(max(0.0, first + after - now), weak_call(
                    weakref.WeakMethod(self._warn_if_stuck)))

    def _schedule_check(self) -> None:
        """Held rows went away (a batch dropped or released, a task ended): check the parked
        receivers soon, on their loop (this may run in a finaliser, on any thread)."""
        loop = self._doorbell.loop
        if (loop is None or self._check_pending or self._state is not PoolState.OPEN
                or not self._doorbell.num_waiting):  # a later receiver checks for itself
            return
        self._check_pending = call_soon_weakly(loop, self._check_parked)

    def _check_parked(self) -> None:
        self._check_pending = False
        if self._state is PoolState.OPEN and self._doorbell.serve():
            self._fail_stranded()

    def _check_not_given_back(self, env_ids: npt.ArrayLike) -> None:
        """A result a cancelled receiver gave back is still to be received: its env is not
        idle for the user yet, so a send to it is refused (cancelling changes nothing)."""
        held = np.concatenate([np.empty(0, np.int32)] + [
            b.env_id for b in map(_batch_of, self._returned) if b is not None])
        ids = np.asarray(env_ids)
        if ids.dtype.kind not in "iu":
            return  # refused with a clearer message by the checks that follow
        clash = np.intersect1d(held, ids)
        if clash.size:
            raise ValueError(
                f"send: env {int(clash[0])} has a result that has not been received yet (a "
                "cancelled recv put its batch back in the queue); receive it before sending "
                "that env another action")

    def _check_step_allowed(self) -> None:
        self._check_open()
        if self.num_envs % self.batch_size:
            raise ValueError(
                f"step() needs num_envs ({self.num_envs}) divisible by batch_size "
                f"({self.batch_size}); use send()/recv() for other shapes")
        if self._native.rows_in_flight or self._returned:
            raise ValueError(
                f"step() needs every env idle, but {self._native.rows_in_flight} results are "
                "in flight or waiting; receive them first")

    def _as_ids(self, env_ids: npt.ArrayLike) -> npt.NDArray[np.int32]:
        ids = np.asarray(env_ids)
        if ids.ndim != 1 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
            raise ValueError(
                f"env_ids has shape {ids.shape} and dtype {ids.dtype}, expected a 1-d array "
                "of integers")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_envs):
            bad = ids[(ids < 0) | (ids >= self.num_envs)][0]
            raise ValueError(f"env_ids contains {bad}, expected 0 <= env_id < {self.num_envs}")
        return np.ascontiguousarray(ids, dtype=np.int32)

    def _as_actions(self, actions: npt.ArrayLike, n: int) -> npt.NDArray[Any]:
        a = np.asarray(actions)
        space = self._action_space
        check_action_dtype(a, space)
        if a.shape != (n, *self._action_shape):
            raise ValueError(
                f"actions has shape {a.shape}, expected {(n, *self._action_shape)} — "
                "one action per env in env_ids")
        with np.errstate(over="ignore"):  # 1e40 to float32 is inf, which the env clips
            return np.ascontiguousarray(a, dtype=self._action_dtype)

    def _stage_seeds(self, ids: npt.NDArray[np.int32],
                     seed: int | Sequence[int | None] | None) -> None:
        """Seed ``ids`` at their next reset (``seed=None``: every env from fresh entropy)."""
        seeds = None
        if seed is not None:
            ids, seeds = per_env_seeds(seed, ids, self._max_seed)
        states = seed_states(seeds, len(ids))
        self._native.stage_seeds(np.ascontiguousarray(ids, dtype=np.int32), states,
                                 int_seeds(seeds, self._max_seed, states))


def check_action_dtype(actions: npt.NDArray[Any], space: gym.Space[Any]) -> None:
    """Refuse actions that the space's dtype would change: where it holds integers, floats
    for Discrete, and fractional floats for MultiDiscrete, MultiBinary and an integer Box (a
    cast would cut a sigmoid's 0.9 to 0; SB3's MultiBinary policies give float 0.0 / 1.0,
    which gymnasium's spaces take); anything but numbers elsewhere. MultiBinary takes bools."""
    if np.dtype(space.dtype).kind in "iu":
        if actions.dtype == np.bool_ and isinstance(space, gym.spaces.MultiBinary):
            return
        if np.issubdtype(actions.dtype, np.floating) and not isinstance(
                space, gym.spaces.Discrete):
            fractional = ~np.isfinite(actions) | (actions != np.trunc(actions))
            if fractional.any():
                raise ValueError(f"actions holds {actions[fractional].flat[0].item()!r}, not a "
                                 f"whole number: {space} takes integers")
        elif not np.issubdtype(actions.dtype, np.integer):
            raise ValueError(f"actions has dtype {actions.dtype}, expected integers for {space}")
        # The cast to the space's dtype would wrap what it cannot hold (256 to int8's 0).
        limits = np.iinfo(space.dtype)
        beyond = (actions < limits.min) | (actions > limits.max)
        if beyond.any():
            if actions.ndim:  # the first env's whole action, as given
                j = int(np.flatnonzero(beyond.reshape(len(actions), -1).any(axis=1))[0])
                where, value = f"actions[{j}]", actions[j].tolist()
            else:
                where, value = "actions", actions.tolist()
            raise ValueError(f"{where} is {value}, beyond {np.dtype(space.dtype)}: out of "
                             f"{space}")
    elif not (np.issubdtype(actions.dtype, np.floating)
              or np.issubdtype(actions.dtype, np.integer)):
        raise ValueError(f"actions has dtype {actions.dtype}, expected numbers for {space}")


def _finite_or_none(timeout: float | None) -> float | None:
    """``timeout=math.inf`` means no timeout; NaN is an error."""
    if timeout is None or math.isfinite(timeout):
        return timeout
    if math.isnan(timeout):
        raise ValueError("timeout is nan, expected seconds or None")
    return None if timeout > 0 else 0.0


def per_env_seeds(seed: int | Sequence[int | None], env_ids: npt.NDArray[np.int32],
                  max_seed: int) -> tuple[npt.NDArray[np.int32], list[int]]:
    """The envs to re-seed and their seeds: ``seed + i`` for an int, ``seed[k]`` for the k-th of
    ``env_ids`` for a sequence (None: that env is not re-seeded, as gymnasium's
    ``reset(seed=None)``).

    Raises:
        ValueError: a seed that is not a non-negative int, a sequence of the wrong length, or
            a seed above what the env accepts (``max_seed``; -1: anything).
    """
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool | np.bool_):
        if seed < 0:
            raise ValueError(f"seed is {seed!r}, expected a non-negative int or None")
        ids, seeds = env_ids, [int(seed) + i for i in env_ids.tolist()]
    elif isinstance(seed, str | bytes) or not isinstance(seed, Sequence | np.ndarray):
        raise ValueError(f"seed is {seed!r}, expected None, a non-negative int or a sequence "
                         "with one int (or None) per env in env_ids")
    else:
        listed = list(seed)
        if len(listed) != len(env_ids):
            raise ValueError(f"seed has {len(listed)} entries, expected one per env in env_ids "
                             f"({len(env_ids)})")
        for k, s in enumerate(listed):
            if s is not None and (not isinstance(s, int | np.integer)
                                  or isinstance(s, bool | np.bool_) or s < 0):
                raise ValueError(f"seed[{k}] is {s!r}, expected a non-negative int or None")
        keep = [k for k, s in enumerate(listed) if s is not None]
        ids, seeds = env_ids[keep], [int(s) for s in listed if s is not None]
    if 0 <= max_seed < max(seeds, default=0):
        k = int(np.argmax(seeds))
        raise ValueError(f"env {int(ids[k])} would get the seed {seeds[k]}, but this env takes "
                         f"seeds up to {max_seed} (a C int, as its reference does)")
    return ids, seeds


def seed_states(seeds: list[int] | None, n: int) -> npt.NDArray[np.uint64]:
    """numpy PCG64 states of ``SeedSequence(s)`` for each seed, as (state_hi, state_lo, inc_hi,
    inc_lo): exactly what gymnasium's ``np_random`` starts from after ``reset(seed=s)``. With
    ``seeds=None``, ``n`` states from fresh OS entropy.
    """
    out = np.empty((n, 4), dtype=np.uint64)
    mask = (1 << 64) - 1
    for row in range(n):
        seq = np.random.SeedSequence(None if seeds is None else seeds[row])
        st = np.random.PCG64(seq).state["state"]
        s, inc = int(st["state"]), int(st["inc"])
        out[row] = (s >> 64, s & mask, inc >> 64, inc & mask)
    return out


def int_seeds(seeds: list[int] | None, max_seed: int,
              states: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """The integer seed of each env, for envs whose reference seeds its own generators with it
    (Atari: ALE's RNG and the noop-reset ``std::mt19937``, as ale-py's
    ``AtariVectorEnv.reset(seed=seed)`` does); other envs ignore it. -1 where a seed is at least
    2**63 (only numpy's SeedSequence sees those). With ``seeds=None``, a number drawn from the
    fresh entropy in ``states``.
    """
    if seeds is None:
        limit = max_seed if max_seed >= 0 else 2**62
        return (states[:, 1] % np.uint64(limit + 1)).astype(np.int64)
    return np.array([s if s < 2**63 else -1 for s in seeds], dtype=np.int64)


def _part_dtypes(spec: EnvSpec) -> list[np.dtype[Any]]:
    """The dtype of each of ``spec.obs_parts``, from the Tuple / Dict observation space."""
    space: Any = spec.observation_space
    return [text_dtype(space[key]) or np.dtype(space[key].dtype) for key, _ in spec.obs_parts]


def _takers(native: Any, returned: deque[Item], names: tuple[str, ...],
            weak: weakref.ReferenceType[Pool], holders: Holders,
            split: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None,
            ) -> tuple[Callable[..., Batch | None], Callable[..., Batch | None]]:
    """``take(spin_ns=0)``: a pushed-back batch first, then a ready block, else None; and
    ``take_held(holder, spin_ns=0)``: the same, held by ``holder`` (``Holders.hand_out``).
    ``split`` turns a native block's arrays into those of a Tuple / Dict observation
    (``splitter``). A native pool of array observations makes held batches in one C++ call
    (``take_held``: Batch() and the hand-out cost ~0.45 us a batch in Python, a sixth of a
    CartPole stream's). A worker's death (process backend) ends the holds of its envs' rows,
    which no send can follow any more, before anyone hears of it."""

    def take(spin_ns: int = 0) -> Batch | None:
        if returned:
            item = returned.popleft()
            if isinstance(item, BaseException):
                raise item  # a fault a cancelled receiver was handed: the next one gets it
            return item
        try:
            arrays = native.take(spin_ns)
        except EnvError as e:  # a process-backed pool's env raised: the batch rides along
            e.batch = Batch(e.arrays, names, weak)
            raise
        except WorkerDied as e:
            if holders:
                holders.lost_ids(np.asarray(e.env_ids, dtype=np.int32))
            raise
        if arrays is None:
            return None
        return Batch(arrays if split is None else split(arrays), names, weak)

    def take_held(holder: object, spin_ns: int = 0) -> Batch | None:
        batch = take(spin_ns)
        if batch is not None:
            holders.hand_out(batch, holder)
        return batch

    native_held = getattr(native, "take_held", None) if split is None else None
    if native_held is None:
        return take, take_held
    native.configure_batches(Batch, names, weak, holders._held, holders._on_drop,
                             holders.watch)

    def take_held_natively(holder: object, spin_ns: int = 0) -> Batch | None:
        if returned:
            return take_held(holder)
        batch: Batch | None = native_held(holder, spin_ns)  # (a native pool's envs' errors
        return batch                                        # come in their rows, not raised)

    return take, take_held_natively


def _batch_of(item: Item) -> Batch | None:
    """The batch of a queued item: a batch, or an env error's batch (a death has none)."""
    batch = item if isinstance(item, Batch) else getattr(item, "batch", None)
    return batch if isinstance(batch, Batch) else None


def _hander(holders: Holders) -> Callable[[Batch, object], None]:
    def hand_out(batch: Batch, holder: object) -> None:
        holders.hand_out(batch, holder)

    return hand_out


def _un_hander(holders: Holders) -> Callable[[Batch], None]:
    def give_back(batch: Batch) -> None:
        if batch._token is not None:
            holders.give_back(batch._token)
            batch._token = None

    return give_back


def _all_ids_of(native: Any) -> npt.NDArray[np.int32]:
    ids = np.arange(native.num_envs, dtype=np.int32)
    ids.flags.writeable = False
    return ids


def _release(native: Any, doorbell: Doorbell, holders: Holders) -> None:
    """Finaliser of a pool dropped without close(): reader off first, then join and close."""
    doorbell.detach()
    native.close()
    holders.close()


class _FreedRenderer:
    """A pool's renderer after its GL context was freed at interpreter exit."""

    def __init__(self, fps: float) -> None:
        self.fps = fps

    def frame(self, native: Any, env_id: int) -> npt.NDArray[np.uint8]:
        raise PoolClosed("the pool's renderer was freed at interpreter exit")

    def close(self) -> None:
        pass


_LIVE: weakref.WeakSet[Pool] = weakref.WeakSet()
_RENDERING: weakref.WeakSet[Pool] = weakref.WeakSet()  # pools with a render thread
_RENDER_THREADS_LOCK = threading.Lock()
_render_hook_registered = False


def _with_render_threads(pool: Pool) -> None:
    """``pool`` has a render thread, whose renderer is freed at exit on it. One exit hook for
    all pools, registered once a ThreadPoolExecutor exists: after concurrent.futures' own hook,
    so it runs first, while the threads still take work (threading runs these hooks last
    registered first)."""
    global _render_hook_registered
    if not _render_hook_registered:
        threading._register_atexit(_free_renderers_at_exit)  # type: ignore[attr-defined]
        _render_hook_registered = True
    _RENDERING.add(pool)


def _free_renderers_at_exit() -> None:
    for pool in list(_RENDERING):
        pool._free_renderer_at_exit()



def _after_fork_in_child() -> None:
    for pool in list(_LIVE):
        if pool._state is PoolState.OPEN:
            pool._state = PoolState.FORKED
            pool._finalizer.detach()
            # Never destroyed, not even at interpreter exit: destroying it would join the
            # parent's threads, which exist only there (std::system_error, SIGABRT at exit).
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(pool._native))
            quiet = getattr(sys.modules.get(type(pool._native).__module__), "_quiet_leaks_at_exit",
                            None)  # a native module's (the process backend's is Python)
            if quiet is not None:
                quiet()
    global _RENDER_THREADS_LOCK
    _RENDER_THREADS_LOCK = threading.Lock()  # another thread may have held it at the fork


def _close_all_at_exit() -> None:
    for pool in list(_LIVE):
        pool.close()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_all_at_exit)
