"""Parity on every CPU: the envs compute what numpy computes, whichever kernels numpy picks.

numpy picks CPU-specific code at run time: OpenBLAS chooses a ddot kernel per CPU (its SkylakeX
kernel rounds np.linalg.norm differently from its Haswell one), and numpy's ufuncs choose a loop
per CPU (SVML sin/cos for float64 on AVX-512, an FMA polynomial for float32 on AVX2). The native
modules call numpy's own kernels (aiopool/_native/numpy_math.h). These tests check that they are
numpy's, and run the parity suites in subprocesses under other OpenBLAS core types and with
numpy's SIMD targets switched off, so one machine stands in for others.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from recorded import (
    KERNEL_CASES,
    KERNEL_MATRIX,
    KERNEL_SUITES,
    LIVE_ENV,
    openblas_corename,
    probe_kernels,
    profile_recorded,
)

from aiopool.registry import _modules

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_the_envs_kernels_are_numpys_own(module: object) -> None:
    rng = np.random.default_rng(0)
    x64 = np.concatenate([rng.uniform(-4, 4, 50_000), rng.uniform(-1e3, 1e3, 20_000)])
    x32 = x64.astype(np.float32)
    for name in ("sin", "cos"):
        ours = np.array(module._np_unary(name, x64))  # type: ignore[attr-defined]
        np.testing.assert_array_equal(ours, getattr(np, name)(x64), err_msg=f"float64 {name}")
        ours32 = np.array(module._np_unary_f32(name, x32), dtype=np.float32)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(ours32, getattr(np, name)(x32), err_msg=f"float32 {name}")
    # exp, log, log1p, arcsinh, tanh (float64): the Control Suite's rewards and sensors
    for name, x in (("exp", -0.5 * np.abs(x64)), ("log", np.abs(x64) + 1e-300),
                    ("log1p", np.abs(x64)), ("arcsinh", x64), ("tanh", x64 / 100)):
        ours = np.array(module._np_unary(name, x))  # type: ignore[attr-defined]
        np.testing.assert_array_equal(ours, getattr(np, name)(x), err_msg=f"float64 {name}")
    y = rng.standard_normal(len(x64)) * np.where(rng.random(len(x64)) < 0.1, 0.0, 1.0)
    ours = np.array(module._np_arctan2(y, x64))  # type: ignore[attr-defined]
    np.testing.assert_array_equal(ours, np.arctan2(y, x64), err_msg="float64 arctan2")
    for rows, cols in ((3, 3), (4, 3), (3, 2)):  # v.dot(m): numpy's cblas_dgemv
        vs, ms = rng.standard_normal((2_000, rows)), rng.standard_normal((2_000, rows, cols))
        ours = np.array([module._np_vecmat(v, m) for v, m in zip(vs, ms, strict=True)])  # type: ignore[attr-defined]
        ref = np.array([v.dot(m) for v, m in zip(vs, ms, strict=True)])
        assert np.array_equal(ours, ref), f"v.dot(m) of {rows}x{cols} differs"
    for rows, inner, cols in ((3, 3, 3), (4, 3, 3)):  # a.dot(b): numpy's cblas_dgemm
        a_s = rng.standard_normal((2_000, rows, inner))
        b_s = rng.standard_normal((2_000, inner, cols))
        ours = np.array([module._np_matmul(a, b) for a, b in zip(a_s, b_s, strict=True)])  # type: ignore[attr-defined]
        ref = np.array([a.dot(b).ravel() for a, b in zip(a_s, b_s, strict=True)])
        assert np.array_equal(ours, ref), f"a.dot(b) of {rows}x{inner} by {inner}x{cols} differs"
    for n in (2, 3, 7):
        v = rng.standard_normal((20_000, n))
        ours = np.array(module._np_norm(v))  # type: ignore[attr-defined]
        ref = np.array([np.linalg.norm(row) for row in v])
        assert np.array_equal(ours, ref), f"np.linalg.norm of {n}-vectors differs in " \
            f"{int((ours != ref).sum())} of {len(v)} cases"


def test_float32_sin_is_numpys_loop_not_libm() -> None:
    """Where numpy's float32 loop differs from libm (AVX2 + FMA and up), ours follows numpy:
    the resolution found numpy's dispatched loop, not a libm fallback."""
    x = np.random.default_rng(1).uniform(-3, 3, 20_000).astype(np.float32)
    libm = np.array([math.sin(float(v)) for v in x], dtype=np.float32)
    if np.array_equal(libm, np.sin(x)):
        pytest.skip("numpy's float32 sin equals libm's on this CPU (no FMA target)")
    ours = np.array(_modules()[0]._np_unary_f32("sin", x), dtype=np.float32)
    np.testing.assert_array_equal(ours, np.sin(x))


