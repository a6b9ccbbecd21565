"""Recorded digests of the references' trajectories: how the default tier checks every native env
against its reference without stepping the reference.

A parity case steps a native pool and, beside it, the reference (gymnasium, dm_control,
ale-py), and compares every row. Its ``trace`` fixture runs it twice:

- ``live`` (the exhaustive tier, ``pytest -m slow``): both sides step and every row is compared
  as before; then the native rows' digests must equal the recorded ones, or the test fails
  saying that the recording no longer matches the live reference and how to record it anew.
- ``recorded`` (the default tier): only the native pool steps, and its rows' digests must equal
  the recorded ones, which a live run that passed wrote. Equal digests mean equal bytes: the
  rows are those the live run compared with the reference, bit for bit.

A digest covers, per env, each chunk of ``CHUNK`` consecutive rows: every column of the row
(each observation part, the reward, terminated, truncated and each info column, with its name,
dtype and shape) and every frame the case rendered. ``final_obs`` / ``final_info`` and the
episode statistics count only on rows that end an episode (elsewhere they hold whatever the
block held), and an info column with a ``_key`` mask only where it is set. So a mismatch names
the env and its rows, and a flipped bit anywhere fails (tests/test_recorded.py shows it).

The recordings are ``tests/references/<test module>.json``, made by
``python -m tests.record_references`` (the live cases of the parity suites, written where they
pass). Each holds the versions of the references that produced it and, per CPU-kernel profile
(numpy's SIMD targets and OpenBLAS's kernel: the envs call numpy's own kernels, which round
differently on other CPUs, as the references do), the cases' digests. A machine whose profile was
never recorded skips the recorded cases, saying so; its live cases still run.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

CHUNK = 32  # rows per digest
STORE = Path(__file__).resolve().parent / "references"
RECORD_ENV = "AIOPOOL_RECORD_REFERENCES"  # set by tests/record_references.py
# Set: every traced case steps its reference beside the pool, recorded ones included (the
# CPU-kernel matrix of tests/test_cpu_dispatch.py: other kernels give other rows, on both sides).
LIVE_ENV = "AIOPOOL_LIVE_REFERENCES"
REFERENCES = ("gymnasium", "mujoco", "dm-control", "ale-py", "box2d", "pygame-ce", "minigrid",
              "metaworld", "scipy", "numpy")
# Columns that hold a value only on the rows that end an episode.
AT_EPISODE_END = ("final_obs", "final_info", "episode_return", "episode_length")


def versions() -> dict[str, str]:
    """The installed versions of the references (and numpy, whose kernels they run)."""
    out = {}
    for name in REFERENCES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def openblas_corename() -> str | None:
    """The OpenBLAS kernel family numpy's BLAS runs on this CPU, or None if it is no OpenBLAS."""
    lib = ctypes.CDLL(np._core._multiarray_umath.__file__)
    for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                 "openblas_get_corename64_", "openblas_get_corename"):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            return bytes(fn()).decode()
    return None


