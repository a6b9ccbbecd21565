"""EnvPool's XLA interface: env steps inside ``jax.jit``, ``lax.scan`` and friends.

    >>> import aiopool, aiopool.jax
    >>> pool = aiopool.make("CartPole-v1", num_envs=8)
    >>> pool.async_reset(); pool.recv_blocking()
    >>> handle, recv, send, step = aiopool.jax.xla(pool)
    >>> @jax.jit
    ... def rollout(handle):
    ...     def body(handle, _):
    ...         handle, batch = step(handle, jnp.zeros(8, jnp.int32))
    ...         return handle, batch.reward
    ...     return jax.lax.scan(body, handle, None, length=100)

``send(handle, action, env_id=None) -> handle`` sends one action per env of ``env_id`` (default
all); ``recv(handle) -> (handle, state)`` receives the next batch; ``step`` is
``recv(send(...))``. For a pool of aiopool's own the state is an :class:`XlaBatch`, the pool's
own rows (``obs``, ``reward``, ``terminated``, ``truncated``, ``env_id``, ``info``);
``aiopool.envpool``'s envs give EnvPool's state instead (their ``xla()``).

Ordering: each call returns the handle it was given, and XLA orders the calls only through
it, so thread it through every call (a ``scan`` carry, say): a ``recv`` on a handle that no
``send`` returned may run before that send. The calls are side effects: XLA neither drops an
unused one nor merges two alike. ``vmap`` and ``grad`` raise: an env step has neither.

Errors the Python API raises (a closed pool, a receive with nothing in flight, an action of
the wrong shape or out of range) arrive as ``jax.errors.JaxRuntimeError`` with the message of
the same check (the native handlers run the pool's own C++ checks).

Native path: where aiopool was built with jaxlib installed, the calls are XLA FFI handlers in
aiopool's C++ core that copy between XLA's buffers and the pool's batch blocks without the
GIL. On a GPU (a program jax places there) the same handlers' GPU forms copy through pinned
host memory on XLA's stream; they load the CUDA driver at run time, so the build needs no
CUDA toolkit. Otherwise they are ``jax.experimental.io_callback`` calls of the pool's Python
``send`` / ``recv_blocking`` (the same results, a Python call per step), with a warning.

Floating and 64-bit integer outputs follow jax's ``jax_enable_x64``: without it float64
rewards and observations arrive as float32 (as ``jnp.asarray`` would give them).
"""

from __future__ import annotations

import functools
import importlib
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from jax.experimental import io_callback

if TYPE_CHECKING:
    from .pool import Pool

__all__ = ["XlaBatch", "xla"]

Handle = Any  # a uint8[8] array (numpy, or a traced jax array inside jit)
_IDS = itertools.count(1)


class XlaBatch(NamedTuple):
    """One received batch inside jax: the fields of :class:`aiopool.Batch`, as jax arrays.

    ``obs`` is an array, or a dict / tuple of arrays for a Dict / Tuple observation space;
    ``info`` is a dict of arrays (``elapsed_step``, ``episode_return``, ``episode_length``,
    the family's extras; ``final_obs`` and ``final_info`` with ``autoreset="same_step"``).
    """

    obs: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    env_id: jax.Array
    info: dict[str, Any]


@dataclass(frozen=True)
class Leaf:
    """The shape and dtype of an array a receive gives (jax's ShapeDtypeStruct would fix
    the dtype by the x64 setting of the moment it is made, not the one of the trace)."""

    shape: tuple[int, ...]
    dtype: Any


