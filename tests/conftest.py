"""Every async test runs on the default asyncio loop and on uvloop, and fails if the loop's
exception handler fired (an exception in a callback, a never-retrieved future, ...)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import helpers
import pytest
import uvloop

_HANDLER_CALLS: list[dict[str, Any]] = []


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _recording(factory: LoopFactory) -> LoopFactory:
    def make() -> asyncio.AbstractEventLoop:
        loop = factory()
        loop.set_exception_handler(lambda _loop, context: _HANDLER_CALLS.append(context))
        return loop

    return make


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, LoopFactory]:
    return {"asyncio": _recording(asyncio.new_event_loop),
            "uvloop": _recording(uvloop.new_event_loop)}


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
