"""Policies for aiopool's streams: in process with dynamic batching, or on an inference server.

- ``Policy``: the contract, ``async def __call__(obs) -> actions`` (see ``batching``).
- ``DynamicBatcher``: many coroutines, one forward per loop tick; ``from_callable``.
- ``torch_policy``: a torch module as a sync backend (torch imported on first use).
- ``KServePolicy``: a policy on any KServe V2 gRPC server (``aiopool[kserve]``).
- ``PolicyRuntime``: aiopool's MLServer runtime (``aiopool[mlserver]``).

``import aiopool.inference`` needs numpy only; the rest is imported on first use.
"""

from typing import TYPE_CHECKING, Any

from ..errors import PolicyClosed
from .batching import BatcherStats, DynamicBatcher, Policy, from_callable

__all__ = ["BatcherStats", "DynamicBatcher", "InferenceServerError", "InferenceServerTimeout",
           "KServePolicy", "Policy", "PolicyClosed", "PolicyRuntime", "from_callable",
           "torch_policy"]

if TYPE_CHECKING:
    from .kserve import InferenceServerError, InferenceServerTimeout, KServePolicy
    from .mlserver_runtime import PolicyRuntime
    from .torch import torch_policy

_LAZY = {"KServePolicy": "kserve", "InferenceServerError": "kserve",
         "InferenceServerTimeout": "kserve", "PolicyRuntime": "mlserver_runtime",
         "torch_policy": "torch"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
