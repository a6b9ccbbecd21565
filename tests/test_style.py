"""The style tools run with the tests: ruff and mypy for Python, clang-format for C++."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff() -> None:
    r = _run(sys.executable, "-m", "ruff", "check", "aiopool", "tests", "benchmarks", "examples")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy() -> None:
    # mypy reads these packages' types (aiopool/inference imports them); all are in the test extra
    missing = [m for m in ("torch", "grpc", "google.protobuf", "mlserver")
               if importlib.util.find_spec(m.split(".")[0]) is None
               or importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (mypy reads their types): "
                    "pip install -e '.[test]'")
    r = _run(sys.executable, "-m", "mypy")
    assert r.returncode == 0, r.stdout + r.stderr


def test_clang_format() -> None:
    exe = shutil.which("clang-format") or str(Path(sys.executable).parent / "clang-format")
    if not Path(exe).exists():
        pytest.skip("clang-format is not installed (pip install clang-format)")
    sources = sorted(str(p.relative_to(ROOT)) for p in
                     [*ROOT.glob("aiopool/_native/**/*.h"), *ROOT.glob("aiopool/_native/**/*.cc"),
                      *ROOT.glob("tests/native/*.cc"), *ROOT.glob("benchmarks/*.cc")])
    r = _run(exe, "--dry-run", "-Werror", *sources)
    assert r.returncode == 0, r.stderr[-3000:]
