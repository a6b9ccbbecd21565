"""Every async test runs on the default asyncio loop and on uvloop (those marked
``asyncio_loop_only``, whose subject does not depend on the loop, and the parity suites, on the
first only), and fails if the loop's exception handler fired (an exception in a callback, a
never-retrieved future, ...).

A test whose optional package is missing skips with the command that installs it (every such
package is in the ``test`` extra: ``pip install -e ".[test]"``). Under ``CI=true`` that skip is a
failure instead: CI runs the README's test line, whose extra must install everything the suite
needs, so CI cannot pass by skipping what a newcomer's run would skip. Skips for other reasons
(the machine has no FMA, a test that does not apply to the Ray backend) stay skips; README.md's
Development section lists those of a README run."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Generator, Iterator
from typing import Any

import helpers
import metaworld_reference
import pytest
import uvloop

from aiopool._render import headless_defaults

# Off screen, the GL backend that renders headless (EGL), as aiopool chooses it: before a test
# module imports dm_control, which picks its backend at its first import.
headless_defaults()

# metaworld 3.1.1, the Meta-World family's reference, which pins another MuJoCo than the test
# extra's: installed without its dependencies into .pytest_cache where it is missing, and put on
# sys.path before a test module loads aiopool's registry, whose Meta-World envs read their models
# from it (tests/metaworld_reference.py).
metaworld_reference.on_path()

# The parity suites' ``trace`` fixture: recorded digests in the default tier, the live
# references with the slow suites (tests/recorded.py).
pytest_plugins = ["recorded"]

_HANDLER_CALLS: list[dict[str, Any]] = []


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _recording(factory: LoopFactory) -> LoopFactory:
    def make() -> asyncio.AbstractEventLoop:
        loop = factory()
        loop.set_exception_handler(lambda _loop, context: _HANDLER_CALLS.append(context))
        return loop

    return make


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, LoopFactory]:
    """Both loops, except for the ``asyncio_loop_only`` tests and the parity suites: a parity
    case compares an env's arithmetic with its reference's, which no loop changes; the pool's
    behaviour on each loop is what the contract tests check, on both loops."""
    if (item.get_closest_marker("asyncio_loop_only") is not None
            or item.path.name.startswith("test_parity_")):
        return {"asyncio": _recording(asyncio.new_event_loop)}
    return {"asyncio": _recording(asyncio.new_event_loop),
            "uvloop": _recording(uvloop.new_event_loop)}


# The async contract's suites: their uvloop cases are the default tier's. The uvloop cases of
# the other suites (adapters, backends, rendering, inference: what they check does not depend
# on the loop, which the contract suites check on both) run with the slow suites.
CONTRACT_SUITES = {
    "test_basics.py", "test_bad_input.py", "test_cancellation.py", "test_close.py",
    "test_consumers.py", "test_fairness.py", "test_fault_delivery.py", "test_lifetime.py",
    "test_loop_change.py", "test_stateful.py", "test_timeouts.py", "test_waiters.py"}


# Under pytest-xdist (``pytest -m slow -n auto``), the parity suites' cases spread over the
# workers one by one: each steps its own pool and reference. Every other file runs whole on one
# worker, as its module fixtures expect (one Ray, one MLServer, one build of the C++ core
# tests, one CPU-kernel matrix); the two Ray files share one worker. (xdist's own
# ``xdist_group`` marks do not reach its scheduler under pytest 9.2.)
SHARED_UNITS = {"test_contract_on_ray.py": "ray", "test_distributed.py": "ray"}
# The units that take minutes go first, longest first (measured: minutes of CPU, or of wall for
# Ray's, in an exhaustive run), so that none starts last and leaves the other workers idle at
# the end; then the others, the units with more tests first (xdist's own order).
FIRST_UNITS = ("tests/test_cpu_dispatch.py", "ray", "tests/test_native.py",
               "tests/test_stateful.py", "tests/test_ppo_example.py",
               "tests/test_process_backend.py", "tests/test_ppo_mujoco_atari_examples.py",
               "tests/test_stateful_process.py")


def xdist_unit(nodeid: str) -> str:
    """The unit of work ``nodeid`` belongs to: itself for a parity case, else its file's."""
    path = nodeid.split("::", 1)[0]
    name = path.rsplit("/", 1)[-1]
    if name.startswith("test_parity_"):
        return nodeid
    return SHARED_UNITS.get(name, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    config.option.loadscopereorder = False  # the workers collect in xdist_order's order
    return Units(config, log)


def xdist_order(items: list[pytest.Item]) -> None:
    """Sort ``items`` so that their units come in the order xdist should hand them out:
    ``FIRST_UNITS`` first, in their order, then the units with more tests (a unit's tests stay
    together, in their order)."""
    sizes: dict[str, int] = {}
    for item in items:
        unit = xdist_unit(item.nodeid)
        sizes[unit] = sizes.get(unit, 0) + 1
    rank = {unit: k for k, unit in enumerate(FIRST_UNITS)}
    first_seen = {unit: k for k, unit in enumerate(sizes)}

    def key(item: pytest.Item) -> tuple[int, int, int]:
        unit = xdist_unit(item.nodeid)
        return rank.get(unit, len(rank)), -sizes[unit], first_seen[unit]

    items.sort(key=key)  # stable: each unit's tests keep their order


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A uvloop case outside ``CONTRACT_SUITES`` is marked slow. A recorded parity case
    (tests/recorded.py) is the default tier's: a case marked slow (whose live case runs with
    the slow suites anyway) or ``live_only`` (its policy reads the reference's state) has
    none."""
    dropped = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (callspec is not None and item.path.name not in CONTRACT_SUITES
                and "uvloop" in callspec.id.split("-")):
            item.add_marker(pytest.mark.slow)
        if (callspec is not None and callspec.params.get("trace") == "recorded"
                and (item.get_closest_marker("live_only") is not None
                     or item.get_closest_marker("slow") is not None)):
            dropped.append(item)
    if dropped:
        gone = set(dropped)
        items[:] = [item for item in items if item not in gone]
        config.hook.pytest_deselected(items=dropped)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def order_for_xdist(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A pytest-xdist worker collects the tests left after ``-m`` / ``-k`` in the order of
    their units (``xdist_order``)."""
    if hasattr(config, "workerinput"):
        xdist_order(items)


@pytest.fixture(autouse=True)
def _loop_exception_handler_stays_silent() -> Iterator[None]:
    _HANDLER_CALLS.clear()
    yield
    calls, _HANDLER_CALLS[:] = list(_HANDLER_CALLS), []
    assert not calls, f"the event loop's exception handler fired: {calls}"


@pytest.fixture(params=["threads", "processes"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a contract test on each backend: ``helpers.counting`` builds a native Counting-v0
    pool on threads, or the same env in Python in worker processes."""
    helpers.BACKEND = request.param
    try:
        yield request.param
    finally:
        helpers.BACKEND = "threads"


# -- under CI=true, a skip for a missing package fails -----------------------------------------

# A skip's reason names a missing package when it gives the pip command (the convention here:
# "needs torch: pip install -e '.[test]'") or is pytest.importorskip's default.
_MISSING_PACKAGE = re.compile(r"pip install|cannot install|could not import|No module named")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def _fail_if_missing_package(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not (report.skipped and _in_ci()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if _MISSING_PACKAGE.search(reason):
        report.outcome = "failed"
        report.longrepr = (f"CI=true: this skip means a package is missing, and CI must run "
                           f"every test: add it to the test extra in pyproject.toml.\n{reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _fail_if_missing_package(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield  # a module-level importorskip skips the whole module here
    _fail_if_missing_package(report)
    return report
