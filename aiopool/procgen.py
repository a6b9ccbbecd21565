"""Procgen's library: procgen 0.10.7's wheel from PyPI, fetched once, checked, loaded at run time.

procgen 0.10.7, its last release, has wheels for Python 3.7-3.10 only and no sdist. Its cp310
manylinux2014 wheel holds ``procgen/data/prebuilt/libenv.so``, a self-contained library (Qt
5.13.2 linked in statically, no libpython) that exports gym3's libenv C ABI, and the games'
assets. aiopool's Procgen envs load that library in C++ (``_native/envs/procgen/``), so they run
on any Python aiopool supports and their frames are procgen's own.

Nothing of procgen is in aiopool's repository or its wheel. The first ``aiopool.make`` of a
Procgen id fetches the wheel with pip (``pip download``, the registry's own client), checks its
sha256 against the one recorded here, and unpacks its ``procgen/`` package into a cache folder:
``$AIOPOOL_PROCGEN_DIR``, else ``$XDG_CACHE_HOME/aiopool/procgen-0.10.7`` (``~/.cache/...``).
To fetch ahead of time (an offline machine, a container image)::

    python -m aiopool.procgen install            # or: aiopool.procgen.install()

``AIOPOOL_PROCGEN_FETCH=0`` turns the automatic fetch off: make then says how to install it.
procgen is MIT-licensed; its library links Qt 5.13.2 (LGPL-3.0), see LICENSES/PROCGEN.md.

The tests and benchmarks compare against procgen's own ``ProcgenGym3Env`` over the same files:
``reference_env`` loads it (and gym3 0.3.3, fetched the same way) without installing either.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import types
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

VERSION = "0.10.7"
WHEEL = f"procgen-{VERSION}-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
WHEEL_SHA256 = "4b594d14e42f0f2166e59a9e294477b906eb99c90c3343b570b7124cbc865f53"
# gym3, whose ProcgenGym3Env base class (gym3.libenv.CEnv) the reference needs; pure Python.
GYM3_VERSION = "0.3.3"
GYM3_WHEEL = f"gym3-{GYM3_VERSION}-py3-none-any.whl"
GYM3_SHA256 = "bacc0e124f8ce5e1d8a9dceb85725123332954f13ef4e226133506597548838a"

_INSTALL = "python -m aiopool.procgen install"


class ProcgenNotInstalled(ImportError):
    """procgen's library is not in the cache folder and could not (or may not) be fetched."""