def kernel_profile() -> str:
    """numpy's SIMD targets this CPU runs and OpenBLAS's kernel: what the envs' numpy
    arithmetic (and the references') depends on."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    targets = [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]
    return f"numpy {'+'.join(targets) or 'baseline'}; OpenBLAS {openblas_corename()}"


# The CPU-kernel matrix (tests/test_cpu_dispatch.py): environments under which numpy and
# OpenBLAS run other CPUs' kernels on this one, one entry per distinct set of kernels, with the
# OpenBLAS kernel each must report (None: whatever it picks). OpenBLAS runs its Haswell kernels
# for OPENBLAS_CORETYPE=Zen and its SkylakeX ones for Cooperlake (it reports so): no entries.
KERNEL_MATRIX: list[tuple[str, dict[str, str], str | None]] = [
    ("SkylakeX", {"OPENBLAS_CORETYPE": "SkylakeX"}, "SkylakeX"),
    ("Haswell", {"OPENBLAS_CORETYPE": "Haswell"}, "Haswell"),
    # a CPU with AVX but neither AVX2 nor FMA: numpy's baseline loops, OpenBLAS's Sandy Bridge
    ("Sandybridge-numpy-baseline",
     {"OPENBLAS_CORETYPE": "Sandybridge", "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL "
      "AVX512_SPR"}, "Sandybridge"),
    ("Prescott", {"OPENBLAS_CORETYPE": "Prescott"}, None),
]
# The parity cases each entry runs: those whose arithmetic goes through CPU-dispatched numpy
# code. Box2D's envs (CarRacing too) go through none (Box2D's own C++, Python's math), nor do
# the toy-text envs (integer steps, the Generator's draws) or the Control Suite's spec checks;
# the other autoreset modes run the same arithmetic as next_step, and some tasks run another
# task's arithmetic of their domain (the dog's walk and trot are its run at other speeds; the
# CMU humanoid's walk is its run).
KERNEL_SUITES = ["tests/test_parity_mujoco.py::test_default_kwargs_match_gymnasium",
                 "tests/test_parity_classic_control.py", "tests/test_parity_dmc.py",
                 "tests/test_cpu_dispatch.py::test_the_envs_kernels_are_numpys_own"]
KERNEL_CASES = " and ".join(
    f"not {name}" for name in (
        "LunarLander", "BipedalWalker", "same_step", "disabled", "uvloop",
        "CarRacing", "Taxi", "FrozenLake", "CliffWalking", "Blackjack",
        "test_ids_specs_and_kwargs",
        "dog-walk", "dog-trot", "humanoid_CMU-walk"))
# The recordings a kernel entry's cases are checked against.
KERNEL_STORES = ("test_parity_mujoco", "test_parity_classic_control", "test_parity_dmc")


def probe_kernels(env: Mapping[str, str]) -> tuple[str | None, str]:
    """OpenBLAS's kernel and the kernel profile a Python process runs under ``env`` (added to
    this one's environment)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); import recorded as r; "
         "print(r.openblas_corename()); print(r.kernel_profile())"],
        cwd=STORE.parent.parent, env={**os.environ, **env}, capture_output=True, text=True,
        timeout=120, check=True)
    corename, profile = out.stdout.strip().splitlines()
    return (None if corename == "None" else corename), profile


def profile_recorded(profile: str) -> bool:
    """Whether every store the kernel matrix checks holds ``profile``."""
    return all(profile in _store(module).data["profiles"] for module in KERNEL_STORES)


def case_key_of(name: str) -> str:
    """A case's key from its test's name (``test_x[asyncio-recorded-Ant-v5]``): the name
    without its source and loop, so that one recording serves both."""
    base, _, params = name.partition("[")
    drop = {"recorded", "live", "asyncio", "uvloop"}
    parts = [p for p in params.removesuffix("]").split("-") if p and p not in drop]
    return f"{base}[{'-'.join(parts)}]" if parts else base


class Store:
    """One test module's recording: ``{"references": versions, "profiles": {profile: {case:
    {"rows": [rows per env], "digests": [per env, the chunks' hex digests joined]}}}}``."""

    def __init__(self, module: str) -> None:
        self.path = STORE / f"{module}.json"
        self.data: dict[str, Any] = (json.loads(self.path.read_text()) if self.path.exists()
                                     else {"references": {}, "profiles": {}})

    def cases(self, profile: str) -> dict[str, Any]:
        return dict(self.data["profiles"].get(profile, {}))

    def write(self, profile: str, cases: Mapping[str, Any], *, replace: bool) -> None:
        """Add ``cases`` to the profile's recording, or make them all of it (``replace``: the
        whole suite was recorded, so a case no longer in it goes)."""
        self.data["references"] = versions()
        self.data["chunk_rows"] = CHUNK
        recorded = {} if replace else self.data["profiles"].get(profile, {})
        recorded.update(cases)
        self.data["profiles"][profile] = dict(sorted(recorded.items()))
        STORE.mkdir(exist_ok=True)
        # A line a case, so that a diff shows which cases a new recording changed.
        lines = ["{", f' "references": {json.dumps(self.data["references"])},',
                 f' "chunk_rows": {CHUNK},', ' "profiles": {']
        profiles = list(self.data["profiles"].items())
        for p, (name, cases) in enumerate(profiles):
            lines.append(f"  {json.dumps(name)}: {{")
            items = list(cases.items())
            for c, (key, case) in enumerate(items):
                comma = "," if c < len(items) - 1 else ""
                lines.append(f"   {json.dumps(key)}: {json.dumps(case)}{comma}")
            lines.append("  }" + ("," if p < len(profiles) - 1 else ""))
        lines += [" }", "}"]
        self.path.write_text("\n".join(lines) + "\n")


_STORES: dict[str, Store] = {}
_NEW: dict[str, dict[str, Any]] = {}  # module -> case -> recording, written at session end


