"""A worker process of a process-backed pool: hosts several Python envs and steps them.

Started by the pool as ``python -m aiopool._process.worker`` (a fresh interpreter: safe in a
parent that already runs threads, as ``spawn`` is). Its config arrives pickled on stdin; the env
factory inside it was pickled with cloudpickle, so lambdas and local functions work.

Loop: take the env ids the pool queued in this worker's inbox, run each one's command (step or
reset) and write the result straight into that env's rows of the shared memory, push the id to
the outbox, and ring the pool's eventfd. Every wake-up steps all the envs queued by then. When
the inbox is empty it spins for ``spin_us``, then sleeps in ``poll`` on its own eventfd and on a
pipe whose write end only the pool's process holds: if that process dies, the pipe reads EOF and
the worker exits (so a killed parent leaves no worker behind). A native thread watches that pipe
too, so that a worker stuck in an env call (or its factory) when the pool's process dies ends.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from aiopool._process.layout import ENV_ERROR, OK, RESET_SEEDED, STEP

_COMMIT_AFTER_NS = 1_000_000  # commit the rows that ran once a wake-up's envs took this long
# A test hook (tests/test_process_backend.py): while the file ``hold`` exists in this folder, a
# worker that has written rows waits before committing them, and says so with ``held-<pid>``.
_HOLD_DIR = os.environ.get("AIOPOOL_TEST_HOLD_COMMIT")


def main() -> None:
    # A Ctrl-C in the terminal (or a notebook's interrupt) signals the whole process group:
    # the parent decides what it means; the worker ends with it (its pipe reads EOF) or on close.
    # A handler, not SIG_IGN: programs an env starts get SIGINT back (handlers reset on exec).
    signal.signal(signal.SIGINT, _ignore)
    config = pickle.loads(sys.stdin.buffer.read())
    sys.path[:] = config["sys_path"]
    from aiopool._native import _core

    # Ends this process when the pool's dies, even inside a hung env call or the factory.
    _core._exit_with_parent(config["parent_fd"])
    ready = config["ready_fd"]
    try:
        worker = Worker(config)
    except BaseException:
        with contextlib.suppress(BrokenPipeError):  # at most 32 KiB: never blocks a pipe
            os.write(ready, pickle.dumps(("error", _shortened(traceback.format_exc()))))
        os.close(ready)
        raise SystemExit(1) from None
    with contextlib.suppress(BrokenPipeError):  # a restart does not wait for this
        os.write(ready, pickle.dumps(("ready", os.getpid())))
    os.close(ready)
    worker.serve()


def _ignore(signum: int, frame: Any) -> None:
    """SIGINT: nothing (see ``main``)."""


def _shortened(text: str, limit: int = 8192) -> str:
    """``text``'s head and end if it is longer than ``limit`` characters."""
    if len(text) <= limit:
        return text
    return text[:limit // 4] + "\n[...]\n" + text[-(limit - limit // 4):]


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        import cloudpickle

        from aiopool._native import _core
        from aiopool._process.layout import Layout

        self._add, self._load, self._store = (_core._atomic_add, _core._atomic_load,
                                              _core._atomic_store)
        plan = config["plan"]
        self._mm = mmap.mmap(config["memfd"], Layout(plan).size)
        os.close(config["memfd"])
        self.lay = Layout(plan, self._mm)
        self.w = config["worker"]
        self.cap = plan.per_worker
        self.inbox_fd, self.pool_fd, self.parent_fd = config["inbox_fd"], config["pool_fd"], \
            config["parent_fd"]
        self.spin_ns = int(config["spin_us"] * 1000)
        self.commit_rows = max(1, config["commit_rows"])
        self.polite = bool(config.get("polite", True))
        self.same_step = plan.same_step
        # A rendering pool's requests (backend.py's ``_ask_frame``), served between steps; not
        # inherited by processes the envs start, so a dead worker's line reads EOF in the pool.
        fd = config.get("render_fd")
        if fd is not None:
            os.set_inheritable(fd, False)
        self.render = None if fd is None else socket.socket(fileno=fd)
        self.render_poll = select.poll()
        self.poller = select.poll()  # serve()'s: the inbox, the parent, the render line
        for fd in (self.inbox_fd, self.parent_fd):
            self.poller.register(fd, select.POLLIN)
        if self.render is not None:
            self.render_poll.register(self.render, select.POLLIN)
            self.poller.register(self.render, select.POLLIN)
        factory: Callable[[], Any] = cloudpickle.loads(config["factory"])
        self.env_ids: list[int] = config["env_ids"]
        self.envs = {i: factory() for i in self.env_ids}
        self.needs_reset = dict.fromkeys(self.env_ids, True)
        self.unreset = set(self.env_ids)  # never reset in this process: nothing to draw yet
        self.ep_return = dict.fromkeys(self.env_ids, 0.0)
        self.ep_length = dict.fromkeys(self.env_ids, 0)
        self.elapsed = dict.fromkeys(self.env_ids, 0)
        # (A worker that holds no env, as when there are more workers than envs, writes none.)
        space = self.envs[self.env_ids[0]].observation_space if self.env_ids else None
        name = config.get("env_name", "the env")
        self.write_obs = _obs_writer(plan, self.lay.obs, space, name)
        self.write_final = (_obs_writer(plan, self.lay.final_obs, space, name) if self.same_step
                            else None)
        self.info_keys = [(f.name, self.lay.info[f.name]) for f in plan.info]
        self.action_is_int = plan.action.shape == () and np.dtype(plan.action.dtype).kind in "iu"

    def serve(self) -> None:
        lay, w, cap = self.lay, self.w, self.cap
        inbox, outbox = lay.inbox[w], lay.outbox[w]
        inbox_tail, outbox_tail = lay.inbox_tail[w], lay.outbox_tail[w]
        sleeping, armed, need = lay.sleeping[w], lay.armed[0], lay.need[0]
        head = done = 0  # the pool zeroes both tails before it starts a worker
        poller = self.poller
        while True:
            if self.render is not None and self.render_poll.poll(0):
                self._serve_render()
            tail = self._load(inbox_tail)
            if tail == head:
                tail = self._spin(inbox_tail, head)
            if tail == head:
                self._store(sleeping, 1)
                if self._load(inbox_tail) == head:  # re-check after the flag: Dekker
                    for fd, _ in poller.poll():
                        if fd == self.parent_fd:
                            return  # the pool's process is gone
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.inbox_fd, 8)
                self._store(sleeping, 0)
                if self._load(lay.shutdown[0]):
                    return
                continue
            queued = _ring_read(inbox, head, tail, cap)
            # Commit every `commit_rows` envs, or sooner when they are slow (_COMMIT_AFTER_NS):
            # cheap envs share one commit, and a slow env's row never waits for the others.
            start = 0
            while start < len(queued):
                ran = self._run_all(queued[start:start + self.commit_rows])
                ids = queued[start:start + ran]
                start += ran
                start_at = done % cap
                if start_at + ran <= cap:  # a slice when the ring does not wrap (~1 µs less)
                    outbox[start_at:start_at + ran] = ids
                else:
                    outbox[np.arange(done, done + ran) % cap] = ids
                done += ran
                if _HOLD_DIR is not None:
                    _hold_before_commit(_HOLD_DIR)
                self._store(outbox_tail, done)  # the commit: these envs' rows are complete
                # The pool sleeps on its eventfd: ring it if these rows complete its batch.
                if self._load(armed) and 0 < self._add(need, -ran) <= ran:
                    self._store(armed, 0)
                    os.write(self.pool_fd, b"\x01\0\0\0\0\0\0\0")
            head = tail

    def _serve_render(self) -> None:
        """One frame: the env id (4 bytes) in, the pickled ("ok", frame) or ("error",
        traceback) out, after its length (8 bytes). The pool asks only for envs it has no
        command queued for, so the env is between steps."""
        assert self.render is not None
        request = self.render.recv(4, socket.MSG_WAITALL)
        if len(request) < 4:  # the pool closed the line: it is closing
            self.render_poll.unregister(self.render)
            self.poller.unregister(self.render)
            self.render.close()
            self.render = None
            return
        i = int.from_bytes(request, "little")
        answer: tuple[str, Any] = ("fresh", None)
        busy = self.lay.busy_since[self.w]  # a render() hung past step_timeout is killed too
        self._store(busy, time.monotonic_ns())
        try:
            if i not in self.unreset:
                answer = ("ok", np.asarray(self.envs[i].render(), dtype=np.uint8))
        except Exception:
            answer = ("error", _shortened(traceback.format_exc()))
        finally:
            self._store(busy, 0)
        data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        self.render.sendall(len(data).to_bytes(8, "little") + data)

    def _spin(self, inbox_tail: int, head: int) -> int:
        if self.spin_ns <= 0:
            return head
        until = time.perf_counter_ns() + self.spin_ns
        while time.perf_counter_ns() < until:
            tail = self._load(inbox_tail)
            if tail != head:
                return int(tail)
            if self.polite:
                os.sched_yield()  # a runnable pool or worker process goes first
        return head

    def _run_all(self, ids: np.ndarray) -> int:
        """Run the command of each env in ``ids`` in turn, for up to ``_COMMIT_AFTER_NS``,
        and write their rows (the scalar columns once, at the end); returns how many ran. The
        caller commits those rows."""
        lay, same_step = self.lay, self.same_step
        commands = lay.command[ids].tolist()
        actions = lay.action[ids]  # a copy: the env may keep its action
        if self.action_is_int:
            actions = actions.tolist()
        envs, needs_reset = self.envs, self.needs_reset
        elapsed_of, return_of, length_of = self.elapsed, self.ep_return, self.ep_length
        write_obs, info_keys = self.write_obs, self.info_keys
        n = len(ids)
        reward, terminated, truncated = [0.0] * n, [False] * n, [False] * n
        elapsed, ep_return, ep_length, status = [0] * n, [0.0] * n, [0] * n, [OK] * n
        final = [False] * n
        # One stamp for the call's env calls: the watcher kills the worker once it is older than
        # step_timeout, and the envs before the one running took < _COMMIT_AFTER_NS together.
        busy = lay.busy_since[self.w]
        self._store(busy, time.monotonic_ns())
        until = time.perf_counter_ns() + _COMMIT_AFTER_NS
        for j, i in enumerate(ids.tolist()):
            if j and time.perf_counter_ns() > until:  # slow envs: commit what ran so far
                n = j
                ids = ids[:n]
                del reward[n:], terminated[n:], truncated[n:], elapsed[n:], ep_return[n:]
                del ep_length[n:], status[n:], final[n:]
                break
            env = envs[i]
            try:
                if commands[j] != STEP or needs_reset[i]:
                    seed = int(lay.seed[i]) if commands[j] == RESET_SEEDED else None
                    obs, info = env.reset(seed=seed)
                    needs_reset[i] = False
                    self.unreset.discard(i)
                    return_of[i], length_of[i], elapsed_of[i] = 0.0, 0, 0
                else:
                    obs, r, term, trunc, info = env.step(actions[j])
                    r = float(r)
                    reward[j], terminated[j], truncated[j] = r, bool(term), bool(trunc)
                    elapsed_of[i] += 1
                    return_of[i] += r
                    length_of[i] += 1
                    if term or trunc:
                        if same_step:
                            final[j] = True
                            assert self.write_final is not None
                            self.write_final(i, obs)
                            lay.final_elapsed_step[i] = elapsed_of[i]  # type: ignore[index]
                            obs, info = env.reset()
                            elapsed_of[i] = 0
                        else:
                            needs_reset[i] = True
                write_obs(i, obs)
                if info_keys:
                    for name, column in info_keys:
                        column[i] = info.get(name, 0)
            except Exception:
                lay.set_error_text(i, f"env {i} raised in worker process {os.getpid()}:\n"
                                      + traceback.format_exc())
                status[j] = ENV_ERROR
                self._add(lay.errors[0], 1)
                reward[j], terminated[j], truncated[j] = 0.0, False, True
                needs_reset[i] = True
            elapsed[j], ep_return[j], ep_length[j] = elapsed_of[i], return_of[i], length_of[i]
            if final[j]:
                return_of[i], length_of[i] = 0.0, 0
        self._store(busy, 0)
        # The env's command (a staged seed) is left as it is: the pool consumes it when it
        # takes the row, so a worker killed before its commit leaves the command to redo.
        lay.reward[ids] = reward
        lay.terminated[ids] = terminated
        lay.truncated[ids] = truncated
        lay.elapsed_step[ids] = elapsed
        lay.episode_return[ids] = ep_return
        lay.episode_length[ids] = ep_length
        lay.status[ids] = status
        if same_step and not all(final):
            ongoing = ids[~np.array(final)]
            for column in lay.final_obs.values():
                column[ongoing] = 0
            lay.final_elapsed_step[ongoing] = 0  # type: ignore[index]
        return n