# The matrix (tests/recorded.py's KERNEL_MATRIX): each entry runs the parity cases whose
# arithmetic goes through CPU-dispatched numpy code in a subprocess under other CPUs' kernels.
# An entry whose kernel profile is recorded (``python -m tests.record_references --kernels``
# records each one beside its live references) checks the native rows against that recording,
# as the default tier does on this CPU's kernels, ~40 s of CPU; one never recorded here (another
# CPU) steps its live references, ~2 min; ``AIOPOOL_LIVE_REFERENCES=1`` makes every entry live.
# All run with the slow suites; the default run keeps the kernel test above, which compares each
# kernel with numpy's on this CPU. An entry whose kernels are this CPU's own is skipped (the
# default run's parity suites ran them).
MATRIX = [pytest.param(env, corename, id=name, marks=pytest.mark.slow)
          for name, env, corename in KERNEL_MATRIX]


def _skip_reason(env: dict[str, str], corename: str | None) -> str | None:
    if openblas_corename() is None:
        return "numpy's BLAS is not OpenBLAS: OPENBLAS_CORETYPE does not apply"
    if corename == openblas_corename() and not any(k.startswith("NPY_") for k in env):
        return f"this CPU runs OpenBLAS's {corename!r} kernels: the default run covers them"
    return None


class MatrixRun(NamedTuple):
    proc: subprocess.Popen[bytes]
    log: Path
    corename: str | None  # what OpenBLAS reported under the entry's environment
    live: bool  # its references step beside it (its profile was never recorded, or asked for)


@pytest.fixture(scope="module")
def matrix_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[dict[str, MatrixRun]]:
    """The parity runs of every entry of the matrix this session runs, started together: each
    is one Python process, so on 2 cores three take the time of two."""
    selected = {item.callspec.id for item in request.session.items
                if getattr(item, "originalname", "") == "test_parity_under_other_cpus_kernels"}
    runs = {}
    for name, env, corename in KERNEL_MATRIX:
        if name not in selected or _skip_reason(env, corename) is not None:
            continue
        reported, profile = probe_kernels(env)
        live = bool(os.environ.get(LIVE_ENV)) or not profile_recorded(profile)
        out = tmp_path_factory.mktemp("kernels") / f"{name}.log"
        with out.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m",
                 "not slow", "-k", KERNEL_CASES, *KERNEL_SUITES], cwd=ROOT,
                env={**os.environ, **env, **({LIVE_ENV: "1"} if live else {})}, stdout=log,
                stderr=subprocess.STDOUT)
        runs[name] = MatrixRun(proc, out, reported, live)
    yield runs
    for run in runs.values():
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()


@pytest.mark.timeout(1200)  # the first entry waits for its run, which shares the cores
@pytest.mark.parametrize(("env", "corename"), MATRIX)
def test_parity_under_other_cpus_kernels(env: dict[str, str], corename: str | None,
                                         matrix_runs: dict[str, MatrixRun],
                                         request: pytest.FixtureRequest) -> None:
    reason = _skip_reason(env, corename)
    if reason is not None:
        pytest.skip(reason)
    run = matrix_runs[request.node.callspec.id]
    if corename is not None:
        assert run.corename == corename, (
            f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} should run OpenBLAS's {corename} "
            f"kernels, got {run.corename!r}")
    try:
        returncode = run.proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        raise
    out = run.log.read_text(errors="replace")
    how = "beside the live references" if run.live else "against the recording"
    assert returncode == 0, f"parity with {env} ({how}) failed:\n{out[-6000:]}"
    summary = out.strip().splitlines()[-1]
    # A recorded case skips where its profile is missing: none may, or the entry checked nothing.
    assert " passed" in summary and "skipped" not in summary, out[-2000:]
