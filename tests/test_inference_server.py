"""Policies served by a real MLServer over the KServe V2 gRPC API: KServePolicy (aiopool's
client) against PolicyRuntime (aiopool's MLServer runtime), driven by pools' streams.

The servers run as child processes started and stopped here (mlserver_process); this process
never imports mlserver. tritonclient, whose protos clash with mlserver's and whose ml-dtypes pin
clashes with jax, runs in a small venv of its own that the first run creates (~6 s) and caches
in pytest's cache directory.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc", reason="needs grpcio: pip install -e '.[test]'")

import aiopool
from aiopool.inference.kserve import (
    InferenceServerError,
    InferenceServerTimeout,
    KServePolicy,
)
from aiopool.inference.testing import (
    MLServerProcess,
    mlserver_process,
    numpy_mlp_policy,
    policy_model_settings,
)

pytestmark = pytest.mark.timeout(120)

FACTORY = "aiopool.inference.testing:numpy_mlp_policy"
CARTPOLE: dict[str, Any] = {"in_dim": 4}
PONG: dict[str, Any] = {"in_dim": 4 * 84 * 84, "hidden": 32, "n_actions": 6, "scale": 1 / 255}
SLOW: dict[str, Any] = {**CARTPOLE, "delay_s": 0.3}


def _processes_mentioning(text: str) -> list[str]:
    """A process listing (from /proc): the command lines that contain ``text``."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(f"{entry.name}: {cmdline.decode(errors='replace')}")
    return found


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread() -> Iterator[None]:
    """The in-process reference policies run numpy's OpenBLAS with one thread, as the servers
    do (mlserver_process's blas_threads=1): on a 2-core machine, OpenBLAS's threads spinning
    next to the pool's workers, the gRPC threads and the server stalled an Atari-sized matmul
    from ~1 ms to ~700 ms. (What threadpoolctl does, for numpy's bundled OpenBLAS only.)"""
    libs = sorted(Path(np.__file__).parent.parent.glob("numpy.libs/libscipy_openblas*.so"))
    if not libs:
        yield
        return
    blas = ctypes.CDLL(str(libs[0]))
    get, set_ = blas.scipy_openblas_get_num_threads64_, blas.scipy_openblas_set_num_threads64_
    get.restype, set_.argtypes = ctypes.c_int, [ctypes.c_int]
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


def _serve(models: dict[str, dict[str, Any]], directory: Path) -> Iterator[MLServerProcess]:
    if importlib.util.find_spec("mlserver") is None:
        pytest.skip("mlserver is not installed (pip install 'aiopool[mlserver]')")
    with mlserver_process(models, directory=directory) as server:
        yield server
    assert server.pids() == []
    assert _processes_mentioning(str(server.repository)) == [], "a server process survived"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLServerProcess]:
    models = {
        "cartpole": policy_model_settings(FACTORY, kwargs=CARTPOLE),
        "pong": policy_model_settings(FACTORY, kwargs=PONG),
        # the same policy, its raw inputs decoded by MLServer's list codec (no raw-bytes hook)
        "pong_codec": policy_model_settings(FACTORY, kwargs=PONG, raw_fast_path=False),
        "slow": policy_model_settings(FACTORY, kwargs=SLOW),
        "updatable": policy_model_settings(FACTORY, kwargs=CARTPOLE),
        "reloadable": policy_model_settings(FACTORY, kwargs=CARTPOLE),
        "frozen": policy_model_settings(FACTORY, kwargs=CARTPOLE, accept_weights=False),
    }
    yield from _serve(models, tmp_path_factory.mktemp("mlserver"))


@pytest.fixture(scope="module")
def crash_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MLServerProcess]:
    """A server of its own, for the tests that kill and restart it."""
    models = {"cartpole": policy_model_settings(FACTORY, kwargs=CARTPOLE),
              "slow": policy_model_settings(FACTORY, kwargs=SLOW)}
    yield from _serve(models, tmp_path_factory.mktemp("mlserver-crash"))


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("obs", [np.arange(24, dtype=np.float32).reshape(6, 4),
                                 np.arange(2 * 300, dtype=np.uint8).reshape(2, 3, 100)[:, ::2],
                                 np.arange(6, dtype=">i8").reshape(3, 2),
                                 np.zeros((0, 4), np.float64)])
