"""Batches reach torch and JAX without a copy where the library allows one.

Shared memory is checked by comparing data pointers. What each path does today:

    torch.from_numpy, torch.as_tensor   share; one UserWarning per process (read-only array)
    torch.as_tensor(a, dtype=other)     copies (a conversion)
    torch.from_dlpack                   shares, no warning; torch has no read-only tensors, so
                                        the tensor is writable and writes land in the batch
    jax.device_put                      shares a 64-byte aligned field (every batch field is)
                                        of a dtype JAX keeps: 64-bit ones only with x64 on
    jax.numpy.asarray                   copies, even with copy=False (JAX 0.10)
    jax.dlpack.from_dlpack              raises BufferError: JAX asks for a legacy DLPack
                                        capsule, which cannot mark read-only (jax-ml/jax#40789)

The copying and raising paths are asserted as they are, so that a change upstream is noticed.
A shared tensor keeps the batch's block alive: it is not recycled while the tensor lives, and
stays valid after the pool is closed.

The file is named to run after the tests that fork (test_close, test_ppo_example): JAX starts
threads when it is imported, and a fork() after that can deadlock the child.
"""

from __future__ import annotations

import gc
import importlib
import json
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import aiopool

ROOT = Path(__file__).resolve().parent.parent
ENVS = {"Counting-v0": (np.int64, (4,)), "CartPole-v1": (np.float32, (4,)),
        "Pong-v5": (np.uint8, (4, 84, 84))}
READ_ONLY_WARNING = "The given NumPy array is not writable"


def _require(name: str) -> Any:
    """Import `name`, or skip saying how to install it (torch and jax are in the test extra;
    under CI=true the skip fails, see conftest.py)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        pytest.skip(f"needs {name.split('.')[0]}: pip install -e '.[test]' ({e})")


@pytest.fixture(scope="module")
def torch() -> Any:
    return _require("torch")


@pytest.fixture(scope="module")
def jax() -> Any:
    _require("jax.numpy")
    _require("jax.dlpack")
    jax = _require("jax")
    assert not jax.config.jax_enable_x64, "these tests expect JAX's default 32-bit mode"
    return jax


def _open(env_id: str) -> aiopool.Pool:
    pool = aiopool.make(env_id, num_envs=8, batch_size=4, num_threads=1)
    pool.async_reset(seed=0)
    return pool


@pytest.fixture(params=list(ENVS))
def pool(request: pytest.FixtureRequest) -> Iterator[aiopool.Pool]:
    with _open(request.param) as p:
        yield p


def _addr(a: npt.NDArray[Any]) -> int:
    return int(a.__array_interface__["data"][0])


def _named_fields(pool: aiopool.Pool,
                  batch: aiopool.Batch) -> list[tuple[str, npt.NDArray[Any]]]:
    return list(zip(pool._native.field_names, batch.fields(), strict=True))


def _step(batch: aiopool.Batch) -> None:
    batch.send(np.zeros(len(batch), dtype=np.int64))


def _from_numpy_quietly(torch: Any, a: npt.NDArray[Any]) -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=READ_ONLY_WARNING, category=UserWarning)
        return torch.from_numpy(a)


def test_batch_fields_are_read_only_64_byte_aligned_views(pool: aiopool.Pool) -> None:
    # What zero-copy relies on: each field starts on a 64-byte boundary (JAX's CPU rule),
    # is C-contiguous and is a view of the native block.
    batch = pool.recv_blocking()
    dtype, shape = ENVS[pool.spec.id]
    assert batch.obs.dtype == dtype and batch.obs.shape == (4, *shape)
    for name, a in _named_fields(pool, batch):
        assert _addr(a) % 64 == 0, f"{name} starts at {_addr(a):#x}, not 64-byte aligned"
        assert a.flags.c_contiguous and not a.flags.writeable, name
        assert type(a.base).__name__ == "BlockHandle", name


def test_torch_from_numpy_and_as_tensor_share_every_field(torch: Any,
                                                          pool: aiopool.Pool) -> None:
    batch = pool.recv_blocking()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=READ_ONLY_WARNING, category=UserWarning)
        for name, a in _named_fields(pool, batch):
            for convert in (torch.from_numpy, torch.as_tensor):
                t = convert(a)
                assert t.data_ptr() == _addr(a), f"{convert.__name__}({name}) copied"
                assert np.array_equal(t.numpy(), a), name


@pytest.mark.usefixtures("torch")  # imported here too only to skip without it
@pytest.mark.parametrize("mode", ["plain", "filtered"])
def test_torch_warns_once_per_process_about_read_only_arrays(mode: str) -> None:
    # torch warns once per process (a C++ warn-once flag), so this runs in a fresh interpreter.
    script = f"""