class Port:
    """``send`` and ``recv`` of one pool as ordered ``io_callback``s of its Python API: the
    fallback where aiopool was built without jaxlib, and the path of pools that are not
    native threads (the process backend's).

    Args:
        leaves: the shape and dtype of each array a receive gives, in order.
        action: ``(shape, dtype)`` of one env's action; actions are cast to it in the graph.
        num_envs: how many envs ``env_id=None`` means.
        py_send: ``py_send(actions, env_ids or None)``: the Python API's send.
        py_recv: ``py_recv() -> arrays``: the Python API's receive, as the leaves.
    """

    def __init__(self, leaves: Sequence[Leaf], action: tuple[tuple[int, ...],
                 np.dtype[Any]], num_envs: int,
                 py_send: Callable[[npt.NDArray[Any], npt.NDArray[np.int32] | None], None],
                 py_recv: Callable[[], Sequence[npt.ArrayLike]]) -> None:
        self.leaves = list(leaves)
        self.action_shape, self.action_dtype = action
        self.num_envs = num_envs
        self.id = next(_IDS)
        self.handle = np.frombuffer(np.uint64(self.id).tobytes(), dtype=np.uint8)
        self.handle.flags.writeable = False  # the id, for show: calls find the pool by their own
        self._py_send = py_send
        self._py_recv = py_recv

    def send(self, handle: Handle, action: Any, env_id: Any = None) -> Handle:
        action = _refuse_vmap(_refuse_grad(jnp.asarray(action))).astype(
            _canonical(self.action_dtype))
        spec = _struct(np.shape(handle), np.uint8)
        if env_id is None:
            return io_callback(self._send_cb, spec, handle, action, ordered=True)
        ids = jnp.asarray(env_id).astype(jnp.int32).reshape(-1)
        return io_callback(self._send_ids_cb, spec, handle, action, ids, ordered=True)

    def recv(self, handle: Handle) -> tuple[Handle, list[jax.Array]]:
        leaves = [_struct(s.shape, _canonical(s.dtype)) for s in self.leaves]
        spec = [_struct(np.shape(handle), np.uint8), *leaves]
        dtypes = [s.dtype for s in leaves]  # as traced: x64 may differ when the callback runs
        out = io_callback(functools.partial(self._recv_cb, dtypes), spec, handle, ordered=True)
        return out[0], list(out[1:])

    # io_callback's Python side (no jax here: it runs on XLA's thread, with the GIL)

    def _send_cb(self, handle: npt.NDArray[np.uint8], action: npt.NDArray[Any]) -> Any:
        self._py_send(np.asarray(action), None)
        return handle

    def _send_ids_cb(self, handle: npt.NDArray[np.uint8], action: npt.NDArray[Any],
                     ids: npt.NDArray[np.int32]) -> Any:
        self._py_send(np.asarray(action), np.asarray(ids))
        return handle

    def _recv_cb(self, dtypes: list[np.dtype[Any]], handle: npt.NDArray[np.uint8]) -> Any:
        arrays = self._py_recv()
        out = [np.asarray(a).astype(d, copy=False) for a, d in zip(arrays, dtypes, strict=True)]
        return [handle, *out]


class NativePort:
    """``send`` and ``recv`` of a native-threads pool as its module's XLA FFI handlers
    (``aiopool/_native/xla_ffi.h``): they copy between XLA's buffers and the pool's blocks
    without the GIL. A receive gives every field of the pool's layout, in its order (the
    observation as its flat row).

    Args:
        native: the pool's native object (``pool._native``).
        leaves: the shape and dtype of each field of its layout.
        by_env_id: receive rows in env id order (sync mode: every env's row) rather than in
            the order the envs finished.
        spin_ns: how long a receive polls for a batch before it sleeps (``recv_spin_us``).
        state_bytes: the size of the bytes the pool's owner keeps beside it for xla()
            (``native.xla_state``), which ``state_get`` / ``state_set`` read and write.
    """

    def __init__(self, native: Any, leaves: Sequence[Leaf], by_env_id: bool,
                 spin_ns: int, state_bytes: int = 0) -> None:
        self.leaves = list(leaves)
        self.spin_ns = spin_ns
        self.state_bytes = state_bytes
        self.num_envs = int(native.num_envs)
        space = native.spec["action_space"]
        self.action_dtype = np.dtype(space["dtype"])
        self.by_env_id = int(by_env_id)
        targets = _targets(type(native).__module__)
        self._send_target, self._recv_target, self._get_target, self._set_target = targets
        self.id = next(_IDS)
        native.xla_attach(self.id)
        self.handle = np.frombuffer(np.uint64(self.id).tobytes(), dtype=np.uint8)
        self.handle.flags.writeable = False

    def send(self, handle: Handle, action: Any, env_id: Any = None) -> Handle:
        action = _refuse_vmap(_refuse_grad(jnp.asarray(action))).astype(
            _canonical(self.action_dtype))
        if env_id is None:
            ids = jnp.arange(self.num_envs, dtype=jnp.int32)
        else:
            ids = jnp.asarray(env_id).astype(jnp.int32).reshape(-1)
        call: Any = jax.ffi.ffi_call(self._send_target, _struct(np.shape(handle), np.uint8),
                                     has_side_effect=True, input_output_aliases={0: 0})
        return call(handle, action, ids, pool_id=np.uint64(self.id))

    def recv(self, handle: Handle) -> tuple[Handle, list[jax.Array]]:
        leaves = [_struct(s.shape, _canonical(s.dtype)) for s in self.leaves]
        call: Any = jax.ffi.ffi_call(self._recv_target,
                                     [_struct(np.shape(handle), np.uint8), *leaves],
                                     has_side_effect=True, input_output_aliases={0: 0})
        out = call(handle, pool_id=np.uint64(self.id), by_env_id=np.int64(self.by_env_id),
                   spin_ns=np.int64(self.spin_ns))
        return out[0], list(out[1:])


    def state_get(self, handle: Handle) -> tuple[Handle, jax.Array]:
        """The owner's bytes (``state_bytes`` of them) as they are now."""
        call: Any = jax.ffi.ffi_call(self._get_target,
                                     [_struct(np.shape(handle), np.uint8),
                                      _struct((self.state_bytes,), np.uint8)],
                                     has_side_effect=True, input_output_aliases={0: 0})
        out = call(handle, pool_id=np.uint64(self.id))
        return out[0], out[1]

    def state_set(self, handle: Handle, state: jax.Array) -> Handle:
        """Write the owner's bytes."""
        call: Any = jax.ffi.ffi_call(self._set_target, _struct(np.shape(handle), np.uint8),
                                     has_side_effect=True, input_output_aliases={0: 0})
        return call(handle, state, pool_id=np.uint64(self.id))


