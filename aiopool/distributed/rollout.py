"""Rollout mode: each actor runs a policy over its own envs and returns fragments of T steps.

For envs too cheap to step across the network (a CartPole batch steps in ~30 µs; a Ray round
trip costs ~1 ms), one RPC per ``T`` lockstep steps of all an actor's envs instead of one per
batch. The driver keeps ``depth`` fragment calls per actor in flight or waiting to be taken
(the actor runs them one after another, so the next is computed while the last travels) and
yields them as they come, from any actor. Weights pushed with ``set_weights`` go to every
actor through the object store once, and apply from each actor's next fragment on; every
fragment says which version it was computed with.

State lives on the loop thread; Ray's completions arrive as asyncio futures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import ray
from ray.exceptions import ActorDiedError, RayTaskError

from ..errors import NothingInFlight
from ._host import NewLife
from .errors import ActorDied

if TYPE_CHECKING:
    from .pool import RemotePool, _Actor


@dataclass(frozen=True)
class Fragment:
    """``T`` lockstep steps of the ``n`` envs of one actor (read-only arrays, time first).

    Attributes:
        obs: ``(T, n, *obs_shape)``, the observations the actions were taken on.
        actions: ``(T, n, *action_shape)``, what the policy returned.
        reward, terminated, truncated: ``(T, n)``, the results of those steps.
        next_obs: ``(n, *obs_shape)``, the observation after the last step (to bootstrap from;
            also the first ``obs`` of the actor's next fragment).
        env_id: ``(n,)``, the global env id of each column.
        info: ``(T, n)`` arrays: ``elapsed_step``, ``episode_return``, ``episode_length`` and
            the family's extras, as in ``Batch.info`` (flat names).
        policy_version: the ``set_weights`` version the policy had (0: as given).
        actor: the actor that ran it.

    Autoreset is the pool's: with ``"next_step"``, the step after an episode ends is its
    reset (its action is ignored, its reward 0), as in ``pool.step``.
    """

    obs: npt.NDArray[Any]
    actions: npt.NDArray[Any]
    reward: npt.NDArray[np.float64]
    terminated: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]
    next_obs: npt.NDArray[Any]
    env_id: npt.NDArray[np.int32]
    info: dict[str, npt.NDArray[Any]]
    policy_version: int
    actor: int


@dataclass(eq=False)
class _Lane:
    """Rollout state of one actor on the driver."""

    gen: int = 0
    seq: int = 0  # the next fragment call's number in this generation
    life: str | None = None  # the actor's incarnation its calls are for (None: not known yet)
    in_flight: int = 0
    answered: bool = True
    down_since: float = 0.0
    restarts: int = 0


class Rollouts:
    """Rollout mode of one RemotePool (made by ``RemotePool.rollouts``)."""

    def __init__(self, pool: RemotePool, policy: Any, horizon: int, depth: int) -> None:
        if horizon < 1 or depth < 1:
            raise ValueError(f"horizon={horizon}, depth={depth}: expected both >= 1")
        self.pool = pool
        self.policy = policy
        self.horizon = horizon
        self.depth = depth
        self.version = 0
        self._policy_ref = ray.put(policy)
        self._weights_ref: Any = None
        self._lanes = [_Lane(life=a.life) for a in pool._actors]
        self._pending: dict[asyncio.Future[Any], tuple[int, int]] = {}
        self._ready: deque[Fragment | BaseException] = deque()
        self._installs: list[tuple[Any, int]] = []  # set_policy / set_weights calls unread
        self._waits: dict[asyncio.Future[Any], int] = {}  # the same, awaitable on the loop
        for a in pool._actors:
            self._install(a)

    def _install(self, a: _Actor) -> None:
        self._installs.append((a.handle.set_policy.remote(self._policy_ref).future(), a.index))
        if self._weights_ref is not None:
            self._installs.append(
                (a.handle.set_weights.remote(self._weights_ref, self.version).future(), a.index))

    def set_weights(self, weights: Any) -> int:
        self.version += 1
        self._weights_ref = ray.put(weights)
        for a in self.pool._actors:
            if not a.dead:
                self._installs.append(
                    (a.handle.set_weights.remote(self._weights_ref, self.version).future(),
                     a.index))
        return self.version

    async def run(self) -> AsyncIterator[Fragment]:
        pool = self.pool
        while not pool.closed:
            if self._ready:
                item = self._ready.popleft()
                if isinstance(item, BaseException):
                    raise item
                yield item
                continue
            self._fill()
            if not self._pending:
                raise NothingInFlight("rollouts: every actor is dead, no fragment can come")
            loop = asyncio.get_running_loop()
            for cf, index in self._installs:
                wait = asyncio.wrap_future(cf, loop=loop)
                wait.add_done_callback(_retrieve)  # read even if the run ends before it does
                self._waits[wait] = index
            self._installs.clear()
            # An actor's fragments land in the order it made them (each continues the one
            # before): wait on the first one in flight of each actor's generation, then land
            # those done from the front. A set of done futures has no order.
            heads: dict[tuple[int, int], asyncio.Future[Any]] = {}
            for fut, key in self._pending.items():
                heads.setdefault(key, fut)
            done, _ = await asyncio.wait({*heads.values(), *self._waits},
                                         return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                if fut in self._waits:
                    self._installed(fut)
            blocked: set[tuple[int, int]] = set()
            for fut, key in list(self._pending.items()):  # in the order they were sent
                if key in blocked or not fut.done():
                    blocked.add(key)
                elif fut in self._pending:
                    self._land(fut)

    def _fill(self) -> None:
        """Keep ``depth`` fragments per live actor in flight or waiting to be taken."""
        held = [0] * len(self._lanes)
        for item in self._ready:
            if isinstance(item, Fragment):
                held[item.actor] += 1
        loop = asyncio.get_running_loop()
        for a, lane in zip(self.pool._actors, self._lanes, strict=True):
            while not a.dead and lane.in_flight + held[a.index] < self.depth:
                ref = a.handle.fragment.remote(self.horizon, lane.gen, lane.seq, lane.life)
                lane.seq += 1
                fut = asyncio.wrap_future(ref.future(), loop=loop)
                fut.add_done_callback(_retrieve)
                self._pending[fut] = (a.index, lane.gen)
                lane.in_flight += 1

    def _land(self, fut: asyncio.Future[Any]) -> None:
        index, gen = self._pending.pop(fut)
        a, lane = self.pool._actors[index], self._lanes[index]
        exc = fut.exception()
        if gen != lane.gen or self.pool.closed:
            return  # a generation given up on
        lane.in_flight -= 1
        if exc is None:
            lane.answered = True
            lane.life = fut.result()["life"]
            self._ready.append(_fragment(fut.result(), index))
        elif isinstance(exc, RayTaskError) and not isinstance(exc.cause, NewLife):
            # the policy (or the env) raised in the actor
            cause = exc.cause if isinstance(exc.cause, Exception) else exc
            self._ready.append(cause)
        else:
            self._failed(a, lane, exc)

    def _installed(self, fut: asyncio.Future[Any]) -> None:
        """A policy or weights push answered. If the actor could not take it (say, the
        policy's class does not import there), its fragments would wait for it forever:
        raise instead. A dead actor shows up on its fragments."""
        index = self._waits.pop(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        if isinstance(exc, RayTaskError) and not self.pool.closed:
            self._ready.append(RuntimeError(
                f"actor {index} could not take the policy or its weights (is the policy's "
                f"class importable there, or picklable by value?): {exc}"))
        lane = self._lanes[index]
        if exc is None and lane.life is None and isinstance(fut.result(), str):
            lane.life = fut.result()  # set_policy's answer: the life its next calls reach

    def _failed(self, a: _Actor, lane: _Lane, exc: BaseException) -> None:
        """The actor died or went away: its fragment in flight is lost."""
        pool = self.pool
        lane.gen += 1
        lane.seq = 0
        lane.life = None
        lane.in_flight = 0
        now = time.monotonic()
        new_run = lane.answered
        if new_run:
            lane.down_since = now
        lane.answered = False
        if (pool.restart and not isinstance(exc, ActorDiedError)
                and now - lane.down_since < pool._restart_timeout
                and (not new_run or lane.restarts < pool._max_restarts)):
            lane.restarts += new_run
            self._install(a)  # a restarted actor has neither the policy nor the weights
            return
        a.dead = True
        for fut, (index, _) in list(self._pending.items()):  # nothing of it can come now
            if index == a.index:
                del self._pending[fut]
        with contextlib.suppress(Exception):  # calls still queued there must not run on
            ray.kill(a.handle, no_restart=True)
        ids = list(a.ids)
        pool._lost[ids] = True
        # After its fragments already here (whole trajectories, nothing to send back): after
        # the death, nothing of the actor comes.
        self._ready.append(ActorDied(a.index, f"died during rollouts ({type(exc).__name__})",
                                     ids, ids, exc, pool.restart))


def _fragment(d: dict[str, Any], actor: int) -> Fragment:
    fields = dict(d["fields"])
    arrays = [d["obs"], d["actions"], d["next_obs"], d["env_id"], *fields.values()]
    for arr in arrays:
        if isinstance(arr, np.ndarray):
            arr.flags.writeable = False
    return Fragment(obs=d["obs"], actions=d["actions"], reward=fields.pop("reward"),
                    terminated=fields.pop("terminated"), truncated=fields.pop("truncated"),
                    next_obs=d["next_obs"], env_id=d["env_id"], info=fields,
                    policy_version=int(d["policy_version"]), actor=actor)


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Read a fragment's outcome even when nobody takes it any more (closed, abandoned)."""
    if not fut.cancelled():
        fut.exception()