@pytest.mark.parametrize(("version", "output_name"), [("", None), ("7", "actions")])
def test_the_hand_encoded_request_is_the_protobuf_message(
        obs: np.ndarray[Any, Any], packed: bool, version: str, output_name: str | None) -> None:
    from aiopool.inference import _v2_proto as v2

    policy = KServePolicy("127.0.0.1:1", "m", version=version, input_name="x",
                          output_name=output_name, packed=packed)
    got = v2.ModelInferRequest.FromString(policy._infer_request(obs))
    little = obs.astype(obs.dtype.newbyteorder("<"))
    datatype = {"f": "FP32", "u": "UINT8", "i": "INT64"}[obs.dtype.kind]
    datatype = "FP64" if obs.dtype == np.float64 else datatype
    expected = v2.ModelInferRequest(model_name="m", model_version=version)
    tensor = expected.inputs.add(name="x")
    if packed:
        tensor.datatype = "BYTES"
        tensor.shape.append(1)
        tensor.parameters["packed_shape"].string_param = ",".join(map(str, obs.shape))
        tensor.parameters["packed_datatype"].string_param = datatype
        tensor.contents.bytes_contents.append(little.tobytes())
    else:
        tensor.datatype = datatype
        tensor.shape.extend(obs.shape)
        expected.raw_input_contents.append(little.tobytes())
    if output_name:
        expected.outputs.add(name=output_name)
    assert got == expected


async def _drive(pool: aiopool.Pool, policy: KServePolicy, batches: int,
                 reference: Any) -> int:
    """Step ``batches`` batches with the served policy; each answer must equal the
    in-process policy's. Returns the number of rows."""
    rows = 0
    async for batch in pool.stream():
        actions = await policy(batch.obs)
        np.testing.assert_array_equal(actions, reference(batch.obs))
        batch.send(actions)
        rows += len(batch)
        batches -= 1
        if batches == 0:
            return rows
    raise AssertionError("the stream ended early")


@pytest.mark.asyncio
async def test_cartpole_stream_through_the_server_equals_the_policy_in_process(
        server: MLServerProcess) -> None:
    async with asyncio.timeout(30), KServePolicy(server.grpc_target, "cartpole") as policy:
        with aiopool.make("CartPole-v1", num_envs=64, batch_size=32, seed=0) as pool:
            assert await _drive(pool, policy, 40, numpy_mlp_policy(**CARTPOLE)) == 40 * 32
        assert policy.weights_version == 0


@pytest.mark.asyncio
@pytest.mark.parametrize(("model", "packed"), [("pong", False), ("pong", True),
                                               ("pong_codec", False)])
async def test_pong_stream_through_the_server_equals_the_policy_in_process(
        server: MLServerProcess, model: str, packed: bool) -> None:
    async with asyncio.timeout(60), KServePolicy(server.grpc_target, model,
                                                 packed=packed) as policy:
        with aiopool.make("Pong-v5", num_envs=8, batch_size=8, seed=0) as pool:
            pool.async_reset()
            batch = await pool.recv(timeout=10)
            assert batch.obs.shape == (8, 4, 84, 84)
            assert batch.obs.dtype == np.uint8
            reference = numpy_mlp_policy(**PONG)
            actions = await policy(batch.obs)
            np.testing.assert_array_equal(actions, reference(batch.obs))
            batch.send(actions)
            await _drive(pool, policy, 8, reference)


@pytest.mark.asyncio
async def test_eight_consumers_share_one_pool_and_one_client(server: MLServerProcess) -> None:
    reference = numpy_mlp_policy(**CARTPOLE)
    done = 0
    in_flight = max_in_flight = 0
    async with asyncio.timeout(30), KServePolicy(server.grpc_target, "cartpole") as policy:
        with aiopool.make("CartPole-v1", num_envs=64, batch_size=8, seed=1) as pool:

            async def consume() -> None:
                nonlocal done, in_flight, max_in_flight
                async for batch in pool.stream():
                    in_flight += 1
                    max_in_flight = max(max_in_flight, in_flight)
                    actions = await policy(batch.obs)
                    in_flight -= 1
                    np.testing.assert_array_equal(actions, reference(batch.obs))
                    batch.send(actions)
                    done += len(batch)
                    if done >= 4000:
                        return

            await asyncio.gather(*(consume() for _ in range(8)))
    assert done >= 4000
    assert max_in_flight > 1, "the consumers never had two calls in flight at once"


