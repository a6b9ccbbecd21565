"""Record the parity suites' digests (tests/recorded.py) from their live cases.

    python -m tests.record_references                       # every parity suite
    python -m tests.record_references test_parity_dmc       # one suite
    python -m tests.record_references test_parity_mujoco -k Hopper   # some of its cases

Runs the default tier's recorded cases live (the pool beside its reference, every row
compared) with pytest and writes the digests of those that pass into
``tests/references/<suite>.json``, under this machine's CPU-kernel profile and with the
references' versions. A case that fails is not written: a recording only ever holds rows that
equalled the reference's. Run it after a change that changes what an env gives (and after
bumping a reference), then review the diff.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
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
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               "-m", "not slow", "-k", select,
               *(str(TESTS / f"{suite}.py") for suite in suites), *rest]
    print("recording:", " ".join(command[2:]), flush=True)
    # The recorded cases, stepped live (tests/recorded.py's LIVE_ENV), their digests written.
    env = {**os.environ, "AIOPOOL_LIVE_REFERENCES": "1", "AIOPOOL_RECORD_REFERENCES": scope}
    return subprocess.call(command, env=env, cwd=TESTS.parent)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
