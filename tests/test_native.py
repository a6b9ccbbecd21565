"""The native engine's standalone C++ tests (tests/native/test_core.cc), one flavour per test.

Each test runs ``tests/native/build_and_run.sh`` for one flavour: it compiles the binary with
g++ and runs it, failing on a non-zero exit, a sanitizer report or a missing closing line. The
plain build runs by default; the sanitizer builds (ASan+UBSan, TSan) are marked slow.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

NATIVE = Path(__file__).resolve().parent / "native"
SCRIPT = NATIVE / "build_and_run.sh"
CLOSING_LINE = re.compile(r"^native: (\d+) passed, 0 failed$", re.MULTILINE)
SANITIZER_FLAGS = {"asan": ["-fsanitize=address,undefined"], "tsan": ["-fsanitize=thread"]}


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


def _skip_unless_buildable(flavour: str, tmp_path: Path) -> None:
    cxx = _compiler()
    if shutil.which(cxx) is None:
        pytest.skip(f"{cxx} not found on PATH; the native tests need g++ (or set CXX)")
    if shutil.which("bash") is None:
        pytest.skip("bash not found; build_and_run.sh needs it")
    flags = SANITIZER_FLAGS.get(flavour)
    if flags is None:
        return
    probe = tmp_path / "probe.cc"
    probe.write_text("int main() { return 0; }\n")
    result = subprocess.run(
        [cxx, *flags, str(probe), "-o", str(tmp_path / "probe")],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(
            f"{cxx} cannot link {' '.join(flags)} (sanitizer runtime not installed?): "
            f"{result.stderr.strip()[:200]}"
        )


def _run_flavour(flavour: str, tmp_path: Path) -> None:
    _skip_unless_buildable(flavour, tmp_path)
    result = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "build"), flavour],
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, (
        f"native {flavour} tests failed (exit {result.returncode}):\n{output[-6000:]}"
    )
    match = CLOSING_LINE.search(result.stdout)
    assert match is not None, f"no closing line in the {flavour} output:\n{output[-6000:]}"
    assert int(match.group(1)) > 0


@pytest.mark.slow  # the C++ core tests build in ~25 s: with the sanitizer builds
def test_native_plain(tmp_path: Path) -> None:
    _run_flavour("plain", tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_native_asan_ubsan(tmp_path: Path) -> None:
    _run_flavour("asan", tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_native_tsan(tmp_path: Path) -> None:
    _run_flavour("tsan", tmp_path)