@pytest.mark.asyncio
async def test_a_server_killed_mid_stream_is_a_clear_error_and_the_stream_goes_on(
        crash_server: MLServerProcess) -> None:
    server = crash_server
    reference = numpy_mlp_policy(**CARTPOLE)
    async with asyncio.timeout(60), KServePolicy(server.grpc_target, "cartpole") as policy, \
            KServePolicy(server.grpc_target, "slow") as slow:
        with aiopool.make("CartPole-v1", num_envs=16, batch_size=8, seed=2) as pool:
            await _drive(pool, policy, 5, reference)
            # a call in flight when the server dies fails at once, naming server, model, status
            call = asyncio.create_task(slow(np.zeros((8, 4), np.float32)))
            await asyncio.sleep(0.1)
            assert not call.done()
            start = time.monotonic()
            await asyncio.to_thread(server.kill)
            with pytest.raises(InferenceServerError) as failed:
                await asyncio.wait_for(call, 5)
            assert time.monotonic() - start < 5
            err = failed.value
            assert (err.target, err.model, err.code) == (server.grpc_target, "slow", "UNAVAILABLE")
            assert server.grpc_target in str(err) and "'slow'" in str(err)
            assert "UNAVAILABLE" in str(err)
            # so does the stream's next call, at once
            batch = await pool.recv(timeout=5)
            start = time.monotonic()
            with pytest.raises(InferenceServerError, match="UNAVAILABLE") as failed:
                await asyncio.wait_for(policy(batch.obs), 5)
            assert time.monotonic() - start < 5 and failed.value.model == "cartpole"
            # the server comes back on the same port: the very next call (for the same batch,
            # which is still ours to answer) goes through
            await asyncio.to_thread(server.start)
            actions = await asyncio.wait_for(policy(batch.obs), 5)
            np.testing.assert_array_equal(actions, reference(batch.obs))
            batch.send(actions)
            await _drive(pool, policy, 10, reference)
            assert await slow.is_ready()


@pytest.mark.asyncio
async def test_published_weights_are_seen_by_the_next_call(server: MLServerProcess) -> None:
    obs = np.random.default_rng(3).standard_normal((64, 4)).astype(np.float32)
    new = [numpy_mlp_policy(**CARTPOLE, seed=seed) for seed in (11, 12)]
    assert not np.array_equal(new[0](obs), new[1](obs))
    async with asyncio.timeout(30), KServePolicy(server.grpc_target, "updatable") as policy:
        assert await policy.publish_weights(new[0].to_bytes(), version=7) == 7
        np.testing.assert_array_equal(await policy(obs), new[0](obs))
        assert policy.weights_version == 7
        assert await policy.publish_weights(new[1].to_bytes()) == 8  # the next version
        np.testing.assert_array_equal(await policy(obs), new[1](obs))
        assert policy.weights_version == 8
        # while consumers keep calling, every answer comes from one set of weights or the other
        answers: list[Any] = await asyncio.gather(
            *(policy(obs) for _ in range(8)),
            policy.publish_weights(new[0].to_bytes(), version=9),
            *(policy(obs) for _ in range(8)))
        for a in answers[:8] + answers[9:]:
            assert np.array_equal(a, new[0](obs)) or np.array_equal(a, new[1](obs))
        np.testing.assert_array_equal(await policy(obs), new[0](obs))
        assert policy.weights_version == 9


@pytest.mark.asyncio
async def test_reload_loads_the_model_settings_on_disk(server: MLServerProcess) -> None:
    obs = np.random.default_rng(4).standard_normal((64, 4)).astype(np.float32)
    settings_path = server.repository / "reloadable" / "model-settings.json"
    settings = json.loads(settings_path.read_text())
    async with asyncio.timeout(30), KServePolicy(server.grpc_target, "reloadable") as policy:
        for seed in (21, 22):
            settings["parameters"]["extra"]["kwargs"] = {**CARTPOLE, "seed": seed}
            settings["parameters"]["extra"]["weights_version"] = seed
            settings_path.write_text(json.dumps(settings))
            await policy.reload()
            np.testing.assert_array_equal(await policy(obs),
                                          numpy_mlp_policy(**CARTPOLE, seed=seed)(obs))
            assert policy.weights_version == seed