def cache_dir() -> Path:
    """The folder that holds the unpacked ``procgen/`` package (and gym3, for the reference)."""
    if os.environ.get("AIOPOOL_PROCGEN_DIR"):
        return Path(os.environ["AIOPOOL_PROCGEN_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aiopool" / f"procgen-{VERSION}"


def library_path() -> Path:
    """procgen's ``libenv.so`` in the cache folder (there or not)."""
    return cache_dir() / "procgen" / "data" / "prebuilt" / "libenv.so"


def assets_path() -> Path:
    """procgen's asset folder in the cache folder, as its ``resource_root`` (ends in a slash)."""
    return cache_dir() / "procgen" / "data" / "assets"


def installed() -> bool:
    """Whether the cache folder holds the checked, unpacked wheel."""
    return (cache_dir() / f"{WHEEL}.sha256").is_file() and library_path().is_file()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``folder`` (several processes may fetch at once)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _download(requirement: str, wheel: str, sha256: str, into: Path, *pip_args: str) -> Path:
    """``pip download`` one wheel, without its dependencies, and check its sha256."""
    command = [sys.executable, "-m", "pip", "download", requirement, "--no-deps",
               "--only-binary=:all:", "--disable-pip-version-check", "-d", str(into), *pip_args]
    done = subprocess.run(command, capture_output=True, text=True)
    path = into / wheel
    if done.returncode != 0 or not path.is_file():
        raise ProcgenNotInstalled(
            f"could not fetch {wheel} from PyPI with pip ({' '.join(command[2:])}): "
            f"{(done.stderr or done.stdout).strip()[-2000:]}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ProcgenNotInstalled(f"{wheel} from PyPI has sha256 {digest}, expected {sha256}; "
                                  "nothing was installed")
    return path


def _unpack(wheel: Path, package: str, folder: Path) -> None:
    """Unpack ``package/`` of ``wheel`` into ``folder`` (replaced whole, never half-written)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{package}-", dir=folder.parent))
    try:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(staging, [n for n in z.namelist() if n.startswith(f"{package}/")])
        target = folder / package
        if target.exists():
            shutil.rmtree(target)
        folder.mkdir(parents=True, exist_ok=True)
        os.replace(staging / package, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install(quiet: bool = False) -> Path:
    """Fetch procgen 0.10.7's cp310 manylinux2014 wheel from PyPI with pip, check its sha256
    and unpack it into ``cache_dir()``. Does nothing where it is installed already.

    Returns:
        The path of ``libenv.so``.

    Raises:
        ProcgenNotInstalled: not Linux x86-64 (the only platform the library is built for),
            pip failed (no network: its message says why) or the wheel's hash differs.
    """
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise ProcgenNotInstalled(f"procgen's prebuilt library is for Linux x86-64; this is "
                                  f"{sys.platform} {platform.machine()}")
    folder = cache_dir()
    with _locked(folder):
        if installed():
            return library_path()
        if not quiet:
            print(f"aiopool: fetching procgen {VERSION}'s library from PyPI into {folder} "
                  "(once; 36 MB)", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="aiopool-procgen-") as tmp:
            wheel = _download(f"procgen=={VERSION}", WHEEL, WHEEL_SHA256, Path(tmp),
                              "--python-version", "3.10", "--platform", "manylinux2014_x86_64")
            _unpack(wheel, "procgen", folder)
        (folder / f"{WHEEL}.sha256").write_text(WHEEL_SHA256 + "\n")
    return library_path()


def ensure(env_id: str) -> tuple[str, str]:
    """The library and asset folder for ``env_id``'s envs, fetched first where missing (unless
    ``AIOPOOL_PROCGEN_FETCH=0``)."""
    if not installed():
        if os.environ.get("AIOPOOL_PROCGEN_FETCH", "1") == "0":
            raise ProcgenNotInstalled(
                f"{env_id} runs procgen {VERSION}'s own library, which is not installed in "
                f"{cache_dir()} (AIOPOOL_PROCGEN_FETCH=0 keeps make from fetching it): run "
                f"`{_INSTALL}` where PyPI can be reached")
        try:
            install()
        except ProcgenNotInstalled as e:
            raise ProcgenNotInstalled(f"{env_id} runs procgen {VERSION}'s own library: {e}. "
                                      f"Run `{_INSTALL}` where PyPI can be reached, or set "
                                      "AIOPOOL_PROCGEN_DIR to a folder that holds it") from None
    return str(library_path()), str(assets_path()) + os.sep


def reference_env(**kwargs: Any) -> Any:
    """procgen's own ``ProcgenGym3Env(**kwargs)`` over the library in ``cache_dir()``: the
    reference of aiopool's Procgen envs in tests and benchmarks. gym3 0.3.3 (pure Python; it
    needs cffi and imageio installed) is fetched beside it and checked the same way; procgen's
    package is imported without its ``__init__``, which registers gym (not gymnasium) ids.
    """
    install()
    folder = cache_dir()
    gym3_dir = folder / f"gym3-{GYM3_VERSION}"  # its own folder: only gym3 goes on sys.path
    with _locked(folder):
        if not (gym3_dir / f"{GYM3_WHEEL}.sha256").is_file():
            gym3_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="aiopool-gym3-") as tmp:
                _unpack(_download(f"gym3=={GYM3_VERSION}", GYM3_WHEEL, GYM3_SHA256, Path(tmp)),
                        "gym3", gym3_dir)
            (gym3_dir / f"{GYM3_WHEEL}.sha256").write_text(GYM3_SHA256 + "\n")
    if str(gym3_dir) not in sys.path:
        sys.path.append(str(gym3_dir))
    name = "_aiopool_procgen_reference"  # procgen's package, without its __init__
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(folder / "procgen")]
        sys.modules[name] = package
    env = importlib.import_module(f"{name}.env")
    return env.ProcgenGym3Env(**kwargs)


def main(argv: list[str] | None = None) -> int:
    """``python -m aiopool.procgen install``: fetch the library now; ``path``: print where."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["install"]:
        print(install())
        return 0
    if args == ["path"]:
        print(library_path() if installed() else f"not installed (would be {library_path()})")
        return 0
    print("usage: python -m aiopool.procgen install | path", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
