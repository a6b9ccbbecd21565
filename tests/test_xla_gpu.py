"""xla()'s GPU handlers (``platform="gpu"``, aiopool/_native/xla_ffi.h).

Each FFI handler has a GPU form, registered under the same target name, that copies XLA's
device buffers through pinned host staging and runs the CPU form's body; the CUDA driver is
loaded at run time (cuda_driver.h), so the build needs no CUDA toolkit. Where jax has a GPU
backend (an NVIDIA machine with the jax CUDA plugin) the jitted rollouts below run on the GPU
and equal the CPU's bit for bit; elsewhere the loader's message and the registration are
checked, and the GPU cases skip.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import aiopool  # noqa: E402
import aiopool.envpool as envpool  # noqa: E402
import aiopool.jax as aiojax  # noqa: E402
from aiopool._native import _core  # noqa: E402


def _gpus() -> list[Any]:
    try:
        return list(jax.devices("gpu"))
    except RuntimeError:  # no GPU backend in this jax
        return []


needs_ffi = pytest.mark.skipif(not aiojax.built_with_ffi(),
                               reason="aiopool was built without jaxlib's FFI headers")
needs_gpu = pytest.mark.skipif(not _gpus(), reason="jax has no GPU backend on this machine")


@needs_ffi
def test_every_native_module_has_the_gpu_handlers_registered_beside_the_cpu_ones() -> None:
    gpu = _core._xla_gpu_handlers()
    assert gpu is not None and len(gpu) == 4
    assert all(type(c).__name__ == "PyCapsule" for c in gpu)
    with aiopool.make("CartPole-v1", num_envs=2, seed=0) as pool:
        pool.async_reset()
        pool.recv_blocking()
        aiojax.xla(pool)
        assert aiojax.registered_platforms(type(pool._native).__module__) == ("cpu", "gpu")


def test_the_cuda_driver_loads_or_says_why() -> None:
    why = _core._cuda_driver_error()
    if _gpus():
        assert why == ""
    elif why:  # no NVIDIA driver: the GPU handlers would say so instead of crashing
        assert "libcuda.so.1" in why


def _rollout(handle: Any, step: Any, actions: jax.Array) -> Any:
    def body(handle: Any, action: jax.Array) -> tuple[Any, Any]:
        handle, state = step(handle, action)
        return handle, state

    return jax.lax.scan(body, handle, actions)


def _on(device: Any, env_id: str, n: int, steps: int, seed: int, **kwargs: Any) -> list[Any]:
    """``steps`` jitted steps of ``n`` envs with fixed actions, the program placed on ``device``;
    the state's leaves as numpy arrays."""
    with jax.default_device(device):
        env = envpool.make(env_id, env_type="gymnasium", num_envs=n, seed=seed, **kwargs)
        env.reset()
        handle, _, _, step = env.xla()
        space = env.action_space
        space.seed(seed)
        actions = jnp.asarray(np.stack([[space.sample() for _ in range(n)]
                                        for _ in range(steps)]))
        _, states = jax.jit(_rollout, static_argnums=1)(handle, step, actions)
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(states)]
        env.close()
    return leaves


@needs_ffi
@needs_gpu
@pytest.mark.parametrize(("env_id", "n", "kwargs"), [
    ("CartPole-v1", 16, {}),
    ("Pong-v5", 4, {"episodic_life": True, "reward_clip": True}),
    ("HalfCheetah-v5", 4, {}),
])
def test_a_jitted_rollout_on_the_gpu_equals_the_cpus(env_id: str, n: int,
                                                      kwargs: dict[str, Any]) -> None:
    gpu = _on(_gpus()[0], env_id, n, 64, 3, **kwargs)
    cpu = _on(jax.devices("cpu")[0], env_id, n, 64, 3, **kwargs)
    assert len(gpu) == len(cpu)
    for g, c in zip(gpu, cpu, strict=True):
        assert g.dtype == c.dtype and np.array_equal(g, c)


@needs_ffi
@needs_gpu
def test_a_gpu_receive_with_nothing_in_flight_is_an_error() -> None:
    with jax.default_device(_gpus()[0]):
        env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2,
                           seed=0)
        env.async_reset()
        handle, recv, _, _ = env.xla()
        handle, _ = recv(handle)
        handle, _ = recv(handle)
        with pytest.raises(jax.errors.JaxRuntimeError, match="nothing in flight"):
            jax.block_until_ready(recv(handle))
        env.close()