@pytest.mark.asyncio
async def test_refusals_name_the_server_the_model_and_the_status(
        server: MLServerProcess) -> None:
    obs = np.zeros((4, 4), np.float32)
    target = server.grpc_target
    async with asyncio.timeout(30):
        async with KServePolicy(target, "no-such-model") as policy:
            with pytest.raises(InferenceServerError, match="NOT_FOUND") as e:
                await policy(obs)
            assert e.value.code == "NOT_FOUND" and target in str(e.value)
            assert "'no-such-model'" in str(e.value)
        async with KServePolicy(target, "cartpole") as policy:
            with pytest.raises(InferenceServerError, match="expected 4") as e:
                await policy(np.zeros((4, 5), np.float32))  # the model raises
            assert e.value.code == "INTERNAL"
            with pytest.raises(TypeError, match="cannot carry"):
                await policy(np.zeros((4, 4), object))
            with pytest.raises(ValueError, match="batch"):
                await policy(np.float32(1))
            np.testing.assert_array_equal(await policy(obs), numpy_mlp_policy(**CARTPOLE)(obs))
        async with KServePolicy(target, "frozen") as policy:
            with pytest.raises(InferenceServerError, match="FAILED_PRECONDITION.*accept_weights"):
                await policy.publish_weights(b"weights")


@pytest.mark.asyncio
async def test_timeouts_and_cancellation_leave_the_channel_working(
        server: MLServerProcess) -> None:
    obs = np.zeros((4, 4), np.float32)
    reference = numpy_mlp_policy(**SLOW)(obs)
    async with asyncio.timeout(30), KServePolicy(server.grpc_target, "slow",
                                                 timeout=0.1) as policy:
        start = time.monotonic()
        with pytest.raises(InferenceServerTimeout, match="DEADLINE_EXCEEDED") as e:
            await policy(obs)
        assert isinstance(e.value, TimeoutError) and time.monotonic() - start < 1.0
        calls = [asyncio.create_task(policy.infer(obs, timeout=10)) for _ in range(3)]
        await asyncio.sleep(0.05)
        calls[1].cancel()
        first, second, third = await asyncio.gather(*calls, return_exceptions=True)
        assert isinstance(second, asyncio.CancelledError)
        np.testing.assert_array_equal(first, reference)
        np.testing.assert_array_equal(third, reference)
        np.testing.assert_array_equal(await policy.infer(obs, timeout=10), reference)


@pytest.mark.asyncio
async def test_a_server_that_is_not_there(unused_tcp_port: int) -> None:
    target = f"127.0.0.1:{unused_tcp_port}"
    async with asyncio.timeout(10), KServePolicy(target, "cartpole") as policy:
        start = time.monotonic()
        with pytest.raises(InferenceServerError, match="UNAVAILABLE") as e:
            await policy(np.zeros((2, 4), np.float32))
        assert time.monotonic() - start < 3 and target in str(e.value)
        with pytest.raises(InferenceServerTimeout, match="not ready after 0.3 s"):
            await policy.wait_ready(0.3)
        assert time.monotonic() - start < 4
    with pytest.raises(RuntimeError, match="closed"):
        await policy(np.zeros((2, 4), np.float32))


@pytest.mark.asyncio
async def test_wait_ready_metadata_and_rest_json(server: MLServerProcess) -> None:
    obs = np.random.default_rng(5).standard_normal((16, 4)).astype(np.float32)
    async with asyncio.timeout(30), KServePolicy(server.grpc_target, "cartpole") as policy:
        await policy.wait_ready(5)
        assert (await policy.metadata())["name"] == "cartpole"
        expected = await policy(obs)
    body = json.dumps({"inputs": [{"name": "obs", "shape": list(obs.shape), "datatype": "FP32",
                                   "data": obs.ravel().tolist()}]}).encode()
    request = urllib.request.Request(f"{server.http_url}/v2/models/cartpole/infer", data=body,
                                     headers={"Content-Type": "application/json"})
    reply = await asyncio.to_thread(lambda: json.load(urllib.request.urlopen(request, timeout=5)))
    (out,) = reply["outputs"]
    assert out["shape"] == [16] and out["data"] == expected.tolist()


# -- a standard V2 client: tritonclient, in a venv of its own ---------------------------------

