"""Record the parity suites' digests (tests/recorded.py) from their live cases.

    python -m tests.record_references                       # every parity suite
    python -m tests.record_references test_parity_dmc       # one suite
    python -m tests.record_references test_parity_mujoco -k Hopper   # some of its cases
    python -m tests.record_references --kernels             # the CPU-kernel matrix's profiles

Runs the default tier's recorded cases live (the pool beside its reference, every row
compared) with pytest and writes the digests of those that pass into
``tests/references/<suite>.json``, under this machine's CPU-kernel profile and with the
references' versions. A case that fails is not written: a recording only ever holds rows that
equalled the reference's. Run it after a change that changes what an env gives (and after
bumping a reference), then review the diff.

``--kernels`` records the profiles of the CPU-kernel matrix (tests/test_cpu_dispatch.py): for
each entry whose kernels are not this machine's own, the matrix's cases run live under the
entry's environment (other OpenBLAS kernels, numpy's SIMD targets switched off) and their
digests are written under that profile, which the matrix then checks without stepping the
references.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if argv == ["--kernels"]:
        return record_kernels()
    suites = [a.removesuffix(".py") for a in argv if a.startswith("test_")]
    rest = [a for a in argv if not a.startswith("test_")]
    if not suites:
        suites = sorted(p.stem for p in TESTS.glob("test_*.py")
                        if "from recorded import" in p.read_text())
    select = "recorded"
    scope = "whole suites"  # a recording replaces the suite's; with -k, adds to it
    if "-k" in rest:
        scope = "some cases"
        at = rest.index("-k")
        select = f"recorded and ({rest[at + 1]})"
        del rest[at:at + 2]
    # One process: each pytest-xdist worker would write the whole suite's file at its end, the
    # last one's cases replacing the others'.
    for flag in ("-n", "--numprocesses"):
        if flag in rest:
            at = rest.index(flag)
            del rest[at:at + 2]
    rest = [a for a in rest if not a.startswith(("-n=", "--numprocesses="))]
    command = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
               "-m", "not slow", "-k", select,
               *(str(TESTS / f"{suite}.py") for suite in suites), *rest]
    print("recording:", " ".join(command[2:]), flush=True)
    # The recorded cases, stepped live (tests/recorded.py's LIVE_ENV), their digests written.
    env = {**os.environ, "AIOPOOL_LIVE_REFERENCES": "1", "AIOPOOL_RECORD_REFERENCES": scope}
    return subprocess.call(command, env=env, cwd=TESTS.parent)


def record_kernels() -> int:
    sys.path.insert(0, str(TESTS))
    from recorded import KERNEL_CASES, KERNEL_MATRIX, KERNEL_SUITES, probe_kernels

    _, own = probe_kernels({})
    done = {own}
    status = 0
    for name, entry, _ in KERNEL_MATRIX:
        _, profile = probe_kernels(entry)
        if profile in done:
            print(f"{name}: {profile} recorded already (this machine's, or an entry's before)")
            continue
        done.add(profile)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m",
                   "not slow", "-k", f"recorded and ({KERNEL_CASES})", *KERNEL_SUITES]
        print(f"recording {name} ({profile}):", " ".join(f"{k}={v}" for k, v in entry.items()),
              flush=True)
        env = {**os.environ, **entry, "AIOPOOL_LIVE_REFERENCES": "1",
               "AIOPOOL_RECORD_REFERENCES": "some cases"}
        status = subprocess.call(command, env=env, cwd=TESTS.parent) or status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
