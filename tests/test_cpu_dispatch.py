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
from typing import Any

import numpy as np
import pytest
from recorded import LIVE_ENV, openblas_corename

from aiopool.registry import _modules

ROOT = Path(__file__).resolve().parent.parent


def _openblas_corename() -> bytes | None:
    """The OpenBLAS kernel family numpy's BLAS runs on this CPU, or None if it is no OpenBLAS."""
    name = openblas_corename()
    return None if name is None else name.encode()


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


# (environment, what OpenBLAS must report, if anything): one entry per distinct set of kernels.
# 1.5-2 min each (the parity suites of every family with numpy code), so all run with the slow
# suites; the default run keeps the kernel test above, which compares each kernel with numpy's on
# this CPU. Entries that would repeat a kernel set are left out: OpenBLAS runs its Haswell kernels
# for OPENBLAS_CORETYPE=Zen and its SkylakeX ones for Cooperlake (it reports so), and an entry
# whose kernels are this CPU's own is skipped (the default run's parity suites ran them).
_SLOW = pytest.mark.slow
MATRIX = [
    pytest.param({"OPENBLAS_CORETYPE": "SkylakeX"}, b"SkylakeX", id="SkylakeX", marks=_SLOW),
    pytest.param({"OPENBLAS_CORETYPE": "Haswell"}, b"Haswell", id="Haswell", marks=_SLOW),
    # a CPU with AVX but neither AVX2 nor FMA: numpy's baseline loops, OpenBLAS's Sandy Bridge
    pytest.param({"OPENBLAS_CORETYPE": "Sandybridge",
                  "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"},
                 b"Sandybridge", id="Sandybridge-numpy-baseline", marks=_SLOW),
    pytest.param({"OPENBLAS_CORETYPE": "Prescott"}, None, id="Prescott", marks=_SLOW),
]
PARITY = ["tests/test_parity_mujoco.py::test_default_kwargs_match_gymnasium",
          "tests/test_parity_classic_control.py", "tests/test_parity_dmc.py",
          "tests/test_cpu_dispatch.py::test_the_envs_kernels_are_numpys_own"]
# Box2D's envs (CarRacing too) go through no CPU-dispatched numpy code (Box2D's own C++,
# Python's math), nor do the toy-text envs (integer steps, the Generator's draws) or the Control
# Suite's spec checks: their cases (minutes) are left out of the matrix; so are the other
# autoreset modes, which run the same arithmetic as next_step, and the tasks whose arithmetic
# another task of their domain runs (the dog's walk and trot are its run at other speeds; the
# CMU humanoid's walk is its run).
NOT_DISPATCHED = " and ".join(
    f"not {name}" for name in (
        "LunarLander", "BipedalWalker", "same_step", "disabled", "uvloop",
        "CarRacing", "Taxi", "FrozenLake", "CliffWalking", "Blackjack",
        "test_ids_specs_and_kwargs",
        "dog-walk", "dog-trot", "humanoid_CMU-walk"))



def _skip_reason(env: dict[str, str], corename: bytes | None) -> str | None:
    if _openblas_corename() is None:
        return "numpy's BLAS is not OpenBLAS: OPENBLAS_CORETYPE does not apply"
    if corename == _openblas_corename() and not any(k.startswith("NPY_") for k in env):
        return f"this CPU runs OpenBLAS's {corename!r} kernels: the default run covers them"
    return None


@pytest.fixture(scope="module")
def matrix_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], Path]]]:
    """The parity runs of every entry of the matrix this session runs, started together: each
    is one Python process, mostly its references stepping, so on 2 cores three take the time
    of two. The default tier's cases run beside their live references (tests/recorded.py: the
    digests recorded on this CPU's kernels do not apply to others')."""
    selected = {item.callspec.id for item in request.session.items
                if getattr(item, "originalname", "") == "test_parity_under_other_cpus_kernels"}
    runs = {}
    for entry in MATRIX:
        env, corename = entry.values
        if entry.id not in selected or _skip_reason(env, corename) is not None:
            continue
        out = tmp_path_factory.mktemp("kernels") / f"{entry.id}.log"
        with out.open("wb") as log:
            runs[entry.id] = (subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m",
                 "not slow", "-k", NOT_DISPATCHED, *PARITY], cwd=ROOT,
                env={**os.environ, **env, LIVE_ENV: "1"}, stdout=log, stderr=subprocess.STDOUT),
                out)
    yield runs
    for proc, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(1200)  # the first entry waits for its run, which shares the cores
@pytest.mark.parametrize(("env", "corename"), MATRIX)
def test_parity_under_other_cpus_kernels(env: dict[str, str], corename: bytes | None,
                                         matrix_runs: dict[str, Any],
                                         request: pytest.FixtureRequest) -> None:
    reason = _skip_reason(env, corename)
    if reason is not None:
        pytest.skip(reason)
    full = {**os.environ, **env}
    if corename is not None:
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); from recorded "
             "import openblas_corename as c; print(c())"], cwd=ROOT, env=full,
            capture_output=True, text=True, timeout=60)
        assert probe.stdout.strip() == corename.decode(), (
            f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} should run OpenBLAS's "
            f"{corename.decode()} kernels, got {probe.stdout.strip()!r} {probe.stderr[-500:]}")
    proc, log = matrix_runs[request.node.callspec.id]
    try:
        returncode = proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    out = log.read_text(errors="replace")
    assert returncode == 0, f"parity with {env} failed:\n{out[-6000:]}"
    assert " passed" in out.strip().splitlines()[-1], out[-500:]
