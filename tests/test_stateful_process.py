"""Model-based test of the process backend's faults: hypothesis draws random programs of sends,
seeded resets, receives (with timeouts, cancelled, flush) on a pool of ``CountingEnv`` (the
Python twin of Counting-v0) in worker processes, among worker deaths (SIGKILL, with and
without ``restart=True``) and env exceptions, and checks after every step:

- every row arrives at most once, in order per env (obs[:, 0] counts an env's events; a worker
  replaced after a death gives its envs fresh ones, whose first row is event 1);
- a reset asked with a seed shows that seed's first draw, also when its worker died with it;
- a receive gets a batch while a whole one can come, NothingInFlight when none can, a dead
  worker's WorkerDied (naming only envs that had a step in flight) before anything else, and
  every wait ends within a bound;
- ``flush()`` hands out exactly the rows short of a whole batch, deaths or not;
- after each program, once the pool is closed: no worker process, no shared memory left.

The threads backend has its own model in ``test_stateful.py``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import uvloop
from helpers import CountingEnv
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

import aiopool

HANG = 20.0  # a wait that must end (a replacement worker starts in ~1 s on a loaded machine)
FAIL_ACTION = 7  # the action on which an env raises


class Faulty(CountingEnv):
    """CountingEnv whose step raises on action ``FAIL_ACTION`` (nothing changes, as a crash
    in the middle of the env's own code would leave it)."""

    def step(self, action: int) -> Any:
        if int(action) == FAIL_ACTION:
            raise RuntimeError("the env's step failed")
        return super().step(action)


class Config(NamedTuple):
    num_envs: int
    batch_size: int
    num_workers: int
    autoreset: str
    restart: bool
    episode_length: int
    step_ns: int
    seed: int


@st.composite
def configs(draw: st.DrawFn) -> Config:
    num_envs = draw(st.integers(2, 5))
    return Config(num_envs=num_envs, batch_size=draw(st.integers(1, num_envs)),
                  num_workers=draw(st.integers(1, 3)),
                  autoreset=draw(st.sampled_from(["next_step", "same_step"])),
                  restart=draw(st.booleans()), episode_length=draw(st.sampled_from([2, 1000])),
                  step_ns=draw(st.sampled_from([0, 2_000_000])), seed=draw(st.integers(0, 99)))


MASKS = st.lists(st.booleans(), min_size=5, max_size=5)


@functools.cache
def first_draw(seed: int) -> float:
    return float(CountingEnv().reset(seed=seed)[1]["draw"])


def _memfd_mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum("/memfd:aiopool-" in line for line in f)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class ProcessPoolMachine(RuleBasedStateMachine):
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop

    def __init__(self) -> None:
        super().__init__()
        self.loop = self.loop_factory()
        self.pool: Any = None
        self.pids: set[int] = set()
        self.maps = _memfd_mappings()
        self.shm = set(os.listdir("/dev/shm"))
        self.log: list[str] = []

    # -- the model ------------------------------------------------------------------------

    @initialize(cfg=configs())
    def init(self, cfg: Config) -> None:
        self.cfg = cfg
        factory = functools.partial(Faulty, episode_length=cfg.episode_length,
                                    step_ns=cfg.step_ns)
        self.pool = aiopool.make(factory, num_envs=cfg.num_envs, batch_size=cfg.batch_size,
                                 num_workers=cfg.num_workers, restart=cfg.restart,
                                 autoreset=cfg.autoreset, seed=cfg.seed,
                                 info_keys=CountingEnv.INFO)
        self.pids |= set(self.pool.worker_pids())
        n = cfg.num_envs
        self.last = [0] * n           # the event count of the env's last row received
        self.flying = [False] * n     # a step or reset sent whose row has not arrived
        self.lost = [False] * n       # its worker died and was not replaced
        self.was_reset = [False] * n
        self.after_error = [False] * n  # its last row was an env error (obs not written)
        self.replaced = [False] * n   # its worker was killed with restart=True: fresh env
        self.seed: list[int | None] = [cfg.seed + i for i in range(n)]  # a draw to check
        self.unreported = False       # a death the pool will report (no restart)
        self.cuts: list[int] = []     # rows of each flushed short batch not yet received

    def note(self, line: str) -> None:
        self.log.append(line)

    def fail(self, msg: str) -> None:
        raise AssertionError(f"{msg}\nconfig: {self.cfg}\nprogram:\n  " + "\n  ".join(
            self.log[-30:]))

    @property
    def in_flight(self) -> int:
        return sum(self.flying)

    def can_come(self) -> bool:
        return bool(self.cuts) or self.in_flight - sum(self.cuts) >= self.cfg.batch_size

    def workers_of(self, env: int) -> list[int]:
        per = -(-self.cfg.num_envs // self.cfg.num_workers)
        return list(range(env // per * per, min(self.cfg.num_envs, (env // per + 1) * per)))

    def account_rows(self, batch: aiopool.Batch, who: str, errors: bool = False) -> None:
        size = len(batch)
        if size != self.cfg.batch_size:  # a short batch: the oldest one flushed
            if not self.cuts or size != self.cuts[0]:
                self.fail(f"{who}: a batch of {size} rows, batch_size {self.cfg.batch_size}, "
                          f"flushed short batches {self.cuts}")
            self.cuts.pop(0)
        failed = batch.info["env_error"]
        for r, i in enumerate(batch.env_id.tolist()):
            if not self.flying[i]:
                self.fail(f"{who}: env {i}'s row came with nothing in flight for it (twice?)")
            self.flying[i] = False
            if failed[r]:
                if not errors:
                    self.fail(f"{who}: env {i}'s error row came as a plain batch")
                self.after_error[i] = True
                continue
            event, elapsed = int(batch.obs[r, 0]), int(batch.info["elapsed_step"][r])
            ended = bool(batch.terminated[r] or batch.truncated[r])
            ok = {self.last[i] + 1}
            if self.cfg.autoreset == "same_step" and ended:
                ok = {self.last[i] + 2}  # the step and its reset, in one row
            if self.replaced[i]:
                ok.add(1)  # the fresh env of a replacement worker: its first reset
            if event not in ok:
                self.fail(f"{who}: env {i}'s row is event {event}, expected one of {ok} "
                          f"(last {self.last[i]})")
            if event == 1 and self.replaced[i] and self.last[i] != 0:
                self.replaced[i] = False
            if self.seed[i] is not None and elapsed == 0:
                want = first_draw(self.seed[i])
                if float(batch.info["draw"][r]) != want:
                    self.fail(f"{who}: env {i}'s reset draw is {batch.info['draw'][r]}, seed "
                              f"{self.seed[i]} draws {want}")
                self.seed[i] = None
            self.last[i] = event
            self.after_error[i] = False
        self.note(f"  {who} -> {batch.env_id.tolist()}")

    def account(self, outcome: Any, who: str, timeout_ok: bool = False) -> None:
        """Check one receive's outcome (a batch or an exception) against the model."""
        can, unreported = self.can_come(), self.unreported
        if isinstance(outcome, aiopool.Batch):
            if unreported and not self.cuts:
                pass  # rows a dead worker committed still come before its death is reported
            self.account_rows(outcome, who)
        elif isinstance(outcome, aiopool.EnvError):
            if outcome.batch is None:
                self.fail(f"{who}: EnvError without its batch")
            self.account_rows(outcome.batch, who, errors=True)
        elif isinstance(outcome, aiopool.WorkerDied):
            self.note(f"  {who} -> WorkerDied lost {outcome.lost} of {outcome.env_ids}")
            if not unreported and not (self.cfg.restart and "not restarted again" in str(
                    outcome)):
                self.fail(f"{who}: WorkerDied though no death is unreported: {outcome}")
            if outcome.env_ids != self.workers_of(outcome.env_ids[0]):
                self.fail(f"{who}: WorkerDied names envs {outcome.env_ids}")
            for i in outcome.lost:
                if not self.flying[i]:
                    self.fail(f"{who}: WorkerDied names env {i} lost, with nothing in flight")
                self.flying[i] = False
            for i in outcome.env_ids:
                self.lost[i] = True
            self.unreported = False
        elif isinstance(outcome, aiopool.NothingInFlight):
            self.note(f"  {who} -> NothingInFlight")
            if can or unreported:
                self.fail(f"{who}: NothingInFlight, though {self.in_flight} rows are in flight "
                          f"(batch_size {self.cfg.batch_size}, cuts {self.cuts}, unreported "
                          f"death {unreported}): {outcome}")
        elif isinstance(outcome, TimeoutError) and timeout_ok:
            self.note(f"  {who} -> TimeoutError")
        else:
            self.fail(f"{who}: unexpected {outcome!r}")

    def run(self, aw: Any, who: str) -> Any:
        """The result of ``aw``, or the exception it raised; a wait past HANG fails."""
        async def caught() -> Any:
            try:
                return await aw
            except Exception as e:  # the receive's own TimeoutError included
                return e

        async def bounded() -> Any:
            async with asyncio.timeout(HANG):
                return await caught()
        try:
            return self.loop.run_until_complete(bounded())
        except TimeoutError:
            self.fail(f"{who} hung for {HANG} s")

    def after(self) -> None:
        self.pids |= set(self.pool.worker_pids())

    def usable(self, mask: list[bool], *, reset: bool) -> list[int]:
        return [i for i in range(self.cfg.num_envs) if mask[i] and not self.flying[i]
                and not self.lost[i] and (reset or self.was_reset[i])]

    # -- rules ----------------------------------------------------------------------------

    @rule(mask=MASKS, seed=st.one_of(st.none(), st.integers(0, 1000)))
    def async_reset(self, mask: list[bool], seed: int | None) -> None:
        ids = self.usable(mask, reset=True)
        if not ids:
            return
        self.note(f"async_reset(seed={seed}, env_ids={ids})")
        self.pool.async_reset(seed=seed, env_ids=ids)
        for i in ids:
            self.flying[i] = self.was_reset[i] = True
            self.seed[i] = None if seed is None else seed + i
            if self.seed[i] is None and self.last[i] == 0:
                self.seed[i] = self.cfg.seed + i  # the first reset uses make's seed
        self.after()

    @rule(mask=MASKS, fail=st.integers(0, 9))
    def send(self, mask: list[bool], fail: int) -> None:
        ids = self.usable(mask, reset=False)
        if not ids:
            return
        actions = [FAIL_ACTION if k == fail else 1 for k in range(len(ids))]
        self.note(f"send({actions}, {ids})")
        self.pool.send(np.array(actions, np.int64), ids)
        for i in ids:
            self.flying[i] = True

    @rule(kind=st.sampled_from(["recv", "recv(timeout)", "try_recv", "flush"]))
    def receive(self, kind: str) -> None:
        self.note(kind)
        if kind == "try_recv":
            deadline = time.monotonic() + HANG
            while True:  # try_recv until something comes (if anything can)
                try:
                    got = self.pool.try_recv()
                except Exception as e:
                    got = e
                if got is not None or (not self.can_come() and not self.unreported):
                    break
                if time.monotonic() > deadline:
                    self.fail(f"try_recv found nothing for {HANG} s")
                time.sleep(0.002)
            if got is not None:
                self.account(got, kind)
        elif kind == "flush":
            self.flush()
        else:
            timeout = 0.002 if kind == "recv(timeout)" else None
            self.account(self.run(self.pool.recv(timeout=timeout), kind), kind,
                         timeout_ok=timeout is not None)
        self.after()

    def flush(self) -> None:
        try:
            rows = self.pool.flush(timeout=HANG)
        except aiopool.WorkerDied as e:
            self.account(e, "flush()")
            rows = self.pool.flush(timeout=HANG)
        self.note(f"  flush() -> {rows}")
        total = self.in_flight - sum(self.cuts)  # rows not yet published in a short batch
        want = total % self.cfg.batch_size  # whole batches are claimed first
        if rows != want:
            self.fail(f"flush() returned {rows}, expected {want} ({total} rows in flight "
                      f"besides the short batches {self.cuts})")
        if rows > 0:
            self.cuts.append(rows)

    @rule(turns=st.integers(0, 4))
    def cancel_recv(self, turns: int) -> None:
        self.note(f"recv() cancelled after {turns} turns")
        task = self.loop.create_task(self.pool.recv())
        for _ in range(turns):
            self.loop.run_until_complete(asyncio.sleep(0))
        task.cancel()
        try:
            outcome = self.loop.run_until_complete(task)
        except asyncio.CancelledError:
            return
        except Exception as e:
            outcome = e
        self.account(outcome, "recv() before its cancel")

    @rule(worker=st.integers(0, 2))
    def kill(self, worker: int) -> None:
        native = self.pool._native
        if worker >= native.num_threads or self.unreported:
            return
        envs = native._workers[worker].env_ids
        if all(self.lost[i] for i in envs):
            return
        proc = native._workers[worker].proc
        if proc.poll() is not None or native._deaths:
            return  # dead already: its death is the pool's to handle
        self.note(f"SIGKILL worker {worker} (envs {envs})")
        proc.kill()
        deadline = time.monotonic() + HANG
        while not native._deaths:  # the watcher has seen it: the pool must act on it
            if time.monotonic() > deadline:
                self.fail(f"the death of worker {worker} was not seen in {HANG} s")
            time.sleep(0.002)
        if self.cfg.restart:
            for i in envs:
                self.replaced[i] = True
                self.after_error[i] = False
            self.unreported = False
        self.unreported = not self.cfg.restart
        # Three deaths within 1 s of a start: not restarted again, reported (account()).
        if self.cfg.restart and time.monotonic() - native._workers[worker].started < 1.0:
            self.unreported = native._workers[worker].quick_deaths >= 2

    # -- after each program ---------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if self.pool is not None:
                self.drain()
        finally:
            if self.pool is not None:
                self.pool.close()
            self.loop.close()
        if self.pool is None:
            return
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in self.pids):
            if time.monotonic() > deadline:
                self.fail(f"worker processes left after close: "
                          f"{[p for p in self.pids if _alive(p)]}")
            time.sleep(0.01)
        if _memfd_mappings() != self.maps:
            self.fail("the pool's shared memory is still mapped after close")
        if set(os.listdir("/dev/shm")) != self.shm:
            self.fail("/dev/shm changed")

    def drain(self) -> None:
        self.note("drain")
        while self.can_come() or self.unreported:
            self.account(self.run(self.pool.recv(), "drain recv()"), "drain recv()")
        self.flush()
        while self.cuts:
            self.account(self.run(self.pool.recv(), "recv() of the flushed rows"), "drain")
        if any(self.flying):
            self.fail(f"rows never came: envs {[i for i, f in enumerate(self.flying) if f]}")


LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def _run(loop: str, examples: int, steps: int) -> None:
    machine = type(f"ProcessPoolMachine_{loop}", (ProcessPoolMachine,),
                   {"loop_factory": staticmethod(LOOPS[loop])})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True,
        database=None, print_blob=False, suppress_health_check=list(HealthCheck)))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_process_pool_matches_its_model(loop: str) -> None:
    _run(loop, examples=10, steps=30)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_process_pool_matches_its_model_long_campaign(loop: str) -> None:
    _run(loop, examples=40, steps=50)