_TRITON_SCRIPT = """
import sys, numpy as np, tritonclient.grpc as grpcclient
client = grpcclient.InferenceServerClient(sys.argv[1])
assert client.is_server_live() and client.is_server_ready()
for model, path in zip(sys.argv[2::2], sys.argv[3::2]):
    assert client.is_model_ready(model)
    obs = np.load(path)
    inp = grpcclient.InferInput("obs", list(obs.shape), "FP32" if obs.dtype == np.float32
                                else "UINT8")
    inp.set_data_from_numpy(obs)
    result = client.infer(model, [inp], outputs=[grpcclient.InferRequestedOutput("actions")])
    np.save(path + ".actions.npy", result.as_numpy("actions"))
print("ok")
"""


@pytest.fixture(scope="session")
def triton_python(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> str:
    """The python of a venv with tritonclient[grpc] and numpy, created once and cached in
    pytest's cache directory (in a temporary one under ``-p no:cacheprovider``)."""
    name = f"aiopool-tritonclient-py{sys.version_info[0]}{sys.version_info[1]}"
    cache = getattr(request.config, "cache", None)
    venv = Path(cache.mkdir(name) if cache is not None else tmp_path_factory.mktemp(name))
    python = venv / "bin" / "python"
    marker = venv / "installed"
    if not marker.exists():
        shutil.rmtree(venv)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                       timeout=60)
        r = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
             "--disable-pip-version-check", "tritonclient[grpc]", "numpy"],
            capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            out = r.stdout + r.stderr
            unreachable = ("Failed to establish", "NewConnectionError", "Name or service",
                           "Temporary failure in name resolution", "No matching distribution")
            if any(s in out for s in unreachable):
                pytest.skip(f"cannot install tritonclient[grpc] from PyPI: {out[-500:]}")
            pytest.fail(f"pip install tritonclient[grpc] numpy failed:\n{out[-3000:]}")
        marker.write_text("tritonclient[grpc] numpy\n")
    return str(python)


def test_tritonclient_gets_the_same_answers_as_kserve_policy(
        server: MLServerProcess, triton_python: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    inputs: dict[str, np.ndarray[Any, Any]] = {
        "cartpole": rng.standard_normal((32, 4)).astype(np.float32),
        "pong": rng.integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)}
    args = []
    for model, obs in inputs.items():
        np.save(tmp_path / f"{model}.npy", obs)
        args += [model, str(tmp_path / f"{model}.npy")]
    r = subprocess.run([triton_python, "-c", _TRITON_SCRIPT, server.grpc_target, *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr

    async def ours() -> dict[str, np.ndarray[Any, Any]]:
        out = {}
        for model, obs in inputs.items():
            async with KServePolicy(server.grpc_target, model) as policy:
                out[model] = await asyncio.wait_for(policy(obs), 10)
        return out

    for model, actions in asyncio.run(ours()).items():
        theirs = np.load(tmp_path / f"{model}.npy.actions.npy")
        assert theirs.dtype == np.int64 and theirs.shape == actions.shape
        np.testing.assert_array_equal(theirs, actions)
        np.testing.assert_array_equal(actions, numpy_mlp_policy(
            **(CARTPOLE if model == "cartpole" else PONG))(inputs[model]))


def test_the_private_descriptors_load_next_to_mlserver_and_tritonclient(
        triton_python: str) -> None:
    """Both register inference.* in protobuf's default pool (one process cannot import both);
    aiopool's messages live in a pool of their own and load next to either."""
    proto = Path(__file__).resolve().parent.parent / "aiopool" / "inference" / "_v2_proto.py"
    check = (
        "import importlib.util, sys\n"
        "from {module} import {name} as theirs\n"
        "spec = importlib.util.spec_from_file_location('v2', sys.argv[1])\n"
        "v2 = importlib.util.module_from_spec(spec); spec.loader.exec_module(v2)\n"
        "ours = v2.ModelInferRequest(model_name='m', raw_input_contents=[b'x'])\n"
        "assert theirs.ModelInferRequest.FromString(ours.SerializeToString()).model_name == 'm'\n"
        "print('ok')\n")
    runs = [(triton_python, "tritonclient.grpc", "service_pb2")]
    if importlib.util.find_spec("mlserver") is not None:
        runs.append((sys.executable, "mlserver.grpc", "dataplane_pb2"))
    for python, module, name in runs:
        r = subprocess.run([python, "-c", check.format(module=module, name=name), str(proto)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
