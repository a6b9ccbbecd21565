"""The pool contract tests, run once more on a remote pool (``aiopool.distributed``) over a
real local Ray: the same test functions as on threads and processes, with ``helpers.counting``
building a Counting-v0 pool on one or two Ray actors. One Ray for the module (started by
``test_distributed.ray_cluster``); tests that read a native pool's internals stay native-only.
"""

from __future__ import annotations

from collections.abc import Iterator

import helpers
import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

from test_autoreset import *  # noqa: E402, F403
from test_basics import *  # noqa: E402, F403
from test_cancellation import *  # noqa: E402, F403
from test_consumers import *  # noqa: E402, F403
from test_distributed import ray_cluster  # noqa: E402, F401
from test_timeouts import *  # noqa: E402, F403

# Not the modules' own pytestmark (threads and processes): these run on Ray only, in the
# slow run (~75 s; tests/test_distributed.py covers the remote pool in the default run).
pytestmark = [pytest.mark.usefixtures("_on_ray"), pytest.mark.slow]


@pytest.fixture
def _on_ray() -> Iterator[None]:
    helpers.BACKEND = "ray"
    try:
        yield
    finally:
        helpers.BACKEND = "threads"
