"""Meta-World 3.1.1, the reference of the Meta-World family, as the tests run it.

metaworld 3.1.1 pins ``mujoco==3.3.0``; aiopool runs its tasks on ``mujoco==3.17.0``, which the
``test`` extra already holds, so pip cannot install it from the extra. Where no metaworld 3.1.1
is installed, ``on_path()`` installs it without its dependencies (``pip install --no-deps
--target``) into ``.pytest_cache/aiopool-metaworld-3.1.1`` once, and puts that directory on
``sys.path``; its other dependencies (gymnasium, numpy, scipy, imageio) are in the extra.
conftest.py calls it before any test module loads aiopool's registry, whose Meta-World family
reads its models from the installed package.

On MuJoCo 3.17.0 every metaworld env's constructor fails in
``SawyerMocapBase.reset_mocap_welds``: a weld has 12 ``eq_data`` numbers in 3.17.0 and 11 in
3.3.0, and the method assigns 11. ``patched()`` replaces the method, in memory and for this
process only, with the same assignment to the first 11 (``eq_data[i][:11] = ...``), which
aiopool's envs also do (aiopool/_native/envs/metaworld/sawyer.h). The installed package is never
changed.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import numpy as np

VERSION = "3.1.1"
CACHE = Path(__file__).resolve().parent.parent / ".pytest_cache" / f"aiopool-metaworld-{VERSION}"
# SawyerMocapBase.reset_mocap_welds's values, as metaworld 3.1.1 writes them.
WELD = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0]


def _installed() -> bool:
    try:
        return importlib.metadata.version("metaworld") == VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


def on_path() -> str | None:
    """Make metaworld 3.1.1 importable; None, or why it is not (pip could not install it)."""
    if _installed():
        return None
    if not CACHE.is_dir():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        staging = tempfile.mkdtemp(prefix="aiopool-metaworld-", dir=CACHE.parent)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--target", staging, f"metaworld=={VERSION}"],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            return f"pip install --no-deps metaworld=={VERSION} failed: {done.stderr[-500:]}"
        try:
            os.rename(staging, CACHE)  # atomic: another pytest-xdist worker may have won
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    sys.path.insert(0, str(CACHE))
    importlib.invalidate_caches()
    return None if _installed() else f"metaworld=={VERSION} is not importable from {CACHE}"


def patched() -> ModuleType:
    """metaworld, its ``reset_mocap_welds`` made to run on MuJoCo 3.17.0 (see above)."""
    import metaworld
    import mujoco
    from metaworld.sawyer_xyz_env import SawyerMocapBase

    def reset_mocap_welds(self: SawyerMocapBase) -> None:
        if self.model.nmocap > 0 and self.model.eq_data is not None:
            for i in range(self.model.eq_data.shape[0]):
                if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                    self.model.eq_data[i][:11] = np.array(WELD)

    SawyerMocapBase.reset_mocap_welds = reset_mocap_welds
    return metaworld