import json, warnings
import aiopool, torch
warnings.simplefilter("always")
if {mode!r} == "filtered":
    warnings.filterwarnings("ignore", message={READ_ONLY_WARNING!r}, category=UserWarning)
with aiopool.make("Counting-v0", num_envs=8, batch_size=4, num_threads=1) as pool:
    pool.async_reset()
    batch = pool.recv_blocking()
    calls = []
    for convert, a in ((torch.from_numpy, batch.obs), (torch.as_tensor, batch.reward),
                       (torch.from_numpy, batch.env_id)):
        with warnings.catch_warnings(record=True) as seen:
            shares = convert(a).data_ptr() == a.ctypes.data
        calls.append([shares, [(w.category.__name__, str(w.message)) for w in seen]])
print(json.dumps(calls))
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    calls = json.loads(r.stdout.strip().splitlines()[-1])
    assert [shares for shares, _ in calls] == [True, True, True]
    warned = [w for _, w in calls]
    if mode == "filtered":
        assert warned == [[], [], []]
    else:
        assert warned[1:] == [[], []]
        assert len(warned[0]) == 1 and warned[0][0][0] == "UserWarning"
        assert warned[0][0][1].startswith(READ_ONLY_WARNING)
        assert "suppressed for the rest of this program" in warned[0][0][1]


def test_torch_as_tensor_with_another_dtype_copies(torch: Any, pool: aiopool.Pool) -> None:
    batch = pool.recv_blocking()
    with warnings.catch_warnings():  # it warns too: torch wraps the array before converting
        warnings.filterwarnings("ignore", message=READ_ONLY_WARNING, category=UserWarning)
        t = torch.as_tensor(batch.obs, dtype=torch.float64)
    assert t.data_ptr() != _addr(batch.obs)
    assert np.array_equal(t.numpy(), batch.obs.astype(np.float64))


def test_torch_from_dlpack_shares_every_field_without_a_warning(torch: Any,
                                                                pool: aiopool.Pool) -> None:
    batch = pool.recv_blocking()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for name, a in _named_fields(pool, batch):
            t = torch.from_dlpack(a)
            assert t.data_ptr() == _addr(a), f"torch.from_dlpack({name}) copied"
            assert np.array_equal(t.numpy(), a), name
    assert [str(w.message) for w in seen] == []


def test_torch_from_dlpack_drops_the_read_only_flag(torch: Any) -> None:
    # numpy exports the batch as DLPack 1.0 with DLPACK_FLAG_BITMASK_READ_ONLY; torch has no
    # read-only tensors, so the tensor is writable and a write lands in the batch.
    with _open("Counting-v0") as pool:
        batch = pool.recv_blocking()
        t = torch.from_dlpack(batch.obs)
        t[0, 1] = -7
        assert batch.obs[0, 1] == -7


def test_jax_device_put_shares_each_field_jax_keeps(jax: Any, pool: aiopool.Pool) -> None:
    # Without x64, JAX turns int64 / float64 into 32-bit arrays (a copy); with it, every field
    # is shared.
    batch = pool.recv_blocking()
    for name, a in _named_fields(pool, batch):
        x = jax.device_put(a)
        assert (x.unsafe_buffer_pointer() == _addr(a)) == (a.dtype.itemsize < 8), name
        assert np.array_equal(np.asarray(x), a.astype(x.dtype)), name
        with jax.enable_x64(True):
            x = jax.device_put(a)
        assert x.dtype == a.dtype and x.unsafe_buffer_pointer() == _addr(a), name
        assert np.array_equal(np.asarray(x), a), name


def test_jax_device_put_shares_only_64_byte_aligned_memory(jax: Any) -> None:
    # JAX's CPU rule, which the 64-byte layout of the batch blocks satisfies.
    buf = np.zeros(4096, dtype=np.uint8)
    start = -_addr(buf) % 64
    for offset in (0, 16, 32, 48, 64):
        a = buf[start + offset:start + offset + 64].view(np.float32)
        a.flags.writeable = False
        shared = jax.device_put(a).unsafe_buffer_pointer() == _addr(a)
        assert shared == (offset % 64 == 0), f"offset {offset}"


def test_jnp_asarray_copies(jax: Any, pool: aiopool.Pool) -> None:
    # jnp.asarray stages a numpy array through an identity computation: a new buffer, even
    # where device_put shares and even with copy=False (JAX 0.10, CPU). Use jax.device_put.
    batch = pool.recv_blocking()
    with jax.enable_x64(True):
        for copy in (None, False):
            x = jax.numpy.asarray(batch.obs, copy=copy)
            assert x.unsafe_buffer_pointer() != _addr(batch.obs), f"copy={copy} shared"
            assert np.array_equal(np.asarray(x), batch.obs)
        assert jax.device_put(batch.obs).unsafe_buffer_pointer() == _addr(batch.obs)