_REGISTERED: dict[str, tuple[str, str, str, str]] = {}
_PLATFORMS: dict[str, tuple[str, ...]] = {}


def _targets(module: str) -> tuple[str, str, str, str]:
    """The FFI target names of a native module's send, recv, state_get and state_set,
    registered with jax once, for the CPU and the GPU: XLA picks the handlers of the platform
    a program runs on (the GPU's stage XLA's device buffers through pinned host memory and
    load the CUDA driver when first called; jax takes a GPU target on a CPU-only jaxlib)."""
    if module not in _REGISTERED:
        native = importlib.import_module(module)
        name = module.rsplit(".", 1)[-1].strip("_")
        names = (f"aiopool_{name}_send", f"aiopool_{name}_recv",
                 f"aiopool_{name}_state_get", f"aiopool_{name}_state_set")
        platforms: list[str] = []
        for platform, handlers in (("cpu", native._xla_handlers()),
                                   ("gpu", native._xla_gpu_handlers())):
            if handlers is None:
                continue
            for target, capsule in zip(names, handlers, strict=True):
                jax.ffi.register_ffi_target(target, capsule, platform=platform)
            platforms.append(platform)
        _REGISTERED[module] = names
        _PLATFORMS[module] = tuple(platforms)
    return _REGISTERED[module]


def registered_platforms(module: str) -> tuple[str, ...]:
    """The platforms whose handlers of native module ``module`` are registered with jax
    (after its first ``xla()``)."""
    return _PLATFORMS.get(module, ())


def native_handlers(native: Any) -> bool:
    """Whether ``native`` (a pool's native object) has xla()'s FFI handlers: a native-threads
    pool of a module built with jaxlib's headers."""
    module = importlib.import_module(type(native).__module__)
    return hasattr(native, "xla_attach") and getattr(module, "_xla_handlers")() is not None  # noqa: B009


def built_with_ffi() -> bool:
    """Whether aiopool's native modules were built with jaxlib's FFI headers."""
    from ._native import _core

    return _core._xla_handlers() is not None


def fallback_warning(what: str) -> None:
    """Warn that ``what`` runs over io_callback because the build had no jaxlib."""
    if built_with_ffi():
        return  # a pool that is not native threads (the process backend): nothing to rebuild
    warnings.warn(
        f"{what}: aiopool was built without jaxlib's FFI headers, so its env steps inside jit "
        "are io_callbacks of the Python API (a Python call per step). For the native handlers "
        "rebuild aiopool where jaxlib is importable: pip install jaxlib && pip install "
        "--force-reinstall --no-deps .", RuntimeWarning, stacklevel=3)


def layout_leaves(native: Any) -> list[Leaf]:
    """The shape and dtype of each field of a native pool's layout (``field_names``' order),
    ``batch_size`` rows each."""
    b = int(native.batch_size)
    spec = native.spec
    obs = spec["observation_space"]
    info = {name: (np.dtype(dtype), tuple(shape)) for name, dtype, shape in spec["info"]}
    known = {"reward": np.float64, "terminated": np.bool_, "truncated": np.bool_,
             "env_id": np.int32, "elapsed_step": np.int32, "episode_return": np.float64,
             "episode_length": np.int32}
    leaves = []
    for name in native.field_names:
        base = name.removeprefix("final_info.")
        if name in ("obs", "final_obs"):
            leaves.append(Leaf((b, *obs["shape"]), np.dtype(obs["dtype"])))
        elif base in known:
            leaves.append(Leaf((b,), np.dtype(known[base])))
        else:
            dtype, shape = info[base]
            leaves.append(Leaf((b, *shape), dtype))
    return leaves


