"""A torch module as a sync policy backend (``DynamicBatcher(torch_policy(model))``).

torch is imported when ``torch_policy`` is called, never by ``import aiopool``: aiopool does
not depend on torch (install the CPU wheel yourself, ``pip install torch==2.13.0`` here).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["torch_policy"]


def _argmax(out: Any) -> Any:
    return out.argmax(-1)


def torch_policy(module: Any, *, num_threads: int | None = 1,
                 postprocess: Callable[[Any], Any] | None = _argmax,
                 dtype: Any = None) -> Callable[[npt.NDArray[Any]], npt.NDArray[Any]]:
    """A sync ``obs -> actions`` that runs ``module`` under ``torch.inference_mode``.

    Args:
        module: a ``torch.nn.Module`` (or any callable on tensors).
        num_threads: ``torch.set_num_threads`` (default 1: on a small machine the forward's
            thread should leave the other cores to the loop and the env workers); None leaves
            torch's setting alone.
        postprocess: maps the module's output tensor to the actions (default: argmax over the
            last dimension, for discrete actions; pass None to return the output as is).
        dtype: the input dtype (default: float32).
    """
    import torch

    if num_threads is not None:
        torch.set_num_threads(num_threads)
    in_dtype = torch.float32 if dtype is None else dtype
    # OpenMP keeps the thread count per thread: a forward in the batcher's executor thread
    # would run on every core unless that thread sets it too (measured: a conv 0.43 s, not 0.21).
    configured: set[int] = set()

    def forward(obs: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if num_threads is not None and threading.get_ident() not in configured:
            torch.set_num_threads(num_threads)
            configured.add(threading.get_ident())
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(obs)).to(in_dtype)
            out = module(x)
            if postprocess is not None:
                out = postprocess(out)
            return np.asarray(out.cpu().numpy())

    return forward