def test_jax_from_dlpack_rejects_read_only_batches(jax: Any, pool: aiopool.Pool) -> None:
    # JAX calls __dlpack__ without max_version (the legacy capsule, no read-only flag), and
    # numpy refuses to export a read-only array that way. A writeable copy goes through.
    batch = pool.recv_blocking()
    with pytest.raises(BufferError, match="readonly"):
        batch.obs.__dlpack__()
    assert batch.obs.__dlpack__(max_version=(1, 0)) is not None  # what torch asks for
    for from_dlpack in (jax.dlpack.from_dlpack, jax.numpy.from_dlpack):
        with pytest.raises(BufferError, match="readonly"):
            from_dlpack(batch.obs)
    with jax.enable_x64(True):
        assert np.array_equal(np.asarray(jax.dlpack.from_dlpack(np.array(batch.obs))),
                              batch.obs)


def _torch_from_numpy(torch: Any, a: npt.NDArray[Any]) -> Any:
    return torch.from_numpy(a)


def _torch_as_tensor(torch: Any, a: npt.NDArray[Any]) -> Any:
    return torch.as_tensor(a)


def _torch_from_dlpack(torch: Any, a: npt.NDArray[Any]) -> Any:
    return torch.from_dlpack(a)


def _jax_device_put(jax: Any, a: npt.NDArray[Any]) -> Any:
    with jax.enable_x64(True):  # so that the int64 obs of the counting env is shared too
        return jax.device_put(a)


# name -> (library fixture, export(library, array))
EXPORTS: dict[str, tuple[str, Callable[[Any, npt.NDArray[Any]], Any]]] = {
    "torch.from_numpy": ("torch", _torch_from_numpy),
    "torch.as_tensor": ("torch", _torch_as_tensor),
    "torch.from_dlpack": ("torch", _torch_from_dlpack),
    "jax.device_put": ("jax", _jax_device_put),
}


def _pointer(x: Any) -> int:
    return int(x.data_ptr() if hasattr(x, "data_ptr") else x.unsafe_buffer_pointer())


def _blocks_seen(pool: aiopool.Pool, n: int) -> set[int]:
    """Step the pool through `n` batches, dropping each; the addresses of their obs."""
    seen = set()
    for _ in range(n):
        batch = pool.recv_blocking()
        seen.add(_addr(batch.obs))
        _step(batch)
    return seen


@pytest.mark.parametrize("env_id", list(ENVS))
def test_a_dropped_batch_is_recycled(env_id: str) -> None:
    # The control for the test below: without an export, the block comes back at once.
    with _open(env_id) as pool:
        batch = pool.recv_blocking()
        addr = _addr(batch.obs)
        _step(batch)
        del batch
        gc.collect()
        assert addr in _blocks_seen(pool, 200)


@pytest.mark.parametrize("export", list(EXPORTS))
@pytest.mark.parametrize("env_id", list(ENVS))
def test_an_export_keeps_the_block_alive(request: pytest.FixtureRequest, env_id: str,
                                         export: str) -> None:
    library, convert = EXPORTS[export]
    lib = request.getfixturevalue(library)
    pool = _open(env_id)
    batch = pool.recv_blocking()
    addr, expected = _addr(batch.obs), np.array(batch.obs)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=READ_ONLY_WARNING, category=UserWarning)
        kept = convert(lib, batch.obs)
    assert _pointer(kept) == addr, f"{export} copied"
    _step(batch)
    del batch
    gc.collect()
    assert addr not in _blocks_seen(pool, 200), "the block was recycled under the export"
    assert np.array_equal(np.asarray(kept), expected)
    pool.close()
    del pool
    gc.collect()
    churn = [np.full(expected.shape, 7, dtype=expected.dtype) for _ in range(100)]
    assert _pointer(kept) == addr and np.array_equal(np.asarray(kept), expected)
    del churn


@pytest.mark.asyncio
async def test_reordered_step_results_are_copies_jax_shares_when_aligned(torch: Any,
                                                                         jax: Any) -> None:
    # Pool.step returns the received batch when its rows are in env_id order, else a numpy
    # copy (here always: two batches per step). A copy has numpy's alignment (16 bytes), so
    # device_put shares a field only when it happens to start on a 64-byte boundary; torch
    # shares either way.
    with _open("CartPole-v1") as pool:
        for _ in range(2):  # the reset's two batches: then every env is idle, as step() needs
            pool.recv_blocking()
        for _ in range(10):
            batch = await pool.step(np.zeros(8, dtype=np.int64))
            for name, a in _named_fields(pool, batch):
                assert type(a.base).__name__ != "BlockHandle", name
                assert _from_numpy_quietly(torch, a).data_ptr() == _addr(a), name
                if a.dtype.itemsize < 8:
                    shared = jax.device_put(a).unsafe_buffer_pointer() == _addr(a)
                    assert shared == (_addr(a) % 64 == 0), name


