"""Model-based test of the pool contract: hypothesis draws random programs (sends, resets, every
kind of receive, parked, cancelled and concurrent receivers, tasks that hold batches unsent or
hand them to other tasks, crowds of consumers, step(), stream(), bad input, close) and runs each
on a pool of Counting-v0 and on a Python model of it. After every step:

- every env event arrives exactly once, in order per env (obs[:, 0] counts an env's events);
- every row equals the model's (obs, reward, terminated, truncated, env_id, the info fields and,
  with autoreset="same_step", final_obs / final_info), in all three autoreset modes;
- a receive fails with NothingInFlight exactly when no batch can come (a channel's rule): the
  rows in flight plus the rows held unsent by other tasks that are not themselves waiting in a
  receive can fill no batch (a batch holds exactly batch_size rows). Receivers parked ahead do
  not count (what they get, they may send back); they are served first (FIFO), so a later
  receive never takes a batch while they wait. Parked receivers get NothingInFlight promptly
  once the last rows that could serve them are released, dropped, or held by a task that ends
  by an exception or a cancellation;
- nothing hangs: every wait is bounded, and a hang fails with the program that caused it, with
  up to 4x more consumers than num_envs / batch_size can serve at once;
- batches already received never change, neither after later calls nor after close;
- bad input is refused with ValueError/TypeError and leaves the pool as it was; arrays in
  non-native byte order or with strides are converted or refused, never reinterpreted.

Holding is explicit: a batch the machine receives only to check it is released at once
(``batch.release()``), so it never counts as held; tasks that hold batches are modelled
(``Holder``): actors the machine drives (``Actor``) and the consumers of a crowd. An actor may
hand a batch to another actor or to the machine's main code (``Hold``): its rows stay the hold
of the task that received it, and end when whoever has it sends, releases or drops it, or when
that task ends by an exception or a cancellation. A send or reset to an env, from anywhere,
ends the hold of exactly that env's row, in the batch that holds it.

The model is deterministic: Counting-v0 is, and its reset draw (info["draw"]) is numpy's
PCG64 stream from SeedSequence(seed + env_id). Which rows share a batch, and when a batch is
ready, depend on the worker threads; the model checks only what the contract fixes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, NoReturn, TypeVar

import numpy as np
import numpy.typing as npt
import pytest
import uvloop
from hypothesis import HealthCheck, settings
from hypothesis import event as tally
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import aiopool

HANG = 5.0  # a wait the model says must end, bounded: longer is a hang
PROMPT = 2.0  # a call that must fail at once (NothingInFlight, PoolClosed), bounded
PARKED_TIMEOUT = 60.0  # recv(timeout=...) of parked receivers: never meant to fire
KEEP = 12  # received batches kept and compared after every step (and after close)
MAX_ENVS = 8
LOG_TAIL = 40

Array = npt.NDArray[Any]


class ContractViolation(AssertionError):
    """A check failed. Each kind is its own class, so hypothesis shrinks and reports each."""


class Hang(ContractViolation):
    """A wait the model says must end did not end."""


class MissingNothingInFlight(ContractViolation):
    """A receive that no batch can ever serve waited (or timed out) instead of raising."""


class SpuriousNothingInFlight(ContractViolation):
    """A receive raised NothingInFlight though a batch can come."""


class Stolen(ContractViolation):
    """A receive got a batch that receivers parked ahead of it are owed (FIFO), or one that
    cannot exist."""


class WrongRows(ContractViolation):
    """A received row differs from the model: lost, twice, out of order, or other values."""


class BadInputAccepted(ContractViolation):
    """Bad input was not refused."""


class Reinterpreted(ContractViolation):
    """An array in non-native byte order or with strides was read as something else."""


class BatchChanged(ContractViolation):
    """A batch already received changed (or became writeable)."""


class AfterClose(ContractViolation):
    """A call on a closed pool did not raise PoolClosed (or stream() did not end)."""


class Unexpected(ContractViolation):
    """A call ended in a way the contract does not allow (an unexpected exception)."""


class Boom(Exception):
    """A consumer's own error: its task ends by an exception while it holds batches."""


class Config(NamedTuple):
    num_envs: int
    batch_size: int
    num_threads: int
    autoreset: str
    episode_length: int
    max_episode_steps: int | None
    num_actions: int
    step_ns: int
    jitter_ns: int
    chunk: int
    recv_spin_us: float
    seed: int


@st.composite
def configs(draw: st.DrawFn) -> Config:
    num_envs = draw(st.integers(2, MAX_ENVS))
    # batch_size == num_envs half of the time: every send then fills at most one batch.
    batch_size = draw(st.one_of(st.just(num_envs), st.integers(1, num_envs)))
    return Config(
        num_envs=num_envs,
        batch_size=batch_size,
        num_threads=draw(st.sampled_from([1, 2])),
        autoreset=draw(st.sampled_from(["next_step", "same_step", "disabled"])),
        episode_length=draw(st.sampled_from([1, 2, 3, 5, 1000])),
        max_episode_steps=draw(st.sampled_from([None, -1, 2, 4])),
        num_actions=draw(st.sampled_from([1, 5, 1000, 2**62])),
        step_ns=draw(st.sampled_from([0, 20_000, 300_000])),
        jitter_ns=draw(st.sampled_from([0, 50_000])),
        chunk=draw(st.sampled_from([1, 3])),
        recv_spin_us=draw(st.sampled_from([0.0, 20.0, 200.0])),
        seed=draw(st.sampled_from([0, 1, 12345, 2**40])),
    )


# Fixed-shape draws (one entry per possible env), so that what hypothesis draws never depends on
# the timing of the worker threads: a rule applies them to the envs that are idle at the time.
MASKS = st.lists(st.booleans(), min_size=MAX_ENVS, max_size=MAX_ENVS)
ACTIONS = st.lists(st.one_of(st.integers(0, 9), st.integers(0, 2**62 - 1)),
                   min_size=MAX_ENVS, max_size=MAX_ENVS)
SEEDS = st.one_of(st.none(), st.integers(0, 2**40))
BAD_INPUTS = [
    "actions too long", "actions 2-d", "actions scalar", "actions float", "actions bool",
    "actions object", "actions str", "actions complex", "action -1", "action num_actions",
    "last action out of range", "env ids repeated", "env ids 2-d", "env ids float",
    "env ids bool", "env ids object", "env id num_envs", "env id -1", "actions for no env ids",
    "no actions for all envs", "send to a busy env", "send to an env never reset",
    "send to an ended env (disabled)", "reset a busy env", "reset seed -1", "reset seed 1.5",
    "reset env id num_envs", "reset env ids repeated", "step with a busy env",
    "step with a bad shape", "step indivisible", "recv(timeout=nan)",
    "recv_blocking(timeout=nan)", "empty send", "empty reset"]
ACTOR_CMDS = ["send", "send", "release", "drop", "recv", "recv", "raise", "cancel", "return",
              "give", "give"]
ACTOR_FINISH = ["send", "release", "drop", "raise", "return", "cancel"]  # in a crowd
CROWD_ACTS = ["send", "send", "send", "yield, send", "release", "drop", "hold", "raise"]
AFTER_CLOSE = ["send", "async_reset", "try_recv", "recv", "recv(timeout=1)",
               "recv_blocking(timeout=1)", "step", "stream", "close", "aclose", "batch.send"]


# -- the model ----------------------------------------------------------------------------


@dataclass
class Expected:
    """One row the pool owes: the env event it reports and every value it must hold."""

    env: int
    event: int
    values: dict[str, Any]
    how: str  # the order that produced it, for messages


class EnvModel:
    """Counting-v0 plus the runner's bookkeeping (runner.h) for one env, after every order the
    pool accepted; ``pending`` holds the rows those orders owe, oldest first."""

    def __init__(self, env_id: int, cfg: Config) -> None:
        self.id = env_id
        self.cfg = cfg
        self.staged_seed: int | None = cfg.seed + env_id  # make() stages seed + i
        self.rng: np.random.Generator | None = None
        self.events = 0
        self.episode = -1
        self.elapsed = 0
        self.last_action = -1
        self.draw = 0.0
        self.ret = 0.0
        self.length = 0
        self.ended = False  # the last step ended the episode
        self.was_reset = False
        self.pending: deque[Expected] = deque()
        self.last_delivered = 0  # event count of the last row received

    @property
    def idle(self) -> bool:
        return not self.pending

    @property
    def sendable(self) -> bool:
        return (self.idle and self.was_reset
                and not (self.ended and self.cfg.autoreset == "disabled"))

    def stage_seed(self, seed: int) -> None:
        self.staged_seed = seed + self.id

    def reset(self, how: str) -> None:
        """An explicit async_reset: applies a staged seed first."""
        if self.staged_seed is not None:
            self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
                self.staged_seed)))
            self.staged_seed = None
        self._reset_env()
        self.was_reset = True
        self._emit(0.0, False, False, 0, 0.0, 0, None, how)

    def step(self, action: int, how: str) -> None:
        cfg = self.cfg
        if self.ended and cfg.autoreset == "next_step":  # the action is ignored
            self._reset_env()
            self._emit(0.0, False, False, 0, 0.0, 0, None, how + " (autoreset: action ignored)")
            return
        assert self.rng is not None
        if cfg.jitter_ns > 0:
            self.rng.random()  # the jitter of a step draws from the env's stream
        self.events += 1
        self.elapsed += 1
        self.last_action = action
        reward = float(action)
        terminated = self.elapsed >= cfg.episode_length
        self.length += 1
        self.ret += reward
        limit = max(cfg.max_episode_steps or 0, 0)  # none: Counting-v0 registers no limit; -1
        truncated = limit > 0 and self.elapsed >= limit
        ended = terminated or truncated
        if ended and cfg.autoreset == "same_step":
            final = {"final_obs": (self.events, self.episode, self.elapsed, action),
                     "final_info.elapsed_step": self.elapsed, "final_info.draw": self.draw,
                     "final_info.events_parity": self.events % 2}
            ret, length = self.ret, self.length
            self._reset_env()
            self._emit(reward, terminated, truncated, 0, ret, length, final,
                       how + " (same_step: ends the episode and resets)")
            return
        self.ended = ended
        self._emit(reward, terminated, truncated, self.elapsed, self.ret, self.length, None, how)

    def _reset_env(self) -> None:
        assert self.rng is not None
        self.events += 1
        self.episode += 1
        self.elapsed = 0
        self.last_action = -1
        self.draw = float(self.rng.random())
        self.ret = 0.0
        self.length = 0
        self.ended = False

    def _emit(self, reward: float, terminated: bool, truncated: bool, elapsed_step: int,
              ret: float, length: int, final: dict[str, Any] | None, how: str) -> None:
        values: dict[str, Any] = {
            "obs": (self.events, self.episode, self.elapsed, self.last_action),
            "reward": reward, "terminated": terminated, "truncated": truncated,
            "elapsed_step": elapsed_step, "episode_return": ret, "episode_length": length,
            "draw": self.draw, "events_parity": self.events % 2}
        if self.cfg.autoreset == "same_step":
            values.update(final or {"final_obs": (0, 0, 0, 0), "final_info.elapsed_step": 0,
                                    "final_info.draw": 0.0, "final_info.events_parity": 0})
        self.pending.append(Expected(self.id, self.events, values, how))


