"""Optional dependencies: an ImportError that says what to install, where the import would fail
with a bare ``No module named ...``."""

from __future__ import annotations

import importlib.util


def install_hint(feature: str, extra: str, *requirements: str) -> str:
    """What to install for ``feature``: its pip requirements and aiopool's extra that has them."""
    packages = " ".join(f'"{r}"' if any(c in r for c in "<>=") else r for r in requirements)
    return (f"{feature} needs {', '.join(requirements)}: pip install {packages} (or aiopool's "
            f"{extra} extra: pip install -e \".[{extra}]\" in aiopool's checkout)")


def require(feature: str, extra: str, *requirements: tuple[str, str]) -> None:
    """Raise ``ImportError`` with ``install_hint`` unless every module of ``requirements``
    (``(module, pip requirement)`` pairs) can be imported."""
    missing = []
    for module, requirement in requirements:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            missing.append(requirement)
    if missing:
        raise ImportError(install_hint(feature, extra, *missing))
