"""aiopool: an asyncio-native pool of reinforcement-learning environments."""

from .batch import Batch
from .errors import NothingInFlight, PoolClosed
from .pool import Pool
from .registry import list_envs, make
from .spec import EnvSpec

__all__ = ["Batch", "EnvSpec", "NothingInFlight", "Pool", "PoolClosed", "list_envs", "make"]
__version__ = "0.1.0"