def split_obs(flat: jax.Array, parts: Sequence[tuple[str | int, tuple[int, ...]]]) -> Any:
    """A Tuple / Dict observation's parts from its flat rows (``EnvSpec.obs_parts``), as
    ``aiopool.batch.splitter`` views them; ``flat`` itself for an array observation."""
    if not parts:
        return flat
    out: list[tuple[str | int, jax.Array]] = []
    start = 0
    for key, shape in parts:
        size = math.prod(shape)
        part = flat[:, start] if shape == () else flat[:, start:start + size]
        out.append((key, part.reshape((flat.shape[0], *shape))))
        start += size
    if all(isinstance(key, int) for key, _ in parts):
        return tuple(v for _, v in out)
    return dict(out)


State = Callable[[list[jax.Array]], Any]
HandleState = Callable[[Handle, list[jax.Array]], tuple[Handle, Any]]


def functions(port: Port | NativePort, state: State | None = None,
              handle_state: HandleState | None = None,
              ) -> tuple[npt.NDArray[np.uint8], Callable[..., Any], Callable[..., Any],
                         Callable[..., Any]]:
    """EnvPool's ``(handle, recv, send, step)`` over ``port``; ``state`` builds the state the
    caller returns from a receive's leaves (traced), or ``handle_state`` does, threading the
    handle through calls of its own (``NativePort.state_get`` / ``state_set``)."""

    def send(handle: Handle, action: Any, env_id: Any = None) -> Handle:
        return port.send(handle, action, env_id)

    def recv(handle: Handle) -> tuple[Handle, Any]:
        handle, leaves = port.recv(handle)
        if handle_state is not None:
            return handle_state(handle, leaves)
        assert state is not None
        return handle, state(leaves)

    def step(handle: Handle, action: Any, env_id: Any = None) -> tuple[Handle, Any]:
        return recv(send(handle, action, env_id))

    return port.handle, recv, send, step


def xla(pool: Pool) -> tuple[npt.NDArray[np.uint8], Callable[..., Any], Callable[..., Any],
                             Callable[..., Any]]:
    """EnvPool's ``(handle, recv, send, step)`` for one of aiopool's pools: see the module's
    docstring. ``recv``'s state is an :class:`XlaBatch` of ``pool.batch_size`` rows, in the
    order the envs finished (as ``pool.recv_blocking()``'s)."""
    spec = pool.spec
    b = pool.batch_size
    native = pool._native
    if pool.closed:
        pool._check_open()
    dtypes = {np.dtype(space.dtype) for space in _parts(spec.observation_space)}
    if native_handlers(native) and len(dtypes) == 1:  # mixed parts travel as bytes: Python
        names = tuple(native.field_names)
        parts = spec.obs_parts

        def native_state(out: list[jax.Array]) -> XlaBatch:
            fields = dict(zip(names, out, strict=True))
            info = {name: fields[name] for name in names[5:]
                    if name != "final_obs" and not name.startswith("final_info.")}
            if "final_obs" in fields:
                info["final_obs"] = split_obs(fields["final_obs"], parts)
                info["final_info"] = {name.removeprefix("final_info."): v
                                      for name, v in fields.items()
                                      if name.startswith("final_info.")}
            return XlaBatch(split_obs(fields["obs"], parts), fields["reward"],
                            fields["terminated"], fields["truncated"], fields["env_id"], info)

        native_port = NativePort(native, layout_leaves(native), by_env_id=False,
                                 spin_ns=pool._spin_ns)
        return functions(native_port, native_state)
    fallback_warning("aiopool.jax.xla")
    obs_leaves, obs_tree = _space_leaves(spec.observation_space, b)
    info_names, info_leaves = _info_leaves(pool)
    leaves = [*obs_leaves, Leaf((b,), np.float64),
              Leaf((b,), np.bool_), Leaf((b,), np.bool_),
              Leaf((b,), np.int32), *info_leaves]
    n_obs = len(obs_leaves)
    final = "final_obs" in info_names

    def py_recv() -> list[npt.NDArray[Any]]:
        batch = pool.recv_blocking()
        batch.release()  # its actions come from the jitted caller, not from this batch
        info = dict(batch.info)
        parts = [*jax.tree.leaves(batch.obs), batch.reward, batch.terminated,
                 batch.truncated, batch.env_id]
        for name in info_names:
            if name == "final_obs":
                parts += jax.tree.leaves(info["final_obs"])
            elif name.startswith("final_info."):
                parts.append(info["final_info"][name.removeprefix("final_info.")])
            else:
                parts.append(info[name])
        return parts

    def state(out: list[jax.Array]) -> XlaBatch:
        obs = jax.tree.unflatten(obs_tree, out[:n_obs])
        reward, terminated, truncated, env_id = out[n_obs:n_obs + 4]
        rest = iter(out[n_obs + 4:])
        info: dict[str, Any] = {}
        final_info: dict[str, Any] = {}
        for name in info_names:
            if name == "final_obs":
                info[name] = jax.tree.unflatten(obs_tree, [next(rest) for _ in range(n_obs)])
            elif name.startswith("final_info."):
                final_info[name.removeprefix("final_info.")] = next(rest)
            else:
                info[name] = next(rest)
        if final:
            info["final_info"] = final_info
        return XlaBatch(obs, reward, terminated, truncated, env_id, info)

    def py_send(actions: npt.NDArray[Any], ids: npt.NDArray[np.int32] | None) -> None:
        pool.send(actions.astype(pool.spec.action_space.dtype, copy=False), ids)

    space = spec.action_space
    port = Port(leaves, (tuple(space.shape or ()), np.dtype(space.dtype)), pool.num_envs,
                py_send, py_recv)
    return functions(port, state)