def _store(module: str) -> Store:
    if module not in _STORES:
        _STORES[module] = Store(module)
    return _STORES[module]


class _Digest:
    """The running digests of one env's rows."""

    __slots__ = ("chunks", "hash", "rows")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.hash = hashlib.blake2b(digest_size=8)
        self.rows = 0

    def add(self, parts: Iterator[tuple[str, np.ndarray]]) -> None:
        for name, value in parts:
            value = np.ascontiguousarray(value)
            self.hash.update(f"{name}:{value.dtype.str}{value.shape};".encode())
            self.hash.update(value.tobytes())
        self.rows += 1
        if self.rows % CHUNK == 0:
            self.close_chunk()

    def close_chunk(self) -> None:
        self.chunks.append(self.hash.hexdigest())
        self.hash = hashlib.blake2b(digest_size=8)

    def done(self) -> tuple[int, str]:
        if self.rows % CHUNK:
            self.close_chunk()
        return self.rows, "".join(self.chunks)


def _columns(prefix: str, value: Any, row: int) -> Iterator[tuple[str, np.ndarray]]:
    """Row ``row`` of a batch column: an array, or a dict / tuple of them (nested)."""
    if isinstance(value, Mapping):
        for key, part in value.items():
            yield from _columns(f"{prefix}.{key}", part, row)
    elif isinstance(value, tuple):
        for k, part in enumerate(value):
            yield from _columns(f"{prefix}.{k}", part, row)
    else:
        yield prefix, np.asarray(value[row])


def row_columns(batch: Any, row: int) -> Iterator[tuple[str, np.ndarray]]:
    """Every column of a batch's row that the reference determines (see the module doc)."""
    ended = bool(batch.terminated[row]) or bool(batch.truncated[row])
    yield from _columns("obs", batch.obs, row)
    yield "reward", np.float64(batch.reward[row])
    yield "terminated", np.bool_(batch.terminated[row])
    yield "truncated", np.bool_(batch.truncated[row])
    info = batch.info
    for key in sorted(info):
        if key in AT_EPISODE_END and not ended:
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not bool(mask[row]):
            continue
        yield from _columns(f"info.{key}", info[key], row)


def obs_by_env(batch: Any) -> Any:
    """A batch's observations ordered by env id: what a case's policy reads (the same on both
    sides of a live case, where the rows equal the reference's)."""
    order = np.argsort(np.asarray(batch.env_id), kind="stable")
    if isinstance(batch.obs, Mapping):
        return {key: np.asarray(value)[order] for key, value in batch.obs.items()}
    if isinstance(batch.obs, tuple):
        return tuple(np.asarray(value)[order] for value in batch.obs)
    return np.asarray(batch.obs)[order]