def _hold_before_commit(folder: str) -> None:
    """The test hook of ``_HOLD_DIR``: wait (rows written, not committed) while it says so."""
    hold = os.path.join(folder, "hold")
    if not os.path.exists(hold):
        return
    with open(os.path.join(folder, f"held-{os.getpid()}"), "w"):
        pass
    while os.path.exists(hold):
        time.sleep(0.001)


def _ring_read(box: np.ndarray, head: int, tail: int, cap: int) -> np.ndarray:
    """A copy of ring ``box``'s entries ``head`` .. ``tail`` (counters that only grow)."""
    start, end = head % cap, tail % cap
    if start < end:
        return box[start:end].copy()
    return box[np.arange(head, tail) % cap]


def _obs_writer(plan: Any, columns: dict[str, Any], space: Any,
                env_name: str) -> Callable[[int, Any], None]:
    """write(i, obs): an observation into row i of the obs columns (one per Dict / Tuple key).
    A string part is checked first (``_text_check``): one its column cannot hold raises. No
    ``space`` (the worker holds no env): nothing to check, nothing will be written."""
    if len(plan.obs) == 1 and plan.obs[0].name == "obs":
        column = columns["obs"]
        check = (None if space is None else
                 _text_check(space, column.dtype, "observation", env_name))

        def write_one(i: int, obs: Any) -> None:
            column[i] = obs

        if check is None:
            return write_one

        def write_text(i: int, obs: Any) -> None:
            check(obs)
            column[i] = obs

        return write_text
    keyed = [(_key_of(f.name), columns[f.name]) for f in plan.obs]
    checks = [(key, col, check) for key, col in keyed if space is not None
              and (check := _text_check(space[key], col.dtype, f"observation[{key!r}]",
                                        env_name)) is not None]

    def write_keyed(i: int, obs: Any) -> None:
        for key, col in keyed:
            col[i] = obs[key]

    def write_checked(i: int, obs: Any) -> None:
        for key, _, check in checks:
            check(obs[key])
        for key, col in keyed:
            col[i] = obs[key]

    return write_checked if checks else write_keyed


