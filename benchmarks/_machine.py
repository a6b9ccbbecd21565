"""What every benchmark records about the machine it ran on, and the busy neighbour it can add.

A result without its machine and load is not a result: each script stores ``machine_info()``
in its JSON and prints the load average at its start and end (``load_text``).
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np


def machine_info(*packages: str) -> dict[str, Any]:
    """CPU model, cores (all and usable), kernel, and the versions of Python, numpy and each
    of ``packages`` that imports."""
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for name in packages:
        with contextlib.suppress(ImportError):
            versions[name] = __import__(name).__version__
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "kernel": platform.release(), "versions": versions}


def load_text(load: tuple[float, float, float] | list[float]) -> str:
    """A load average triple as ``1.00/0.50/0.25``."""
    return "/".join(f"{x:.2f}" for x in load)


@contextlib.contextmanager
def busy_neighbour(on: bool) -> Iterator[int | None]:
    """A process spinning on the last usable core while the block runs (its core, or None)."""
    if not on:
        yield None
        return
    core = max(os.sched_getaffinity(0))
    proc = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})"
                             "\nwhile True: pass"])
    try:
        yield core
    finally:
        proc.kill()
        proc.wait(timeout=10)