def _row(batch: aiopool.Batch, r: int, same_step: bool) -> dict[str, Any]:
    info = batch.info
    got: dict[str, Any] = {
        "obs": tuple(int(x) for x in batch.obs[r]), "reward": float(batch.reward[r]),
        "terminated": bool(batch.terminated[r]), "truncated": bool(batch.truncated[r]),
        "elapsed_step": int(info["elapsed_step"][r]),
        "episode_return": float(info["episode_return"][r]),
        "episode_length": int(info["episode_length"][r]), "draw": float(info["draw"][r]),
        "events_parity": int(info["events_parity"][r])}
    if same_step:
        final = info["final_info"]
        got["final_obs"] = tuple(int(x) for x in info["final_obs"][r])
        got["final_info.elapsed_step"] = int(final["elapsed_step"][r])
        got["final_info.draw"] = float(final["draw"][r])
        got["final_info.events_parity"] = int(final["events_parity"][r])
    return got


def _arrays(batch: aiopool.Batch) -> dict[str, Array]:
    """Every array of a batch by name (info flattened: final_info.x)."""
    out: dict[str, Array] = {"obs": batch.obs, "reward": batch.reward,
                             "terminated": batch.terminated, "truncated": batch.truncated,
                             "env_id": batch.env_id}
    for name, value in batch.info.items():
        if isinstance(value, dict):
            out.update({f"{name}.{k}": v for k, v in value.items()})
        else:
            out[name] = value
    return out


@dataclass
class Kept:
    """A received batch, the arrays as received and copies of them. ``batch`` is None for a
    batch a task holds: the test must not keep it alive (dropping it releases it)."""

    batch: aiopool.Batch | None
    who: str
    originals: dict[str, Array]
    copies: dict[str, Array] = field(default_factory=dict)
    sent: bool = False  # by batch.send: a batch is sent once

    def __post_init__(self) -> None:
        self.copies = {k: np.array(v, copy=True) for k, v in self.originals.items()}

    def changes(self) -> list[str]:
        bad = []
        now = _arrays(self.batch) if self.batch is not None else {}
        for name, copy in self.copies.items():
            again = [("read again", now[name])] if name in now else []
            for label, arr in [("as received", self.originals[name]), *again]:
                if not np.array_equal(arr, copy):
                    bad.append(f"{name} ({label}) was {copy.tolist()}, is {arr.tolist()}")
                if arr.flags.writeable:
                    bad.append(f"{name} ({label}) is writeable")
        return bad


@dataclass(eq=False)
class Holder:
    """The model of a task that receives: the env ids of each batch handed to it whose rows are
    still held (not sent, reset, released or dropped, wherever the batch went since), and
    whether it waits in a receive (its rows cannot come back meanwhile, so they do not count for
    anyone). Compared by identity: two holders with the same name and rows are two tasks
    (``holders.remove`` must remove this one)."""

    name: str
    batches: list[set[int]] = field(default_factory=list)
    in_recv: bool = False
    may_fail: bool = False  # no batch could come at some moment of its current receive
    returned: bool = False  # its task returned: its batches count until they are dropped

    @property
    def rows(self) -> int:
        return sum(map(len, self.batches))

    def end(self, ids: set[int]) -> None:
        """The batch whose held rows are ``ids`` (this very set) was sent, released or dropped:
        none of its rows is held any more. A no-op once the task ended by an exception or a
        cancellation (the pool released its batches then)."""
        self.batches = [b for b in self.batches if b is not ids]


@dataclass(eq=False)
class Hold:
    """A batch a task has: received, or handed to it by the task that received it. The hold
    stays with the receiving task (``owner``) wherever the batch goes: ``ids`` is the very set
    in ``owner.batches``, its rows still held."""

    batch: aiopool.Batch
    ids: set[int]
    owner: Holder


@dataclass
class Receiver:
    """A receive parked on the pool: a recv() task, or an actor's receive (``task`` is then a
    future set when it ends, with ("batch", None) or (exception name, exception))."""

    task: asyncio.Future[Any]
    name: str
    holder: Holder
    actor: Actor | None = None
    cancelled: bool = False

    def outcome(self) -> tuple[str, Any]:
        if self.actor is None or self.task.cancelled():
            return PoolMachine.outcome(self.task)
        result: tuple[str, Any] = self.task.result()
        return result


class Actor:
    """A consumer task the machine drives: it receives batches and holds them unsent until it is
    told to send, release or drop one, to hand one to another actor or to the machine's main
    code (the rows stay its own hold), to receive again (holding what it has), to raise, or to
    return (what it holds then counts until the machine drops it). It updates the model itself,
    at the moment it acts. Cancelling its task is a cancellation while it holds batches."""

    def __init__(self, m: PoolMachine, name: str) -> None:
        self.m = m
        self.name = name
        self.holder = Holder(name)
        self.held: list[Hold] = []  # the only references to the batches it has, oldest first
        self.released: list[aiopool.Batch] = []  # released but kept: they must not count
        self.inbox: deque[tuple[str, Any, asyncio.Future[Any]]] = deque()
        self.wake = asyncio.Event()
        self.keep_after_return = True
        self.receives = 0
        self.task = m.loop.create_task(self.main())
        self.task.add_done_callback(self.ended)  # before the pool's own callback on the task

    def order(self, cmd: str, arg: Any = None) -> asyncio.Future[Any]:
        """Queue a command; the future is set when the actor has carried it out."""
        fut: asyncio.Future[Any] = self.m.loop.create_future()
        self.inbox.append((cmd, arg, fut))
        self.m.loop.call_soon(self.wake.set)
        return fut

    async def main(self) -> None:
        while True:
            while not self.inbox:
                self.wake.clear()
                await self.wake.wait()
            cmd, arg, fut = self.inbox[0]
            if cmd == "recv":
                await self.receive(fut)
            elif cmd == "raise":
                raise Boom(f"{self.name} fails holding {self.holder.rows} rows")
            elif cmd == "return":
                self.keep_after_return = bool(arg)
                return
            else:
                self.act(cmd, arg)
                fut.set_result(None)
            self.inbox.popleft()
            del fut

    async def receive(self, fut: asyncio.Future[Any]) -> None:
        m, h = self.m, self.holder
        who = f"{self.name} recv {self.receives} (holding {h.rows} rows)"
        self.receives += 1
        try:
            batch = await m.recv_as(h)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except Exception as e:  # NothingInFlight, PoolClosed; anything else is judged
            fut.set_result((type(e).__name__, e))
            return
        ids: set[int] = set()
        try:
            (ids,) = m.deliver([(batch, who)], hold=h)
        except ContractViolation as e:
            m.record(e)
        self.held.append(Hold(batch, ids, h))
        del batch
        fut.set_result(("batch", None))

    def act(self, cmd: str, arg: Any) -> None:
        """Send (``arg``: how), release, drop or give away (``arg``: to whom, and the list of
        what they have) the oldest batch it has."""
        if not self.held:
            return
        if cmd == "give":
            name, to = arg
            hold = self.held.pop(0)
            self.m.note(f"{self.name}: give env_id={hold.batch.env_id.tolist()} "
                        f"({self.m.whose(hold)}) to {name}")
            to.append(hold)
            return
        self.m.let_go(self.name, self.held, 0, cmd, arg, self.released)

    def drop_all(self) -> None:
        """Drop every batch it has (from outside its task)."""
        self.m.drop_holds(self.held)

    def ended(self, task: asyncio.Task[None]) -> None:
        """Its task ended: by an exception or a cancellation (the pool releases what it
        received, wherever it went; what it has is dropped), or by returning (what it has,
        and what it handed on, counts until dropped)."""
        exc = None if task.cancelled() else task.exception()
        for _, _, fut in self.inbox:
            fut.cancel()
        self.inbox.clear()
        if exc is not None and not isinstance(exc, Boom):
            self.m.record(exc if isinstance(exc, ContractViolation) else Unexpected(
                f"{self.name} ended with {type(exc).__name__}: {exc!r}"))
        if exc is None and not task.cancelled():
            self.holder.returned = True
            if not self.keep_after_return:
                self.drop_all()
            return
        self.drop_all()
        self.m.holder_gone(self.holder)


def _waiting(pool: aiopool.Pool) -> int | None:
    """Receivers parked in the pool's doorbell, when the pool tells (an internal)."""
    n = getattr(getattr(pool, "_doorbell", None), "num_waiting", None)
    return n if isinstance(n, int) else None


def _swapped(a: Array) -> list[int]:
    """What each element of an array in non-native byte order reads as if taken as native."""
    return [int(x) for x, y in zip(a.view(a.dtype.newbyteorder()).tolist(), a.tolist(),
                                   strict=True) if x != y]


# -- the state machine ----------------------------------------------------------------------

Rule = TypeVar("Rule", bound=Callable[..., None])