def _text_check(space: Any, dtype: np.dtype[Any], what: str,
                env_name: str) -> Callable[[Any], None] | None:
    """For a column of strings (``spec.text_dtype``), check(value): raises ValueError, naming
    the env and the space, for a value the column would not hold as it came (numpy cuts a
    longer string and drops trailing NULs without a word) or that the space does not contain
    (gymnasium's ``Text.contains``: length and charset); None for other columns."""
    if dtype.kind != "U":
        return None
    import gymnasium as gym

    width = dtype.itemsize // 4
    is_text = isinstance(space, gym.spaces.Text)
    contains: Callable[[str], bool] = space.contains if is_text else (lambda value: True)
    if type(space) is gym.spaces.Text:  # its contains without a generator: 0.7 us, not 5.6
        charset, low, high = frozenset(space.character_set), space.min_length, space.max_length

        def contains(value: str) -> bool:
            return low <= len(value) <= high and charset.issuperset(value)

    def check(value: Any) -> None:
        if isinstance(value, str) and len(value) <= width and not value.endswith("\0") and (
                contains(value)):
            return
        if not isinstance(value, str):
            why = f"is {type(value).__name__} {value!r:.80}, expected a str"
        elif len(value) > width:
            why = (f"has {len(value)} characters, more than the {width} a batch holds for it "
                   "(a longer string is refused, not cut)")
        elif value.endswith("\0"):
            why = "ends in NUL characters, which a batch's numpy string would drop"
        elif len(value) < space.min_length:
            why = f"has {len(value)} characters, fewer than the space's min_length"
        elif outside := sorted(set(value) - set(space.character_set)):
            why = f"has characters outside the space's charset: {''.join(outside)!r}"
        else:  # a subclass's own contains said no
            why = "is not in its space (its contains() is False)"
        fix = ("make the env return strings its space contains" if is_text else
               "declare the part as gymnasium.spaces.Text(max_length=...) for a wider column")
        raise ValueError(f"{env_name}: {what} {value!r:.120} {why}; its space is {space}; "
                         f"{fix}")

    return check


def _key_of(name: str) -> str | int:
    key = name[len("obs."):]
    return int(key) if key.isdigit() else key


if __name__ == "__main__":
    main()