def test_tuple_observations_are_read_only_views_of_the_block() -> None:
    """Blackjack-v1's Tuple observation: one int64 array per part, each a column of the
    block's obs rows (no copy), read-only, and final_obs the same (same_step)."""
    with aiopool.make("Blackjack-v1", num_envs=4, seed=0, autoreset="same_step") as pool:
        pool.async_reset()
        batch = pool.recv_blocking()
        parts = batch.obs
        assert isinstance(parts, tuple) and [p.dtype for p in parts] == [np.dtype(np.int64)] * 3
        start = parts[0].ctypes.data
        for k, part in enumerate(parts):
            assert part.shape == (4,) and part.strides == (24,) and not part.flags.writeable
            assert part.ctypes.data == start + 8 * k
        stick = np.zeros(4, dtype=np.int64)  # every hand ends
        pool.send(stick)
        batch = pool.recv_blocking()
        final = batch.info["final_obs"]
        assert isinstance(final, tuple) and all(not p.flags.writeable for p in final)
        assert final[0].ctypes.data + 8 == final[1].ctypes.data


def test_dict_observation_parts_are_split_in_row_order() -> None:
    """``splitter`` for a Dict observation: each key a view of its columns, in the order the
    row holds them (whatever order the space lists its keys), final_obs split alike."""
    from aiopool.batch import splitter

    names = ("obs", "reward", "terminated", "truncated", "env_id", "final_obs")
    split = splitter([("b", (2,)), ("a", ()), ("c", (2, 2))], names)
    assert split is not None and splitter((), names) is None
    flat = np.arange(4 * 7, dtype=np.float64).reshape(4, 7)
    flat.flags.writeable = False

    class Handle:
        def array(self, field: int) -> npt.NDArray[Any]:
            return flat

    obs, *_, handle = split((flat, None, None, None, None, Handle()))
    assert list(obs) == ["b", "a", "c"]
    np.testing.assert_array_equal(obs["b"], flat[:, 0:2])
    np.testing.assert_array_equal(obs["a"], flat[:, 2])
    np.testing.assert_array_equal(obs["c"], flat[:, 3:7].reshape(4, 2, 2))
    assert all(np.shares_memory(v, flat) and not v.flags.writeable for v in obs.values())
    assert isinstance(handle.array(5), dict) and handle.array(1) is flat


def test_parts_of_different_dtypes_are_views_of_the_row_bytes() -> None:
    """MuJoCo's obs_type="state+pixels": one byte row per env, the float64 state stack first
    (8-byte aligned), then the uint8 frames, padded to 8 bytes; each part a read-only view of
    the block, final_obs (same_step) split alike."""
    kwargs = {"obs_type": "state+pixels", "width": 5, "height": 3, "frame_stack": 2}
    with aiopool.make("Hopper-v5", num_envs=3, seed=0, autoreset="same_step",
                      max_episode_steps=2, **kwargs) as pool:
        pool.async_reset()
        batch = pool.recv_blocking()
        state, pixels = batch.obs["state"], batch.obs["pixels"]
        row = 2 * 11 * 8 + (2 * 3 * 5 * 3 + 7) // 8 * 8  # 176 bytes of state, 90 (96) of frames
        assert (state.dtype, state.shape, state.strides) == (np.float64, (3, 2, 11),
                                                             (row, 88, 8))
        assert (pixels.dtype, pixels.shape, pixels.strides[0]) == (np.uint8, (3, 2, 3, 5, 3),
                                                                   row)
        assert pixels.ctypes.data == state.ctypes.data + 176 and state.ctypes.data % 8 == 0
        assert not state.flags.writeable and not pixels.flags.writeable
        assert state[:, 0].tobytes() == state[:, 1].tobytes()  # the reset observation, twice
        assert np.all(np.isfinite(state)) and pixels.any()
        pool.send(np.zeros((3, 3), dtype=np.float32))
        batch = pool.recv_blocking()
        pool.send(np.zeros((3, 3), dtype=np.float32))
        batch = pool.recv_blocking()  # the time limit: every env ends, same_step resets them
        assert batch.truncated.all()
        final = batch.info["final_obs"]
        assert set(final) == {"state", "pixels"} and final["state"].dtype == np.float64
        assert final["state"][:, 0].tobytes() != final["state"][:, 1].tobytes()
        assert batch.obs["state"][:, 0].tobytes() == batch.obs["state"][:, 1].tobytes()
