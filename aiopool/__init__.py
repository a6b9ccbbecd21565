"""aiopool: an asyncio-native pool of reinforcement-learning environments."""

from typing import TYPE_CHECKING, Any

from .adapters.gymnasium import make_gymnasium
from .batch import Batch
from .errors import EnvError, NothingInFlight, PoolClosed, WorkerDied
from .pool import Pool
from .registry import list_envs, make
from .spec import EnvSpec

__all__ = [
    "Batch",
    "EnvError",
    "EnvSpec",
    "NothingInFlight",
    "Pool",
    "PoolClosed",
    "WorkerDied",
    "list_envs",
    "make",
    "make_dm",
    "make_gymnasium",
    "make_sb3",
]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from .adapters.dm_env import make_dm
    from .adapters.sb3 import make_sb3


def __getattr__(name: str) -> Any:
    """``make_dm`` / ``make_sb3`` import dm-env / stable-baselines3 (and torch) on first use."""
    from ._deps import require

    if name == "make_dm":
        require("aiopool.make_dm", "dm", ("dm_env", "dm-env>=1.6"))
        from .adapters.dm_env import make_dm

        return make_dm
    if name == "make_sb3":
        require("aiopool.make_sb3", "sb3", ("stable_baselines3", "stable-baselines3>=2.3"))
        from .adapters.sb3 import make_sb3

        return make_sb3
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