def guarded(closed_op: str | None) -> Callable[[Rule], Rule]:
    """Make a rule record the first contract violation instead of raising it; every later rule
    is then a no-op and teardown raises it. A timing-dependent failure may come a step earlier
    or later when hypothesis replays a program, and must not change what hypothesis draws
    (it would report inconsistent data generation instead of the failure). For the same
    reason rules have no preconditions on the pool's state: on a closed pool a rule checks
    that ``closed_op`` raises PoolClosed instead ("": nothing to do; None: run the rule)."""

    def decorate(body: Rule) -> Rule:
        @functools.wraps(body)
        def guarded_rule(self: PoolMachine, **kw: Any) -> None:
            if self.violation is not None or self.pool is None:
                return
            self.rules_run[body.__name__] += 1
            try:
                if not self.closed or closed_op is None:
                    body(self, **kw)
                elif closed_op:
                    self.after_close_check(closed_op)
                if not self.closed and self.violation is None:
                    self.expect_stranded()
            except Exception as e:
                self.record(e)

        return guarded_rule  # type: ignore[return-value]

    return decorate



class PoolMachine(RuleBasedStateMachine):
    """One example: a pool made by ``init``, a program of rules, then a drain and a close."""

    loop_factory: ClassVar[Callable[[], asyncio.AbstractEventLoop]] = asyncio.new_event_loop

    def __init__(self) -> None:
        super().__init__()
        self.loop = type(self).loop_factory()
        self.handler_calls: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _loop, ctx: self.handler_calls.append(ctx))
        self.pool: aiopool.Pool | None = None
        self.cfg: Config | None = None
        self.envs: list[EnvModel] = []
        self.parked: list[Receiver] = []  # in the pool's FIFO order
        self.holders: list[Holder] = []  # tasks that receive, hold, or are parked
        self.actors: list[Actor] = []
        self.actors_made = 0
        self.given: list[Hold] = []  # batches actors handed to the machine's main code
        self.released: list[aiopool.Batch] = []  # given, released, kept: they must not count
        self.eager = False  # settle parked receivers as soon as they end (in a crowd)
        self.kept: deque[Kept] = deque(maxlen=KEEP)
        self.log: list[str] = []
        self.closed = False
        self.maybe_given_back = False  # a cancelled receiver may have pushed a batch back
        self.any_reset_call = False  # the pool's _ever_reset: stream() resets a pool never reset
        self.empty_reset_accepted = False
        self.receivers_made = 0
        self.violation: Exception | None = None  # the first one; raised at teardown
        self.rules_run: collections.Counter[str] = collections.Counter()

    # -- plumbing -----------------------------------------------------------------------------

    @property
    def p(self) -> aiopool.Pool:
        assert self.pool is not None
        return self.pool

    @property
    def c(self) -> Config:
        assert self.cfg is not None
        return self.cfg

    def note(self, line: str) -> None:
        self.log.append(line)

    def fail(self, msg: str, kind: type[ContractViolation] = Unexpected) -> NoReturn:
        tail = self.log[-LOG_TAIL:]
        raise kind(f"{msg}\n  pool: {self.c}\n  program so far ({len(self.log)} lines, last "
                   f"{len(tail)}):\n    " + "\n    ".join(tail))

    def check(self, ok: bool, msg: str, kind: type[ContractViolation] = Unexpected) -> None:
        if not ok:
            self.fail(msg, kind)

    def record(self, e: BaseException) -> None:
        """A violation found inside a task: the first one is raised at teardown."""
        if self.violation is None:
            self.violation = e if isinstance(e, Exception) else Unexpected(repr(e))

    @property
    def rows_pending(self) -> int:
        """Rows sent and not yet delivered (in flight, ready, given back, or on their way to
        a parked receiver)."""
        return sum(len(e.pending) for e in self.envs)

    def held_rows(self, me: Holder | None = None) -> int:
        """Rows held unsent by holders other than ``me`` that do not wait in a receive."""
        return sum(h.rows for h in self.holders if not h.in_recv and h is not me)

    def held_envs(self) -> set[int]:
        return {i for h in self.holders for b in h.batches for i in b}

    def free(self, e: EnvModel) -> bool:
        """An env other rules may send to: idle, and in no batch a task holds."""
        return e.idle and all(e.id not in b for h in self.holders for b in h.batches)

    def can_come(self, me: Holder | None = None) -> bool:
        """Whether a batch can still come for a receive of ``me``: the rows undelivered and
        those other tasks hold and may still send fill one (parked receivers ahead do not
        matter: what they get, they may send back). Rows on their way to a parked receiver are
        undelivered here and held there: either way they count, and while any exist the sum
        is at least batch_size whichever receivers the pool still counts as parked."""
        return self.rows_pending + self.held_rows(me) >= self.c.batch_size

    def expect(self, me: Holder | None = None) -> str:
        """What a new receive of ``me`` does: "batch" (it gets one: every receiver parked
        ahead gets one first), "wait" (a batch can come, not now) or "none" (NothingInFlight at
        once)."""
        if self.rows_pending >= self.c.batch_size * (len(self.parked) + 1):
            return "batch"
        return "wait" if self.can_come(me) else "none"

    def mark_stranded(self) -> None:
        """Held or undelivered rows went away: if no batch can come now, every receiver waiting
        may get NothingInFlight (the pool checks them soon)."""
        if not self.can_come():
            for h in self.holders:
                if h.in_recv:
                    h.may_fail = True

    def holder_gone(self, h: Holder) -> None:
        h.batches.clear()
        if h in self.holders:
            self.holders.remove(h)
        self.mark_stranded()

    def end_rows(self, ids: list[int]) -> None:
        """A send or a reset to ``ids`` ends the hold of each one's held row, in the one batch
        that holds it (if any), whoever received it and wherever it went: its next row comes
        in a newer batch, so a later send to it is that batch's."""
        for i in ids:
            sets = [b for h in self.holders for b in h.batches if i in b]
            self.check(len(sets) <= 1, f"the model holds env {i}'s row in {len(sets)} batches")
            for b in sets:
                b.discard(i)

    @staticmethod
    def whose(hold: Hold) -> str:
        rows = len(hold.ids) if any(b is hold.ids for b in hold.owner.batches) else 0
        return f"received by {hold.owner.name}, {rows} rows held"

    def let_go(self, who: str, holds: list[Hold], i: int, cmd: str, via: str,
               released: list[aiopool.Batch]) -> None:
        """``who`` sends (``via`` batch.send or pool.send), releases (keeping it in
        ``released``) or drops the batch ``holds[i]``: the rows it still holds stop counting,
        whichever task received it."""
        hold = holds.pop(i)
        b = hold.batch
        self.note(f"{who}: {cmd} env_id={b.env_id.tolist()} ({self.whose(hold)})"
                  + (f" via {via}" if cmd == "send" else ""))
        hold.owner.end(hold.ids)
        if cmd == "send":
            self.send_back(b, via)
        elif cmd == "release":
            b.release()
            released.append(b)
        del hold, b  # "drop": the batch is garbage now
        self.mark_stranded()

    def drop_holds(self, holds: list[Hold]) -> None:
        """Drop every batch of ``holds``: the rows they still hold stop counting."""
        for hold in holds:
            hold.owner.end(hold.ids)
        holds.clear()
        self.mark_stranded()

    async def recv_as(self, h: Holder, timeout: float | None = None) -> aiopool.Batch:
        """``pool.recv()`` in the task that ``h`` models (its rows stop counting meanwhile)."""
        h.in_recv = True
        h.may_fail = not self.can_come(h)
        try:
            return await self.p.recv(timeout=timeout)
        finally:
            h.in_recv = False

    def why(self) -> str:
        held = self.held_rows()
        return (f"model: {self.rows_pending} rows undelivered, {held} rows held unsent by tasks "
                f"not waiting in a receive, {len(self.parked)} receivers parked ahead, "
                f"batch_size {self.c.batch_size}")

    def run(self, aw: Awaitable[Any], what: str, bound: float = HANG,
            kind: type[ContractViolation] = Hang) -> asyncio.Task[Any]:
        """Run ``aw`` on the loop for at most ``bound`` seconds; the finished task."""
        task = asyncio.ensure_future(aw, loop=self.loop)
        self.loop.run_until_complete(asyncio.wait([task], timeout=bound))
        if not task.done():
            task.cancel()
            self.loop.run_until_complete(asyncio.wait([task], timeout=1.0))
            self.fail(f"{what} was still waiting after {bound} s", kind)
        self.settle()
        return task

    def spin_loop(self, turns: int) -> None:
        async def spin() -> None:
            for _ in range(turns):
                await asyncio.sleep(0)

        self.run(spin(), f"{turns} turns of the loop", PROMPT)

    def new_receiver(self, aw: Awaitable[aiopool.Batch]) -> asyncio.Task[aiopool.Batch]:
        self.receivers_made += 1
        return asyncio.ensure_future(aw, loop=self.loop)

    def start_parked(self, who: str, expect: str, why: str, timeout: float | None) -> None:
        """A recv() task that stays parked in the pool's FIFO while later rules run (or ends
        at once, as ``expect`` says)."""
        h = Holder(who, in_recv=True, may_fail=expect == "none")
        self.holders.append(h)  # before it parks: a release meanwhile may strand it
        self.note(f"{who} ({self.says(expect)})")
        task = self.new_receiver(self.p.recv(timeout=timeout))
        self.park_until_registered(task, who, expect != "none")
        if task.done():
            self.holder_gone(h)
            self.judge(who, expect, why, *self.outcome(task))
            return
        self.check(expect != "none", f"{who} parked though no batch can come ({why}); it "
                   "would wait forever instead of raising NothingInFlight",
                   MissingNothingInFlight)
        self.parked.append(Receiver(task, who, h))
        task.add_done_callback(self.eager_settle)

    def actor_recv(self, a: Actor) -> None:
        """Actor ``a`` receives, holding what it holds."""
        expect, why = self.expect(a.holder), self.why()
        who = f"{a.name} recv #{a.receives} holding {a.holder.rows} rows"
        self.note(f"{who} ({self.says(expect)})")
        fut = a.order("recv")
        self.park_until_registered(fut, who, expect != "none")
        r = Receiver(fut, who, a.holder, a)
        if fut.done():
            what, value = r.outcome()
            if what == "batch":  # the actor delivered it
                self.check(expect == "batch", f"{who} got a batch though {self.no_batch(expect)}"
                           f" ({why})", Stolen)
            else:
                self.judge(who, expect, why, what, value)
            return
        self.check(expect != "none", f"{who} parked though no batch can come ({why}); it "
                   "would wait forever instead of raising NothingInFlight",
                   MissingNothingInFlight)
        self.parked.append(r)
        fut.add_done_callback(self.eager_settle)

    def eager_settle(self, _: asyncio.Future[Any]) -> None:
        """In a crowd, a parked receiver's batch is checked and released as soon as it comes
        (or the crowd would wait for it: a task that returned a batch may still send it)."""
        if self.eager and self.violation is None:
            try:
                self.settle()
            except Exception as e:
                self.record(e)

    @staticmethod
    def says(expect: str) -> str:
        return {"batch": "a batch can come for it", "wait": "a batch can come, but not before "
                "the receivers parked ahead are served: it waits",
                "none": "expect NothingInFlight"}[expect]

    @staticmethod
    def no_batch(expect: str) -> str:
        return ("every batch that can come is owed to the receivers parked ahead"
                if expect == "wait" else "no batch can exist")

    def park_until_registered(self, task: asyncio.Future[Any], what: str, expect: bool) -> None:
        """Run the loop until ``task`` has finished or waits in the pool's FIFO."""

        async def until() -> None:
            for i in range(1_000_000):
                unfinished = sum(not r.task.done() for r in self.parked) + (not task.done())
                n = _waiting(self.p)
                if task.done() or (n is not None and n >= unfinished) or (n is None and i >= 8):
                    return
                await asyncio.sleep(0 if i < 50 else 0.0005)

        self.run(until(), f"{what} neither finishing nor parking", PROMPT,
                 Hang if expect else MissingNothingInFlight)

    @staticmethod
    def outcome(task: asyncio.Future[Any]) -> tuple[str, Any]:
        if task.cancelled():
            return "cancelled", None
        exc = task.exception()
        if exc is None:
            return "batch", task.result()
        return type(exc).__name__, exc

    def judge(self, who: str, expect: str, why: str, what: str, value: Any,
              timeout_ok: bool = False, cancel_ok: bool = False) -> None:
        """Check how a receive ended against the model's expectation (taken before it ran; the
        receive ran alone: nothing else acted meanwhile)."""
        tally(f"{who.split(' #')[0].split(' recv ')[0]}: {what} (expected {expect})")
        if what == "batch":
            self.check(expect == "batch", f"{who} returned env_id={value.env_id.tolist()} though "
                       f"{self.no_batch(expect)} ({why})", Stolen)
            self.deliver([(value, who)])
        elif what == "NothingInFlight":
            self.check(expect == "none", f"{who} raised NothingInFlight though a batch can "
                       f"come ({why}): {value}", SpuriousNothingInFlight)
        elif what == "TimeoutError" and timeout_ok:
            self.check(expect != "none", f"{who} timed out instead of raising NothingInFlight "
                       f"at once ({why})", MissingNothingInFlight)
            self.maybe_given_back = True  # it may have held a batch when the timeout fired
        elif not (what == "cancelled" and cancel_ok):
            self.fail(f"{who} raised {what}: {value!r} ({why})")

    # -- delivery -----------------------------------------------------------------------------

    def deliver(self, got: list[tuple[aiopool.Batch, str]], size: int | None = None,
                ordered: bool = False, hold: Holder | None = None) -> list[set[int]]:
        """Check received batches against the model; the rows of one env in event order. Then
        release them (the machine only checks them), unless ``hold`` holds them unsent: the
        sets of env ids added to ``hold.batches`` then, one per batch."""
        size = self.c.batch_size if size is None else size
        same_step = self.c.autoreset == "same_step"
        rows: list[tuple[int, int, aiopool.Batch, int, str]] = []
        for batch, who in got:
            self.note(f"  -> {who}: env_id={batch.env_id.tolist()} "
                      f"events={batch.obs[:, 0].tolist()}")
            self.check_structure(batch, size, who)
            ids = batch.env_id.tolist()
            self.check(len(set(ids)) == len(ids), f"{who}: an env appears twice in one batch: "
                       f"env_id={ids}", WrongRows)
            if ordered:
                self.check(ids == list(range(size)), f"{who}: step() rows are not ordered by "
                           f"env_id: {ids}", WrongRows)
            rows += [(e, int(batch.obs[r, 0]), batch, r, who) for r, e in enumerate(ids)]
            self.kept.append(Kept(None if hold else batch, who, _arrays(batch)))
        for env_id, event, batch, r, who in sorted(rows, key=lambda x: (x[0], x[1])):
            self.check(0 <= env_id < self.c.num_envs, f"{who}: row {r} has env_id {env_id}",
                       WrongRows)
            env = self.envs[env_id]
            if not env.pending or env.pending[0].event != event:
                owed = [x.event for x in env.pending]
                if event <= env.last_delivered:
                    kind = f"DELIVERED TWICE (event {event} of env {env_id} already arrived)"
                elif event in owed:
                    earlier = owed[:owed.index(event)]
                    kind = f"OUT OF ORDER (env {env_id} still owes events {earlier})"
                else:
                    kind = f"NEVER SENT (env {env_id} owes events {owed})"
                self.fail(f"{who}: row {r} is env {env_id} event {event}: {kind}; batch "
                          f"env_id={batch.env_id.tolist()} events={batch.obs[:, 0].tolist()}",
                          WrongRows)
            exp = env.pending.popleft()
            actual = _row(batch, r, same_step)
            diff = {k: (actual[k], v) for k, v in exp.values.items() if actual[k] != v}
            if diff:
                self.fail(f"{who}: row {r} (env {env_id}, event {event}, from {exp.how}) differs "
                          "from the model: " + ", ".join(f"{k}: got {g!r}, expected {e!r}"
                                                         for k, (g, e) in diff.items()), WrongRows)
            env.last_delivered = event
        if self.rows_pending < self.c.batch_size:
            self.maybe_given_back = False  # no whole batch is left anywhere
        held: list[set[int]] = []
        for batch, _ in got:
            if hold is not None:
                held.append(set(batch.env_id.tolist()))
                hold.batches.append(held[-1])
            else:
                batch.release()
        self.mark_stranded()
        return held

    def check_structure(self, batch: aiopool.Batch, size: int, who: str) -> None:
        self.check(len(batch) == size, f"{who}: a batch of {len(batch)} rows, expected {size}",
                   WrongRows)
        arrays = _arrays(batch)
        want = {"obs": (np.int64, (size, 4)), "reward": (np.float64, (size,)),
                "terminated": (np.bool_, (size,)), "truncated": (np.bool_, (size,)),
                "env_id": (np.int32, (size,)), "elapsed_step": (np.int32, (size,)),
                "episode_return": (np.float64, (size,)), "episode_length": (np.int32, (size,)),
                "draw": (np.float64, (size,)), "events_parity": (np.int32, (size,))}
        if self.c.autoreset == "same_step":
            want |= {"final_obs": (np.int64, (size, 4)),
                     "final_info.elapsed_step": (np.int32, (size,)),
                     "final_info.draw": (np.float64, (size,)),
                     "final_info.events_parity": (np.int32, (size,))}
        self.check(set(arrays) == set(want), f"{who}: fields {sorted(arrays)}, expected "
                   f"{sorted(want)}", WrongRows)
        for name, (dtype, shape) in want.items():
            a = arrays[name]
            self.check(a.dtype == dtype and a.shape == shape, f"{who}: {name} has dtype "
                       f"{a.dtype} and shape {a.shape}, expected {np.dtype(dtype)} {shape}",
                       WrongRows)
            self.check(not a.flags.writeable, f"{who}: {name} is writeable", BatchChanged)

    def settle(self) -> None:
        """Account for parked receivers that finished (loop-free: a callback may call it)."""
        done = [r for r in self.parked if r.task.done()]
        if not done:
            return
        self.parked = [r for r in self.parked if not r.task.done()]
        got = []
        for r in done:
            what, value = r.outcome()
            if r.actor is None:
                self.holder_gone(r.holder)
            if what == "batch":
                if r.actor is None:  # an actor checks what it gets itself
                    got.append((value, r.name))
            elif what == "cancelled" and (r.cancelled or r.actor is not None):  # its task was
                self.note(f"  -> {r.name}: cancelled")
            elif what == "PoolClosed" and self.closed:
                self.note(f"  -> {r.name}: PoolClosed")
            elif what == "NothingInFlight":
                self.note(f"  -> {r.name}: NothingInFlight")
                self.check(r.holder.may_fail, f"{r.name}, parked in the pool, got "
                           f"NothingInFlight though a batch could come all along ({self.why()}):"
                           f" {value}", SpuriousNothingInFlight)
            else:
                self.fail(f"{r.name}, parked in the pool, ended with {what}: {value!r}")
        if got:
            self.deliver(got)

    # -- orders -------------------------------------------------------------------------------

    def model_send(self, ids: list[int], actions: list[int], how: str) -> None:
        self.end_rows(ids)
        for i, a in zip(ids, actions, strict=True):
            self.envs[i].step(a, f"{how}: action {a}")

    def model_reset(self, ids: list[int], seed: int | None, how: str) -> None:
        self.any_reset_call = True
        self.end_rows(ids)
        for i in ids:
            if seed is not None:
                self.envs[i].stage_seed(seed)
            self.envs[i].reset(f"{how} (seed={seed})")

    def pick(self, mask: list[bool], ok: Callable[[EnvModel], bool]) -> list[int]:
        """The envs ``mask`` selects among those ``ok`` accepts; all of those if none."""
        candidates = [e.id for e in self.envs if ok(e)]
        chosen = [i for i in candidates if mask[i]]
        return chosen or candidates

    def actions_for(self, ids: list[int], vals: list[int]) -> list[int]:
        return [v % self.c.num_actions for v in vals[:len(ids)]]

    def send_back(self, batch: aiopool.Batch, via: str = "pool.send") -> None:
        """What a policy does with a batch: act for its envs, and reset those that ended when
        autoreset is disabled (``via="batch.send"``: with ``batch.send`` when it can)."""
        ids = [i for i in batch.env_id.tolist() if self.envs[i].sendable]
        ended = [i for i in batch.env_id.tolist()
                 if self.envs[i].idle and self.envs[i].was_reset and not self.envs[i].sendable]
        actions = [(self.envs[i].events * 7 + i) % self.c.num_actions for i in ids]
        if ids and via == "batch.send" and len(ids) == len(batch):
            batch.send(np.array(actions, dtype=np.int64))
            self.model_send(ids, actions, "a consumer's batch.send")
        elif ids:
            self.p.send(np.array(actions, dtype=np.int64), np.array(ids, dtype=np.int32))
            self.model_send(ids, actions, "a consumer's send")
        if ended:
            self.p.async_reset(env_ids=ended)
            self.model_reset(ended, None, "a consumer's async_reset")

    # -- rules: making, sending ---------------------------------------------------------------

    @initialize(cfg=configs())
    def init(self, cfg: Config) -> None:
        self.cfg = cfg
        self.pool = aiopool.make(
            "Counting-v0", num_envs=cfg.num_envs, batch_size=cfg.batch_size,
            num_threads=cfg.num_threads, seed=cfg.seed, autoreset=cfg.autoreset,
            max_episode_steps=cfg.max_episode_steps, recv_spin_us=cfg.recv_spin_us,
            episode_length=cfg.episode_length, num_actions=cfg.num_actions,
            step_ns=cfg.step_ns, jitter_ns=cfg.jitter_ns, chunk=cfg.chunk)
        self.envs = [EnvModel(i, cfg) for i in range(cfg.num_envs)]
        self.note("make(...)")

    @rule(mask=MASKS, vals=ACTIONS,
          form=st.sampled_from(["all", "list", "int32", "int64", "uint16", "batch.send"]))
    @guarded("send")
    def send(self, mask: list[bool], vals: list[int], form: str) -> None:
        self.settle()
        ids = self.pick(mask, lambda e: e.sendable and self.free(e))
        if not ids:
            self.note("send: skipped, no env can take an action")
            return
        actions = self.actions_for(ids, vals)
        kept = next((k for k in reversed(self.kept) if k.batch is not None and not k.sent
                     and all(self.envs[i].sendable and self.free(self.envs[i])
                             for i in k.batch.env_id.tolist())), None)
        if form == "batch.send" and kept is not None and kept.batch is not None:
            ids = kept.batch.env_id.tolist()
            actions = self.actions_for(ids, vals)
            self.note(f"batch.send({actions}) to env_id={ids}")
            kept.batch.send(np.array(actions, dtype=np.int64))
            kept.sent = True
        elif form == "all" and len(ids) == self.c.num_envs:
            self.note(f"send({actions})")
            self.p.send(np.array(actions, dtype=np.int64))
        else:
            dtype = {"int32": np.int32, "int64": np.int64, "uint16": np.uint16}.get(form)
            if dtype is np.uint16 and max(actions, default=0) > 65535:
                dtype = np.uint64
            if dtype is np.int32 and max(actions, default=0) > 2**31 - 1:
                dtype = np.int64  # the values must fit the dtype the test chose
            a: Any = actions if dtype is None else np.array(actions, dtype=dtype)
            i: Any = ids if dtype is None else np.array(ids, dtype=np.int64)
            self.note(f"send({actions}, env_ids={ids}) as {form}")
            self.p.send(a, i)
        self.model_send(ids, actions, "send")

    @rule(mask=MASKS, seed=SEEDS, every=st.booleans())
    @guarded("async_reset")
    def async_reset(self, mask: list[bool], seed: int | None, every: bool) -> None:
        self.settle()
        if every and all(self.free(e) for e in self.envs):
            self.note(f"async_reset(seed={seed})")
            self.p.async_reset(seed=seed)
            self.model_reset(list(range(self.c.num_envs)), seed, "async_reset")
            return
        ids = self.pick(mask, self.free)
        if not ids:
            self.note("async_reset: skipped, no env is idle")
            return
        self.note(f"async_reset(seed={seed}, env_ids={ids})")
        self.p.async_reset(seed=seed, env_ids=ids)
        self.model_reset(ids, seed, "async_reset")

    # -- rules: receiving ---------------------------------------------------------------------

    @rule(kind=st.sampled_from(["recv()", "recv(timeout=0)", "recv(timeout=0.0005)",
                                "recv(timeout=30)", "try_recv()", "recv_blocking(timeout=0)",
                                "recv_blocking(timeout=0.002)", "recv_blocking(timeout=5)"]))
    @guarded("recv")
    def receive(self, kind: str) -> None:
        self.settle()
        expect, why = self.expect(), self.why()
        who = f"{kind} #{self.receivers_made}"
        timeout = {"recv()": None, "recv(timeout=0)": 0.0, "recv(timeout=0.0005)": 0.0005,
                   "recv(timeout=30)": 30.0, "recv_blocking(timeout=0)": 0.0,
                   "recv_blocking(timeout=0.002)": 0.002, "recv_blocking(timeout=5)": HANG,
                   "try_recv()": None}[kind]
        if expect == "wait" and kind in ("recv()", "recv(timeout=30)"):
            self.start_parked(f"{who}, parked", expect, why, timeout)  # a late receive waits
            return
        if expect == "wait" and timeout == HANG:
            timeout = 0.002  # it would wait the whole timeout
            who += " as recv_blocking(timeout=0.002)"
        self.receivers_made += 1
        self.note(f"{who} ({self.says(expect)})")
        if kind == "try_recv()":
            batch = self.p.try_recv()
            if batch is not None:
                self.judge(who, expect, why, "batch", batch)
            return
        if kind.startswith("recv_blocking"):
            try:
                what, value = "batch", self.p.recv_blocking(timeout=timeout)
            except Exception as e:
                what, value = type(e).__name__, e
            if what == "TimeoutError" and timeout == HANG:
                self.fail(f"{who} waited {HANG} s and timed out" + (
                    f" though a batch can come ({why})" if expect == "batch" else
                    f" instead of raising NothingInFlight at once ({why})"),
                    Hang if expect == "batch" else MissingNothingInFlight)
            self.judge(who, expect, why, what, value, timeout_ok=True)
            return
        task = self.run(self.p.recv(timeout=timeout), (
            f"{who}, which can get a batch ({why})," if expect != "none" else
            f"{who}, which should have raised NothingInFlight at once ({why}),"),
            HANG if expect != "none" else PROMPT, Hang if expect != "none"
            else MissingNothingInFlight)
        what, value = self.outcome(task)
        self.judge(who, expect, why, what, value, timeout_ok=timeout is not None and timeout < 1)

    @rule(n=st.integers(1, 2), with_timeout=st.booleans())
    @guarded("recv(timeout=1)")
    def park(self, n: int, with_timeout: bool) -> None:
        """Receivers that wait in the pool's FIFO while later rules run."""
        for _ in range(n):
            self.settle()
            expect, why = self.expect(), self.why()
            kind = f"recv(timeout={PARKED_TIMEOUT})" if with_timeout else "recv()"
            self.start_parked(f"parked {kind} #{self.receivers_made}", expect, why,
                              PARKED_TIMEOUT if with_timeout else None)

    @rule()
    @guarded("")
    def wait_parked(self) -> None:
        self.await_parked()

    def await_parked(self) -> None:
        """The receivers parked first get the batches that can come (FIFO); the others wait
        on (for rows other tasks hold), or get NothingInFlight once none can come."""
        self.settle()
        k = min(len(self.parked), self.rows_pending // self.c.batch_size)
        if not k:
            return
        why = self.why()
        self.note(f"wait for the first {k} of the {len(self.parked)} parked receivers")
        self.run(asyncio.wait([r.task for r in self.parked[:k]]),
                 f"the first {k} parked receivers, each owed a batch ({why}),")

    def expect_stranded(self) -> None:
        """Parked receivers get NothingInFlight promptly once no batch can come for them."""
        self.settle()
        if not self.parked or self.can_come():
            return
        self.mark_stranded()
        why = self.why()
        self.note(f"no batch can come any more ({why}): the {len(self.parked)} parked "
                  "receivers must get NothingInFlight")
        self.run(asyncio.wait([r.task for r in self.parked]),
                 f"{len(self.parked)} parked receivers that no batch can serve any more ({why}),"
                 " which should have got NothingInFlight promptly,", PROMPT,
                 MissingNothingInFlight)

    @rule(ms=st.sampled_from([0.2, 2.0]), loop_runs=st.booleans())
    @guarded("")
    def idle(self, ms: float, loop_runs: bool) -> None:
        """Let time pass with the loop running (its callbacks run) or busy (they wait)."""
        self.note(f"{'await asyncio.sleep' if loop_runs else 'time.sleep'}({ms / 1000})")
        if loop_runs:
            self.run(asyncio.sleep(ms / 1000), "asyncio.sleep")
        else:
            time.sleep(ms / 1000)

    @rule(index=st.integers(0, 7))
    @guarded("")
    def cancel_parked(self, index: int) -> None:
        self.settle()
        if not self.parked:
            return
        r = self.parked[index % len(self.parked)]
        self.note(f"cancel {r.name}" + (f" (its task, holding {r.holder.rows} rows)"
                                        if r.actor is not None else ""))
        r.cancelled = True
        self.maybe_given_back = True
        if r.actor is not None:
            r.actor.task.cancel()
            self.run(asyncio.wait([r.actor.task]), f"cancelled {r.actor.name}", PROMPT)
        else:
            r.task.cancel()
            self.run(asyncio.wait([r.task]), f"cancelled {r.name}", PROMPT)

    @rule(turns=st.integers(0, 3), with_timeout=st.booleans())
    @guarded("recv")
    def cancel_recv(self, turns: int, with_timeout: bool) -> None:
        """A receiver cancelled after ``turns`` turns of the loop: nothing may be lost."""
        self.settle()
        expect, why = self.expect(), self.why()
        who = f"recv #{self.receivers_made}, cancelled after {turns} loop turns"
        self.note(who)
        task = self.new_receiver(self.p.recv(timeout=30.0 if with_timeout else None))
        self.spin_loop(turns)
        task.cancel()
        self.maybe_given_back = True
        self.run(asyncio.wait([task]), who, PROMPT)
        self.judge(who, expect, why, *self.outcome(task), cancel_ok=True)

    # -- rules: tasks that hold batches -------------------------------------------------------

    @rule(reset=st.booleans(), give=st.booleans(), to=st.integers(0, 3))
    @guarded("recv")
    def hold(self, reset: bool, give: bool, to: int) -> None:
        """A new actor receives a batch and holds it unsent, or hands it at once to another
        actor or to the machine's main code (``give``); the envs no task holds are reset first
        (``reset``), as a consumer starts. With 3 actors alive, one that has no batch and is not
        receiving receives instead (or none)."""
        self.settle()
        live = [a for a in self.actors if not a.task.done()]
        idle = [a for a in live if not a.held and not any(r.actor is a for r in self.parked)]
        if len(live) >= 3 and not idle:
            return
        ids = [e.id for e in self.envs if self.free(e)]
        if reset and ids:
            self.note(f"async_reset(env_ids={ids})")
            self.p.async_reset(env_ids=ids)
            self.model_reset(ids, None, "async_reset before an actor starts")
        if len(live) >= 3:
            a = idle[to % len(idle)]
        else:
            a = Actor(self, f"actor {self.actors_made}")  # never reused: the log names one task
            self.actors_made += 1
            self.actors.append(a)
            self.holders.append(a.holder)
        self.actor_recv(a)
        if give and a.held:
            self.note(f"{a.name} holding {a.holder.rows} rows: give")
            self.run(a.order("give", self.give_to(a, to)), f"{a.name}: give", PROMPT)

    def give_to(self, a: Actor, to: int) -> tuple[str, list[Hold]]:
        """Whom actor ``a`` hands a batch to: another live actor, or the machine's main code."""
        targets: list[tuple[str, list[Hold]]] = [
            (b.name, b.held) for b in self.actors if b is not a and not b.task.done()]
        targets.append(("the main task", self.given))
        return targets[to % len(targets)]

    @rule(index=st.integers(0, 7), cmd=st.sampled_from(ACTOR_CMDS),
          via=st.sampled_from(["batch.send", "pool.send"]), to=st.integers(0, 3))
    @guarded("recv")
    def actor_acts(self, index: int, cmd: str, via: str, to: int) -> None:
        """An actor sends, releases or drops the oldest batch it has, hands it to another actor
        or to the machine's main code (its rows stay the actor's hold), receives again while it
        holds its batches, raises, is cancelled, or returns (keeping its batches counted until
        the machine drops them)."""
        self.settle()
        self.actors = [a for a in self.actors if not a.task.done() or a.held]
        self.holders = [h for h in self.holders if not h.returned or h.rows]
        if not self.actors:
            return
        a = self.actors[index % len(self.actors)]
        if a.task.done():
            self.note(f"drop the {len(a.held)} batches {a.name} returned ({a.holder.rows} rows "
                      "of its own held)")
            a.drop_all()
            return
        receiving = [r for r in self.parked if r.actor is a]
        if receiving:
            if cmd == "cancel":
                self.note(f"cancel {a.name} (holding {a.holder.rows} rows) in its receive")
                receiving[0].cancelled = True
                self.maybe_given_back = True
                a.task.cancel()
                self.run(asyncio.wait([a.task]), f"cancelled {a.name}", PROMPT)
            return
        if cmd in ("send", "release", "drop", "give") and not a.held:
            cmd = "recv"
        if cmd == "recv":
            self.actor_recv(a)
            return
        self.note(f"{a.name} holding {a.holder.rows} rows, with {len(a.held)} batches: {cmd}")
        if cmd == "cancel":
            a.task.cancel()
        elif cmd in ("raise", "return"):
            a.order(cmd, True)
        else:
            arg = self.give_to(a, to) if cmd == "give" else via
            self.run(a.order(cmd, arg), f"{a.name}: {cmd}", PROMPT)
            return
        self.run(asyncio.wait([a.task]), f"{a.name}: {cmd}", PROMPT)

    @rule(index=st.integers(0, 7), cmd=st.sampled_from(["send", "send", "release", "drop"]),
          via=st.sampled_from(["batch.send", "pool.send"]))
    @guarded("send")
    def main_acts(self, index: int, cmd: str, via: str) -> None:
        """The machine's main code sends, releases or drops a batch an actor handed to it: the
        rows it still holds stop counting for the actor that received it (unless that actor
        ended by an exception or a cancellation: they stopped then; a released batch may still
        be sent)."""
        self.settle()
        if self.given:
            self.let_go("the main task", self.given, index % len(self.given), cmd, via,
                        self.released)

    @rule(mask=MASKS, vals=ACTIONS, seed=SEEDS,
          how=st.sampled_from(["send", "send", "send all", "reset", "reset all"]))
    @guarded("send")
    def order_held(self, mask: list[bool], vals: list[int], seed: int | None, how: str) -> None:
        """``pool.send`` or ``async_reset`` from the main code to envs whose rows batches held
        by tasks hold (and to free envs): each ends the hold of exactly that env's row, in the
        batch that holds it; the holder's later send of that batch goes to the envs that can
        take it, and a second send to an env is the newer batch's."""
        self.settle()
        held = self.held_envs()
        reset = how.startswith("reset")

        def ok(e: EnvModel) -> bool:
            return (e.idle if reset else e.sendable) and (e.id in held or self.free(e))

        candidates = [e.id for e in self.envs if ok(e)]
        mine = [i for i in candidates if i in held]
        if not mine:
            return
        if how.endswith("all") and len(candidates) == self.c.num_envs:
            ids = candidates
            if reset:
                self.note(f"async_reset(seed={seed}), {len(mine)} of the rows held")
                self.p.async_reset(seed=seed)
                self.model_reset(ids, seed, "async_reset of held rows")
            else:
                actions = self.actions_for(ids, vals)
                self.note(f"send({actions}), {len(mine)} of the rows held")
                self.p.send(np.array(actions, dtype=np.int64))
                self.model_send(ids, actions, "send to held rows")
            return
        ids = [i for i in candidates if mask[i]] or candidates
        if not any(i in held for i in ids):
            ids = sorted([*ids, mine[sum(vals) % len(mine)]])
        if reset:
            self.note(f"async_reset(seed={seed}, env_ids={ids}), held: "
                      f"{[i for i in ids if i in held]}")
            self.p.async_reset(seed=seed, env_ids=ids)
            self.model_reset(ids, seed, "async_reset of held rows")
        else:
            actions = self.actions_for(ids, vals)
            self.note(f"send({actions}, env_ids={ids}), held: {[i for i in ids if i in held]}")
            self.p.send(np.array(actions, dtype=np.int64), np.array(ids, dtype=np.int32))
            self.model_send(ids, actions, "send to held rows")

    # -- rules: several consumers -------------------------------------------------------------

    @rule(mult=st.integers(1, 4), extra=st.integers(0, 1), rounds=st.integers(1, 4),
          acts=st.lists(st.sampled_from(CROWD_ACTS), min_size=16, max_size=16),
          cancels=st.lists(st.tuples(st.integers(0, 31), st.integers(0, 8)), max_size=3),
          finish=st.lists(st.sampled_from(ACTOR_FINISH), min_size=3, max_size=3))
    @guarded("try_recv")
    def consumers(self, mult: int, extra: int, rounds: int, acts: list[str],
                  cancels: list[tuple[int, int]], finish: list[str]) -> None:
        """1-4x as many consumers as num_envs / batch_size can serve at once, receiving
        together; each sends back, releases, drops or holds (and receives again holding) what
        it gets, or raises; some are cancelled. The actors finish meanwhile. Nobody hangs, and
        NothingInFlight comes only when no batch could come."""
        self.settle()
        c = self.c
        n = mult * max(1, c.num_envs // c.batch_size) + extra
        why = self.why()
        self.note(f"{n} consumers x {rounds} recv(): {acts[:n]}, cancel {cancels}")
        finishing: list[asyncio.Future[Any]] = []
        if self.given:
            self.note(f"  the {len(self.given)} batches handed to the main task will be dropped")
            self.loop.call_soon(self.drop_holds, self.given)
        for i, a in enumerate(self.actors):
            how = finish[i % len(finish)]
            if a.task.done():  # it returned: the batches it holds count until dropped
                self.note(f"  the {len(a.held)} batches {a.name} returned will be dropped")
                self.loop.call_soon(a.drop_all)
                continue
            self.note(f"  {a.name} holding {a.holder.rows} rows will {how}")
            if how == "cancel":
                self.loop.call_soon(a.task.cancel)
                finishing.append(a.task)
            elif how in ("raise", "return"):
                finishing.append(a.order(how, False))
            else:  # every batch it holds, and the one it may be receiving
                finishing += [a.order(how, "pool.send") for _ in range(len(a.held) + 1)]

        doing: dict[int, str] = {}

        async def consume(cid: int, h: Holder) -> None:
            held: list[aiopool.Batch] = []
            try:
                for k in range(rounds):
                    act = acts[(cid * 5 + k) % len(acts)]
                    who = f"consumer {cid} recv {k} (holding {h.rows} rows)"
                    doing[cid] = f"in {who}, then {act}"
                    try:
                        batch = await self.recv_as(h)
                    except aiopool.NothingInFlight as e:
                        self.check(h.may_fail, f"{who} raised NothingInFlight though a batch "
                                   f"could come all along ({self.why()}): {e}",
                                   SpuriousNothingInFlight)
                        break
                    self.deliver([(batch, who)], hold=h)
                    held.append(batch)
                    del batch
                    if act == "hold":
                        continue
                    if act == "yield, send":
                        await asyncio.sleep(0)
                    if act == "raise":
                        raise Boom(f"consumer {cid} fails holding {h.rows} rows")
                    b = held.pop()
                    h.batches.pop()
                    if act == "release":
                        b.release()
                    elif act != "drop":
                        self.send_back(b)
                    del b  # dropped: what it still held (envs reset, a release) stops counting
                    self.mark_stranded()
            except ContractViolation as e:
                self.record(e)
            doing[cid] = "returned"
            held.clear()  # returning: what it holds is dropped
            self.holder_gone(h)

        def ended(h: Holder, t: asyncio.Task[None]) -> None:
            exc = None if t.cancelled() else t.exception()
            if exc is not None and not isinstance(exc, Boom):
                self.record(Unexpected(f"{h.name} ended with {type(exc).__name__}: {exc!r}"))
            self.holder_gone(h)  # ended by an exception or cancelled: nothing it held counts

        async def crowd() -> None:
            tasks = []
            for cid in range(n):
                h = Holder(f"consumer {cid}")
                self.holders.append(h)
                tasks.append(self.loop.create_task(consume(cid, h)))
                tasks[-1].add_done_callback(functools.partial(ended, h))
            for j, turns in cancels:
                for _ in range(turns):
                    await asyncio.sleep(0)
                tasks[j % n].cancel()
            await asyncio.wait(tasks)

        self.eager = True
        try:
            try:
                self.run(crowd(), f"{n} concurrent consumers ({why} at the start)")
            except Hang as e:
                p = self.p
                pool_says = (f"pool: {_waiting(p)} waiting, rows_in_flight "
                             f"{getattr(getattr(p, '_native', None), 'rows_in_flight', '?')}, "
                             f"{len(getattr(getattr(p, '_holders', None), '_held', ()))} "
                             "batches counted as held")
                raise Hang(f"{e}\n  then ({self.why()}; {pool_says}):\n    " + "\n    ".join(
                    f"consumer {c}: {d}" for c, d in sorted(doing.items()))) from None
            if finishing:
                self.run(asyncio.wait(finishing), f"the actors finishing ({self.why()})")
        finally:
            self.eager = False

    @rule(k=st.integers(1, 4))
    @guarded("stream")
    def stream(self, k: int) -> None:
        self.settle()
        never = not self.any_reset_call
        if never and self.empty_reset_accepted:
            return  # whether async_reset(env_ids=[]) counts as a reset is not part of the contract
        self.note(f"stream() for {k} batches, acting on each"
                  + (" (it resets every env first)" if never else ""))
        if never:  # stream() resets a pool that was never reset; no env is busy then
            self.model_reset(list(range(self.c.num_envs)), None, "stream()'s first reset")

        async def body() -> None:
            async with contextlib.aclosing(self.p.stream()) as s:
                for j in range(k):
                    expect, why = self.expect(), self.why()
                    who = f"stream() batch {j}"
                    if expect == "wait":
                        self.note(f"{who}: not asked for (it would wait: {why})")
                        return
                    try:
                        batch = await anext(s)
                    except aiopool.NothingInFlight as e:
                        self.judge(who, expect, why, "NothingInFlight", e)
                        return
                    self.judge(who, expect, why, "batch", batch)
                    self.send_back(batch)

        self.run(body(), f"stream() ({self.why()})").result()

    # -- rules: step() ------------------------------------------------------------------------

    @rule(vals=ACTIONS, cancel_after=st.one_of(st.none(), st.integers(1, 3)))
    @guarded("step")
    def step(self, vals: list[int], cancel_after: int | None) -> None:
        self.settle()
        n = self.c.num_envs
        if (n % self.c.batch_size or self.parked or self.held_envs()
                or not all(e.sendable for e in self.envs)):
            return
        actions = self.actions_for(list(range(n)), vals)
        self.note(f"step({actions})" + (f", cancelled after {cancel_after} loop turns"
                                        if cancel_after is not None else ""))
        coro = self.p.step(np.array(actions, dtype=np.int64))
        if cancel_after is None:
            task = self.run(coro, "step() with every env idle")
        else:
            task = asyncio.ensure_future(coro, loop=self.loop)
            self.spin_loop(cancel_after)  # step() sends on its first turn
            task.cancel()
            self.maybe_given_back = True
            self.run(asyncio.wait([task]), "cancelled step()", PROMPT)
        self.model_send(list(range(n)), actions, "step()")
        what, value = self.outcome(task)
        if what == "batch":
            self.deliver([(value, "step()")], size=n, ordered=True)
        elif what != "cancelled" or cancel_after is None:
            self.fail(f"step() raised {what}: {value!r}")

    # -- rules: bad input ---------------------------------------------------------------------

    def refused(self, call: Callable[[], Any], what: str,
                suspicious: list[int] | None = None) -> bool:
        """Run a call the pool may refuse; True if it raised ValueError or TypeError. A message
        naming a reinterpreted value (``suspicious``) fails the test."""
        try:
            call()
        except (ValueError, TypeError) as e:
            msg = str(e)
            self.note(f"{what}: refused ({type(e).__name__}: {msg[:100]})")
            self.check(bool(msg), f"{what} was refused without a message")
            named = [v for v in suspicious or []
                     if re.search(rf"(?<![\d.]){v}(?![\d.])", msg)]
            self.check(not named, f"{what} was refused with a message naming {named}: the "
                       "array was REINTERPRETED (wrong byte order or strides), not converted: "
                       f"{type(e).__name__}: {msg}", Reinterpreted)
            return True
        return False

    def must_refuse(self, call: Callable[[], Any], what: str) -> None:
        if not self.refused(call, what):
            self.fail(f"bad input accepted: {what}; expected ValueError or TypeError and the "
                      "pool unchanged", BadInputAccepted)

    @rule(kind=st.sampled_from(BAD_INPUTS), mask=MASKS, vals=ACTIONS, index=st.integers(0, 7))
    @guarded("send")
    def bad_input(self, kind: str, mask: list[bool], vals: list[int], index: int) -> None:
        """Refused, and nothing changes: the model stays as it is, and later steps match it."""
        self.settle()
        c, p = self.c, self.p
        ids = self.pick(mask, lambda e: e.sendable)
        acts = np.array(self.actions_for(ids, vals), dtype=np.int64)
        k = len(ids)
        sends: dict[str, tuple[Any, Any]] = {
            "actions too long": (np.append(acts, 0), ids),
            "actions 2-d": (acts[:, None], ids),
            "actions scalar": (np.int64(0), ids),
            "actions float": (acts.astype(np.float64), ids),
            "actions bool": (np.ones(k, dtype=bool), ids),
            "actions object": (acts.astype(object), ids),
            "actions str": (np.array(["0"] * k), ids),
            "actions complex": (acts.astype(np.complex128), ids),
            "action -1": (np.full(k, -1, dtype=np.int64), ids),
            "action num_actions": (np.full(k, c.num_actions, dtype=np.int64), ids),
            "last action out of range": (np.append(acts[:-1], c.num_actions), ids),
            "env ids repeated": (np.append(acts, 0), [*ids, ids[0]] if ids else []),
            "env ids 2-d": (acts, np.array([ids], dtype=np.int32)),
            "env ids float": (acts, np.array(ids, dtype=np.float64)),
            "env ids bool": (acts, np.ones(k, dtype=bool)),
            "env ids object": (acts, np.array(ids, dtype=object)),
        }
        if kind in sends:
            if ids:
                a, i = sends[kind]
                self.must_refuse(lambda: p.send(a, i), f"send with {kind}")
            return
        calls: dict[str, Callable[[], Any]] = {
            "env id num_envs": lambda: p.send(np.zeros(1, dtype=np.int64), [c.num_envs]),
            "env id -1": lambda: p.send(np.zeros(1, dtype=np.int64), np.array([-1], np.int32)),
            "actions for no env ids": lambda: p.send(np.zeros(1, dtype=np.int64), []),
            "no actions for all envs": lambda: p.send(np.zeros(0, dtype=np.int64)),
            "reset seed -1": lambda: p.async_reset(seed=-1),
            "reset seed 1.5": lambda: p.async_reset(seed=1.5),  # type: ignore[arg-type]
            "reset env id num_envs": lambda: p.async_reset(env_ids=[c.num_envs]),
            "step with a bad shape": lambda: self.run(
                p.step(np.zeros(c.num_envs + 1, dtype=np.int64)), kind, PROMPT).result(),
            "recv(timeout=nan)": lambda: self.run(p.recv(timeout=float("nan")), kind,
                                                  PROMPT).result(),
            "recv_blocking(timeout=nan)": lambda: p.recv_blocking(timeout=float("nan")),
        }
        if kind in calls:
            self.must_refuse(calls[kind], kind)
        elif kind in ("send to a busy env", "reset a busy env"):
            self.busy(kind == "reset a busy env", index, int(acts[0]) if k else 0)
        elif kind == "send to an env never reset":
            never = [e.id for e in self.envs if not e.was_reset and e.idle]
            if never:
                self.must_refuse(lambda: p.send(np.zeros(1, dtype=np.int64), [never[0]]),
                                 f"send to env {never[0]}, never reset")
        elif kind == "send to an ended env (disabled)":
            ended = [e.id for e in self.envs if e.idle and e.was_reset and not e.sendable]
            if ended:
                self.must_refuse(lambda: p.send(np.zeros(1, dtype=np.int64), [ended[0]]),
                                 f"send to env {ended[0]}, ended with autoreset disabled")
        elif kind == "reset env ids repeated":
            idle = [e.id for e in self.envs if e.idle]
            if idle:
                self.must_refuse(lambda: p.async_reset(seed=3, env_ids=[idle[0], idle[0]]),
                                 f"async_reset(seed=3, env_ids={[idle[0], idle[0]]})")
        elif kind == "step with a busy env":
            if self.rows_pending and not self.parked:
                self.must_refuse(lambda: self.run(p.step(np.zeros(c.num_envs, dtype=np.int64)),
                                                  kind, PROMPT).result(), kind)
        elif kind == "step indivisible":
            if c.num_envs % c.batch_size:
                self.must_refuse(lambda: self.run(p.step(np.zeros(c.num_envs, dtype=np.int64)),
                                                  kind, PROMPT).result(), kind)
        elif kind == "empty send":  # a no-op or refused; the pool unchanged either way
            if not self.refused(lambda: p.send(np.zeros(0, dtype=np.int64),
                                               np.zeros(0, dtype=np.int32)), kind):
                self.note("send([], env_ids=[]): accepted, a no-op")
        elif kind == "empty reset" and not self.refused(
                lambda: p.async_reset(env_ids=np.zeros(0, dtype=np.int32)), kind):
            self.note("async_reset(env_ids=[]): accepted, a no-op")
            self.empty_reset_accepted = True

    def busy(self, reset: bool, index: int, action: int) -> None:
        """A send or async_reset to an env whose row has not been received."""
        busy = [e.id for e in self.envs if not e.idle]
        if not busy:
            return
        e = self.envs[busy[index % len(busy)]]
        what = f"{'async_reset' if reset else 'send'} to env {e.id}, whose row is undelivered"
        p = self.p
        call: Callable[[], Any] = ((lambda: p.async_reset(env_ids=[e.id])) if reset
                                   else (lambda: p.send(np.array([action], np.int64), [e.id])))
        # With no receiver parked and no batch pushed back, every undelivered row is in flight
        # or in a ready block: its env is busy. Otherwise the row may already be taken (pushed
        # back by a cancelled receiver): the env is idle then, and the order allowed.
        if (not self.parked and not self.maybe_given_back) or (
                not reset and e.ended and self.c.autoreset == "disabled"):
            self.must_refuse(call, what)
        elif not self.refused(call, what):
            self.note(f"{what}: accepted (its row was taken already)")
            if reset:
                self.model_reset([e.id], None, "async_reset of an env whose row was taken")
            else:
                self.model_send([e.id], [action], "send to an env whose row was taken")

    @rule(kind=st.sampled_from([
        "actions >i8", "actions >i4", "env ids >i4", "env ids >i8", "actions strided",
        "actions reversed", "env ids strided", "env ids reversed", "reset env ids >i4",
        "reset env ids strided"]), mask=MASKS, vals=ACTIONS)
    @guarded("async_reset")
    def convert_or_refuse(self, kind: str, mask: list[bool], vals: list[int]) -> None:
        """Arrays in non-native byte order or with strides step with their values, or are
        refused; never read as something else."""
        self.settle()
        resetting = kind.startswith("reset")
        ids = self.pick(mask, self.free if resetting
                        else (lambda e: e.sendable and self.free(e)))
        if not ids:
            return
        acts = self.actions_for(ids, vals)
        a: Array = np.array(acts, dtype=np.int64)
        i: Array = np.array(ids, dtype=np.int32)
        suspicious: list[int] = []

        def strided(values: Array, sentinel: int) -> Array:
            base = np.full(2 * len(values), sentinel, dtype=values.dtype)
            base[::2] = values
            suspicious.append(sentinel)  # what a reader ignoring the strides finds
            return base[::2]

        if kind.endswith((">i8", ">i4")):
            dtype = np.dtype(kind[-3:])
            if "actions" in kind:
                acts = [x % 2**31 for x in acts]
                a = np.array(acts, dtype=dtype)
                suspicious += _swapped(a)
            else:
                i = np.array(ids, dtype=dtype)
                suspicious += _swapped(i)
        elif kind == "actions strided":
            a = strided(a, self.c.num_actions + 777_777)
        elif kind == "actions reversed":
            a = np.array(acts[::-1], dtype=np.int64)[::-1]
        elif kind.endswith("env ids strided"):
            i = strided(i, 1_000_003)
        elif kind == "env ids reversed":
            i = np.array(ids[::-1], dtype=np.int32)[::-1]
        what = (f"async_reset(env_ids={ids})" if resetting
                else f"send({acts}, env_ids={ids})") + f" with {kind}"
        call = ((lambda: self.p.async_reset(env_ids=i)) if resetting
                else (lambda: self.p.send(a, i)))
        if self.refused(call, what, suspicious):
            return
        self.note(f"{what}: accepted")
        if resetting:
            self.model_reset(ids, None, f"async_reset with {kind}")
        else:
            self.model_send(ids, acts, f"send with {kind}")

    # -- rules: close -------------------------------------------------------------------------

    @rule(how=st.sampled_from(["close()", "aclose()", "with", "async with"]))
    @guarded("close")
    def close(self, how: str) -> None:
        self.settle()
        self.note(f"{how}, {len(self.parked)} receivers parked")
        p = self.p
        self.closed = True  # parked receivers may finish (PoolClosed) as soon as the loop runs
        if how == "close()":
            p.close()
        elif how == "aclose()":
            self.run(p.aclose(), "aclose()", PROMPT).result()
        elif how == "with":
            with p:
                pass
        else:
            async def leave() -> None:
                async with p:
                    pass

            self.run(leave(), "async with", PROMPT).result()
        if self.parked:
            self.run(asyncio.wait([r.task for r in self.parked]),
                     "parked receivers after close (they must raise PoolClosed)", PROMPT)
        for op in AFTER_CLOSE:
            self.after_close_check(op)

    @rule(op=st.sampled_from(AFTER_CLOSE))
    @guarded(None)
    def after_close(self, op: str) -> None:
        if self.closed:
            self.after_close_check(op)

    def after_close_check(self, op: str) -> None:
        """``op`` on the closed pool raises PoolClosed (stream() ends, close() does nothing)."""
        p = self.p
        n = self.c.num_envs
        calls: dict[str, Callable[[], Any]] = {
            "send": lambda: p.send(np.zeros(n, dtype=np.int64)),
            "async_reset": lambda: p.async_reset(),
            "try_recv": p.try_recv,
            "recv": lambda: self.run(p.recv(), "recv() after close", PROMPT).result(),
            "recv(timeout=1)": lambda: self.run(p.recv(timeout=1.0), "recv(timeout=1) after "
                                                "close", PROMPT).result(),
            "recv_blocking(timeout=1)": lambda: p.recv_blocking(timeout=1.0),
            "step": lambda: self.run(p.step(np.zeros(n, dtype=np.int64)), "step() after close",
                                     PROMPT).result(),
        }
        batch = next((k.batch for k in reversed(self.kept) if k.batch is not None), None)
        if op == "batch.send" and batch is not None:
            calls[op] = lambda: batch.send(np.zeros(len(batch), dtype=np.int64))
        if op in calls:
            try:
                calls[op]()
            except aiopool.PoolClosed:
                return
            except Exception as e:
                self.fail(f"{op} after close raised {type(e).__name__}: {e}; expected "
                          "PoolClosed", AfterClose)
            self.fail(f"{op} after close returned; expected PoolClosed", AfterClose)
        elif op == "stream":
            async def drain() -> list[aiopool.Batch]:
                return [b async for b in p.stream()]

            try:
                got = self.run(drain(), "stream() after close", PROMPT, AfterClose).result()
            except aiopool.PoolClosed as e:
                never = "" if self.any_reset_call else " never reset"
                self.fail(f"stream() on a closed pool{never} raised PoolClosed ({e}); expected "
                          "it to end", AfterClose)
            self.check(got == [], f"stream() after close yielded {len(got)} batches", AfterClose)
        elif op == "close":
            p.close()
        elif op == "aclose":
            self.run(p.aclose(), "aclose() after close", PROMPT).result()

    # -- after every step, and at the end -----------------------------------------------------

    @invariant()
    @guarded(None)
    def received_batches_never_change(self) -> None:
        for k in self.kept:
            bad = k.changes()
            self.check(not bad, f"a batch received by {k.who} changed: " + "; ".join(bad[:4]),
                       BatchChanged)
        self.check(not self.handler_calls, "the event loop's exception handler fired: "
                   f"{self.handler_calls}")

    def teardown(self) -> None:
        try:
            if self.violation is None and self.pool is not None and not self.closed:
                try:
                    self.drain()
                except Exception as e:
                    self.violation = e
        finally:
            try:
                if self.pool is not None:
                    self.pool.close()
                    tasks = [r.task for r in self.parked]
                    for a in self.actors:
                        a.task.cancel()
                        tasks.append(a.task)
                    if tasks:
                        self.loop.run_until_complete(asyncio.wait(tasks, timeout=PROMPT))
                    for t in tasks:
                        if t.done() and not t.cancelled():
                            t.exception()
                    self.received_batches_never_change()  # after close, too
            finally:
                self.loop.close()
        if self.violation is not None:
            raise self.violation

    def drain(self) -> None:
        """The actors end (cancelled, or their returned batches dropped); every row owed that
        can fill a batch arrives; then the pool has nothing in flight."""
        self.note("drain")
        self.settle()
        self.drop_holds(self.given)
        for a in self.actors:
            for r in self.parked:
                r.cancelled = r.cancelled or r.actor is a
            if a.task.done():
                a.drop_all()
            else:
                a.task.cancel()
        if self.actors:
            self.maybe_given_back = True
            self.run(asyncio.wait([a.task for a in self.actors]), "cancelled actors", PROMPT)
        self.actors.clear()
        self.expect_stranded()
        self.await_parked()
        self.expect_stranded()
        self.check(not self.parked and not self.held_rows(), f"receivers still parked or rows "
                   f"still held after the actors ended ({self.why()})")
        while self.rows_pending >= self.c.batch_size:
            why = self.why()
            task = self.run(self.p.recv(), f"recv() while draining ({why})")
            self.judge("drain recv()", "batch", why, *self.outcome(task))
        why = self.why()
        task = self.run(self.p.recv(), f"the last recv() ({why}), which should have raised "
                        "NothingInFlight at once,", PROMPT, MissingNothingInFlight)
        self.judge("the last recv()", "none", why, *self.outcome(task))
        batch = self.p.try_recv()
        if batch is not None:
            self.judge("the last try_recv()", "none", why, "batch", batch)


# -- the tests ----------------------------------------------------------------------------------

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@contextlib.contextmanager
def _contention(kind: str) -> Iterator[None]:
    """"pinned": this thread, and the worker threads of the pools it makes, on one core;
    "busy": a busy-looping process on the last core, competing with the pools' threads."""
    if kind == "pinned":
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(before)})
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)
    elif kind == "busy":
        core = max(os.sched_getaffinity(0))
        hog = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, "
                                f"{{{core}}})\nwhile True:\n    pass\n"])
        try:
            yield
        finally:
            hog.kill()
            hog.wait(10)
    else:
        yield


def _run(loop: str, contention: str, examples: int, steps: int) -> None:
    machine = type(f"PoolMachine_{loop}_{contention}", (PoolMachine,),
                   {"loop_factory": staticmethod(LOOPS[loop])})
    with _contention(contention):
        run_state_machine_as_test(machine, settings=settings(
            max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True,
            database=None, print_blob=False,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("contention", ["none", "pinned"])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_pool_matches_its_model(loop: str, contention: str) -> None:
    _run(loop, contention, examples=25, steps=30)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("contention", ["none", "pinned", "busy"])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_pool_matches_its_model_long_campaign(loop: str, contention: str) -> None:
    _run(loop, contention, examples=300, steps=60)