def _parts(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    if isinstance(space, gym.spaces.Dict):
        return list(space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return list(space.spaces)
    return [space]


def _space_leaves(space: gym.Space[Any], b: int) -> tuple[list[Leaf], Any]:
    """The arrays of ``b`` rows of ``space`` (one per part of a Dict / Tuple), and the tree
    they make."""
    if isinstance(space, gym.spaces.Dict):
        parts = {k: _space_leaves(s, b)[0][0] for k, s in space.spaces.items()}
        leaves, tree = jax.tree.flatten(parts)
        return leaves, tree
    if isinstance(space, gym.spaces.Tuple):
        leaves, tree = jax.tree.flatten(tuple(_space_leaves(s, b)[0][0] for s in space.spaces))
        return leaves, tree
    if isinstance(space, gym.spaces.Discrete):
        return [Leaf((b,), np.dtype(space.dtype))], jax.tree.structure(0)
    return ([Leaf((b, *(space.shape or ())), np.dtype(space.dtype))],
            jax.tree.structure(0))


def _info_leaves(pool: Pool) -> tuple[list[str], list[Leaf]]:
    """The names of a pool's info fields in its layout's order (``final_obs`` as one name)
    and their arrays."""
    b = pool.batch_size
    names: list[str] = []
    leaves: list[Leaf] = []
    extras = {f.name: f for f in pool.spec.info}
    for name in pool._names[5:]:
        names.append(name)
        base = name.removeprefix("final_info.")
        if name == "final_obs":
            leaves += _space_leaves(pool.spec.observation_space, b)[0]
        elif base in extras:
            f = extras[base]
            leaves.append(Leaf((b, *f.shape), f.dtype))
        elif base == "episode_return":
            leaves.append(Leaf((b,), np.float64))
        else:  # elapsed_step, episode_length
            leaves.append(Leaf((b,), np.int32))
    return names, leaves


@jax.custom_jvp
def _refuse_grad(action: jax.Array) -> jax.Array:
    return action


@_refuse_grad.defjvp
def _refuse_grad_jvp(primals: Any, tangents: Any) -> Any:
    raise ValueError("xla(): an env step has no gradient: send's action cannot be "
                     "differentiated through (jax.lax.stop_gradient it)")


@jax.custom_batching.custom_vmap
def _refuse_vmap(action: jax.Array) -> jax.Array:
    return action


@_refuse_vmap.def_vmap
def _refuse_vmap_rule(axis_size: int, in_batched: Any, action: Any) -> Any:
    raise ValueError("xla(): send and recv step a pool's envs and cannot be vmapped: the "
                     "pool's envs are its batch (make it with num_envs rows, one per env)")


def _struct(shape: tuple[int, ...], dtype: npt.DTypeLike) -> Any:
    return jax.ShapeDtypeStruct(shape, dtype)  # type: ignore[no-untyped-call]


def _canonical(dtype: npt.DTypeLike) -> np.dtype[Any]:
    """The dtype jax gives arrays of ``dtype`` (float64 -> float32 without x64)."""
    return np.dtype(jax.dtypes.canonicalize_dtype(np.dtype(dtype)))
