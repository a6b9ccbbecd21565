"""aiopool pools on many machines: one Ray actor per host owns a native pool; the driver
merges their batches behind the pool contract (``send`` / ``recv`` / ``stream`` / ``step``).

Needs Ray (``pip install ray==2.60.0``: aiopool's ``ray`` extra); ``import aiopool`` never
imports it.
"""

try:
    import ray as _ray  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError("aiopool.distributed needs Ray: pip install ray==2.60.0 (or aiopool's "
                      'ray extra: pip install -e ".[ray]" in aiopool\'s checkout)') from e

from .errors import ActorDied
from .make import make_remote, make_remote_async
from .pool import RemotePool
from .rollout import Fragment

__all__ = ["ActorDied", "Fragment", "RemotePool", "make_remote", "make_remote_async"]