class Trace:
    """The digests of one parity case's native rows and frames, checked against its recording
    (``recorded``), or checked and then the live reference compared (``live``), or written
    (``live`` while recording)."""

    def __init__(self, key: str, module: str, source: str) -> None:
        if os.environ.get(LIVE_ENV):
            source = "live"
        self.key, self.module, self.source = key, module, source
        self.envs: dict[int, _Digest] = {}
        self.env_id: str | None = None  # the id the case steps: the runner sets it
        self.ends = 0  # episodes ended in the rows traced
        self.ended: np.ndarray = np.zeros(0, dtype=bool)
        self.finished = False
        self.recording = source == "live" and bool(os.environ.get(RECORD_ENV))
        self.profile = kernel_profile()
        self.expected: dict[str, Any] | None = None
        if not self.recording and not os.environ.get(LIVE_ENV):
            self.expected = _store(module).cases(self.profile).get(key)
            if self.expected is None and source == "recorded":
                self._missing()

    @property
    def live(self) -> bool:
        """Whether the reference steps beside the pool."""
        return self.source == "live"

    def _missing(self) -> None:
        store = _store(self.module)
        if not store.data["profiles"]:
            pytest.fail(f"{self.module} has no recording ({store.path}): record it with "
                        f"`python -m tests.record_references {self.module}`", pytrace=False)
        if self.profile not in store.data["profiles"]:
            recorded = ", ".join(store.data["profiles"])
            pytest.skip(f"the recording was made on other CPU kernels ({recorded}); this "
                        f"machine runs {self.profile}. The live cases (pytest -m 'slow and "
                        f"live') compare with the references here, and `python -m "
                        f"tests.record_references` records this profile too")
        pytest.fail(f"{self.key} is not in {store.path}: record it with `python -m "
                    f"tests.record_references {self.module} -k '{self.key.split('[')[0]}'`",
                    pytrace=False)

    def _env(self, env: int) -> _Digest:
        if env not in self.envs:
            self.envs[env] = _Digest()
        return self.envs[env]

    def rows(self, batch: Any) -> int:
        """Digest every row of ``batch`` (in env order); returns how many ended an episode.
        ``ended`` says, per env, whether its last row ended its episode."""
        ids = np.asarray(batch.env_id)
        if len(self.ended) <= int(ids.max(initial=-1)):
            self.ended = np.concatenate([self.ended,
                                         np.zeros(int(ids.max()) + 1 - len(self.ended), bool)])
        for row in np.argsort(ids, kind="stable").tolist():
            self._env(int(ids[row])).add(row_columns(batch, row))
        ends = np.asarray(batch.terminated) | np.asarray(batch.truncated)
        self.ended[ids] = ends
        self.ends += int(ends.sum())
        return int(ends.sum())

    def frames(self, frames: Any, env_ids: Any) -> None:
        """Digest a rendered frame of each of ``env_ids``."""
        for k, env in enumerate(np.asarray(env_ids).tolist()):
            self._env(int(env)).add(iter([("frame", np.asarray(frames[k]))]))

    def done(self) -> None:
        """Compare the digests with the recording (or keep them to be written)."""
        self.finished = True
        got = {env: d.done() for env, d in sorted(self.envs.items())}
        rows = [got[env][0] for env in got]
        digests = [got[env][1] for env in got]
        if self.recording:
            _NEW.setdefault(self.module, {})[self.key] = {
                "env_id": self.env_id, "ends": self.ends, "rows": rows, "digests": digests}
            return
        if self.expected is None:  # a live case never recorded: the live comparison stands
            return
        want_rows, want = self.expected["rows"], self.expected["digests"]
        problem = None
        if rows != want_rows:
            problem = f"rows per env {rows}, recorded {want_rows}"
        else:
            for env, (mine, theirs) in enumerate(zip(digests, want, strict=True)):
                if mine != theirs:
                    chunk = next(k for k in range(0, len(mine), 16)
                                 if mine[k:k + 16] != theirs[k:k + 16]) // 16
                    problem = (f"env {env}'s rows {chunk * CHUNK}..{chunk * CHUNK + CHUNK - 1} "
                               f"(counting its reset and frames) differ from the recording")
                    break
        if problem is None:
            return
        recorded = _store(self.module).data.get("references", {})
        changed = {k: f"{recorded.get(k)} -> {v}" for k, v in versions().items()
                   if recorded.get(k) != v}
        if self.live:
            pytest.fail(f"{self.key}: the pool equals the live reference, but not the recording "
                        f"({problem}): the recording is out of date"
                        f"{f' (references changed: {changed})' if changed else ''}; record it "
                        f"anew with `python -m tests.record_references {self.module} -k "
                        f"'{self.key.split('[')[0]}'`", pytrace=False)
        pytest.fail(f"{self.key}: {problem}. The native env no longer gives the rows its "
                    f"reference gave when recorded"
                    f"{f' (references changed since: {changed})' if changed else ''}; "
                    f"`pytest -m slow -k 'live and {self.key.split('[')[0]}' tests/"
                    f"{self.module}.py` compares it with the live reference row by row",
                    pytrace=False)


@pytest.fixture(params=["recorded", pytest.param("live", marks=pytest.mark.slow)])
def trace(request: pytest.FixtureRequest) -> Iterator[Trace]:
    """A parity case's digests: ``recorded`` (the native pool alone, against the recording)
    in the default tier, ``live`` (beside the reference, and against the recording) with the
    slow suites."""
    module = request.node.path.stem
    t = Trace(case_key_of(request.node.name), module, request.param)
    yield t
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.passed:
        assert t.finished, f"{t.key}: the case never called trace.done()"
    elif t.recording:
        _NEW.get(module, {}).pop(t.key, None)  # only a passing live run is recorded


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    profile = kernel_profile()
    for module, cases in sorted(_NEW.items()):
        if cases:
            _store(module).write(profile, cases,
                                 replace=os.environ.get(RECORD_ENV) == "whole suites"
                                 and exitstatus == 0)
            print(f"\nrecorded {len(cases)} cases of {module} for {profile} in "
                  f"{_store(module).path}")
