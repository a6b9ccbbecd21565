"""What serving a policy costs: per-request latency, env-steps/s and the event loop's lag.

Modes, for 1, 4 and 16 consumers (coroutines each keeping one request in flight), with
CartPole-shaped (float32 [32, 4]) and Pong-shaped (uint8 [32, 4, 84, 84]) requests:

- ``direct``: the policy called on the loop (blocks the loop for every forward);
- ``executor``: one ``run_in_executor`` call per request (``from_callable``);
- ``batcher``: ``DynamicBatcher``, one forward per loop tick;
- ``grpc``: ``KServePolicy``, one V2 ``ModelInfer`` call per request, to a real MLServer on
  loopback serving the same model with aiopool's ``PolicyRuntime``;
- ``grpc-batcher``: ``DynamicBatcher(KServePolicy(...))``, one call per loop tick;
- ``grpc-stub``: the least a client can do, for comparison: a bare grpcio stub, a protobuf
  ``ModelInferRequest`` built per call, the answer read with ``numpy.frombuffer``;
- ``pool`` rows (``--pool-consumers``, default 2 and 8): a real ``CartPole-v1`` pool of 64
  envs, batch 32, each consumer an ``async for batch in pool.stream()`` loop sending what a
  shared ``DynamicBatcher`` of the same model answers: env-steps/s when more consumers share
  the pool than it has batches (8 at 64/32 take turns with the batches 2 would hold);
- ``triton``: ``tritonclient.grpc.aio``, run with the python of a venv that has it
  (``--triton-python``; by default the one ``tests/test_inference_server.py`` builds in
  ``.pytest_cache``: tritonclient's protos clash with mlserver's, so it never shares a venv).

The policy is a small torch MLP (``torch.set_num_threads(1)``, set deliberately: on 2 cores
the forward's thread leaves the other core to the loop); the server runs the same factory
(``make_policy``), started once per run with ``aiopool.inference.testing.mlserver_process``
(one process, one BLAS thread, stopped at the end) and shares the machine's cores with the
client. A probe task wakes every ~1 ms and times one ``sleep(0)`` round trip: how long a ready
task waits for the loop, its lag. Each (mode, shape, consumers) cell runs in a fresh
subprocess, repeats are interleaved, medians reported. A request is a batch of 32 envs'
observations, so env-steps/s = 32 x requests/s: the rate at which this policy could drive a
pool. Table on stdout, JSON + PNG in benchmarks/results/, progress on stderr.

Ray Serve is not a mode: it needs Ray (the separate ``aiopool[ray]`` extra), and
``ray[serve]`` cannot share a venv with mlserver (it wants protobuf 7 and fastapi 0.165,
mlserver pins protobuf < 7 and fastapi < 0.116). Measured on this machine in
``../shared/findings/inference-servers.md`` (§2): a Serve handle call from asyncio took 2.9 ms
for CartPole (585 requests/s at best) and 10.3 ms for Pong (237 requests/s), with 7-10 s to
start and 12 processes.

    python benchmarks/inference.py                          # ~7 min, every mode
    python benchmarks/inference.py --modes grpc,grpc-stub   # some modes only
    python benchmarks/inference.py --quick                  # a smoke run (in-process modes
                                                            # unless --modes says otherwise)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"cartpole": ((32, 4), "float32"), "pong": ((32, 4, 84, 84), "uint8")}
LOCAL_MODES = ("direct", "executor", "batcher")
SERVER_MODES = ("grpc", "grpc-batcher", "grpc-stub", "triton")
MODES = LOCAL_MODES + SERVER_MODES
V2_DATATYPES = {"float32": "FP32", "uint8": "UINT8"}
TRITON_VENV = ROOT / ".pytest_cache" / "d" / (
    f"aiopool-tritonclient-py{sys.version_info[0]}{sys.version_info[1]}")

Policy = Callable[[np.ndarray], Awaitable[Any]]


def make_policy(shape: str) -> Any:
    """The benchmark's model as a sync ``obs -> actions``; also the server's factory."""
    import torch

    from aiopool.inference import torch_policy

    torch.manual_seed(0)
    dims, _ = SHAPES[shape]
    width = int(np.prod(dims[1:]))
    hidden = 64 if shape == "cartpole" else 32
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(width, hidden),
                                torch.nn.ReLU(), torch.nn.Linear(hidden, 6))
    return torch_policy(model, num_threads=1)


class BareStub:
    """A V2 client with nothing of aiopool's: a grpcio stub and protobuf messages."""

    def __init__(self, target: str, model: str) -> None:
        import grpc  # type: ignore[import-untyped]

        from aiopool.inference import _v2_proto as v2

        self.v2, self.model = v2, model
        self.channel = grpc.aio.insecure_channel(target, options=[
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.max_receive_message_length", 64 << 20)])
        self.infer = self.channel.unary_unary(
            v2.method_path("ModelInfer"), request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=v2.ModelInferResponse.FromString)

    async def __call__(self, obs: np.ndarray) -> np.ndarray:
        request = self.v2.ModelInferRequest(
            model_name=self.model, raw_input_contents=[obs.tobytes()],
            inputs=[{"name": "obs", "datatype": V2_DATATYPES[obs.dtype.name],
                     "shape": obs.shape}])
        response = await self.infer(request)
        if response.raw_output_contents:
            return np.frombuffer(response.raw_output_contents[0], "<i8")
        return np.array(response.outputs[0].contents.int64_contents)

    async def aclose(self) -> None:
        await self.channel.close()


class TritonClient:
    """``tritonclient.grpc.aio``, the standard V2 client (run in its own venv)."""

    def __init__(self, target: str, model: str) -> None:
        import tritonclient.grpc.aio as tc  # type: ignore[import-not-found]

        self.tc, self.model = tc, model
        self.client = tc.InferenceServerClient(target)

    async def __call__(self, obs: np.ndarray) -> np.ndarray:
        inp = self.tc.InferInput("obs", list(obs.shape), V2_DATATYPES[obs.dtype.name])
        inp.set_data_from_numpy(obs)
        result = await self.client.infer(
            self.model, [inp], outputs=[self.tc.InferRequestedOutput("actions")])
        return result.as_numpy("actions")  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self.client.close()


async def measure(mode: str, shape: str, consumers: int, seconds: float,
                  target: str | None = None) -> dict[str, Any]:
    dims, dtype = SHAPES[shape]
    obs = np.random.default_rng(0).integers(0, 255, dims).astype(dtype)
    fn = make_policy(shape) if mode in LOCAL_MODES else None
    batcher = None
    policy: Policy | None = None
    if mode == "executor":
        from aiopool.inference import from_callable

        policy = from_callable(fn)
    elif mode == "batcher":
        from aiopool.inference import DynamicBatcher

        policy = batcher = DynamicBatcher(fn)
    elif mode in ("grpc", "grpc-batcher"):
        from aiopool.inference import DynamicBatcher
        from aiopool.inference.kserve import KServePolicy

        assert target is not None
        policy = KServePolicy(target, shape)
        if mode == "grpc-batcher":
            policy = batcher = DynamicBatcher(policy)
    elif mode == "grpc-stub":
        assert target is not None
        policy = BareStub(target, shape)
    elif mode == "triton":
        assert target is not None
        policy = TritonClient(target, shape)
    if mode in SERVER_MODES:  # connect, and let the server warm up, before the clock starts
        assert policy is not None
        answers = await asyncio.gather(*(policy(obs) for _ in range(max(consumers, 4))))
        assert all(np.shape(a) == dims[:1] for a in answers), [np.shape(a) for a in answers]
        warm_until = time.perf_counter() + 0.2
        while time.perf_counter() < warm_until:
            await policy(obs)
    before = batcher.stats if batcher else None
    latencies: list[float] = []
    lags: list[float] = []
    stop = time.perf_counter() + seconds

    async def consumer() -> None:
        while time.perf_counter() < stop:
            t = time.perf_counter()
            if policy is None:
                fn(obs)
                await asyncio.sleep(0)  # a consumer yields between batches, as stream() does
            else:
                await policy(obs)
            latencies.append(time.perf_counter() - t)

    async def probe() -> None:  # every ~1 ms: how long does a ready task wait for the loop?
        while time.perf_counter() < stop:
            await asyncio.sleep(0.001)
            t = time.perf_counter()
            await asyncio.sleep(0)
            lags.append(time.perf_counter() - t)

    started = time.perf_counter()
    await asyncio.gather(probe(), *(consumer() for _ in range(consumers)))
    elapsed = time.perf_counter() - started
    rows_per_forward = float(dims[0])
    if batcher is not None and before is not None:
        after = batcher.stats
        rows_per_forward = (after.rows - before.rows) / max(after.forwards - before.forwards, 1)
        await batcher.aclose()
    elif hasattr(policy, "aclose"):
        await policy.aclose()
    lat = np.array(latencies) * 1e6
    lag = np.array(lags) * 1e6
    return {"median_us": float(np.median(lat)), "p99_us": float(np.percentile(lat, 99)),
            "req_per_s": len(lat) / elapsed, "rows_per_s": len(lat) * dims[0] / elapsed,
            "rows_per_forward": rows_per_forward,
            "lag_p99_us": float(np.percentile(lag, 99)), "lag_max_us": float(lag.max())}


async def measure_pool(consumers: int, seconds: float) -> dict[str, Any]:
    """Env-steps/s of ``consumers`` stream() loops sharing a 64/32 CartPole pool and one
    DynamicBatcher (the README's actor loop)."""
    import aiopool
    from aiopool.inference import DynamicBatcher

    fn = make_policy("cartpole")
    policy = DynamicBatcher(lambda obs: fn(obs) % 2)
    rows = 0
    warm = time.perf_counter() + 0.2
    stop = warm + seconds
    started = 0.0
    async with aiopool.make("CartPole-v1", num_envs=64, batch_size=32, seed=0) as pool:

        async def actor() -> None:
            nonlocal rows
            try:
                async for batch in pool.stream():
                    now = time.perf_counter()
                    if now >= stop:
                        return  # drops its batch unsent: the others are told at once
                    if now >= warm:
                        rows += len(batch)
                    batch.send(await policy(batch.obs))
            except aiopool.NothingInFlight:
                if time.perf_counter() < stop:
                    raise

        started = warm
        await asyncio.gather(*(actor() for _ in range(consumers)))
    await policy.aclose()
    return {"rows_per_s": rows / (time.perf_counter() - started)}


def run_pool_cell(consumers: int, seconds: float) -> dict[str, Any]:
    code = ("import asyncio, json, sys; sys.path.insert(0, 'benchmarks'); import inference;"
            f"print(json.dumps(asyncio.run(inference.measure_pool({consumers}, {seconds}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    if out.returncode != 0:
        raise RuntimeError(f"pool/{consumers} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_cell(mode: str, shape: str, consumers: int, seconds: float, target: str | None = None,
             python: str = sys.executable) -> dict[str, Any]:
    code = ("import asyncio, json, sys; sys.path.insert(0, 'benchmarks'); import inference;"
            f"print(json.dumps(asyncio.run(inference.measure({mode!r}, {shape!r}, "
            f"{consumers}, {seconds}, {target!r}))))")
    out = subprocess.run([python, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    if out.returncode != 0:
        raise RuntimeError(f"{mode}/{shape}/{consumers} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def triton_python(path: str | None) -> tuple[str | None, str]:
    """The python to run the ``triton`` cells with, or None and why not."""
    python = Path(path) if path else TRITON_VENV / "bin" / "python"
    if not python.exists():
        return None, (f"no {python}: pass --triton-python, or run "
                      f"tests/test_inference_server.py once to build that venv")
    r = subprocess.run([str(python), "-c", "import tritonclient.grpc.aio"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None, f"{python} cannot import tritonclient.grpc.aio: {r.stderr[-300:]}"
    return str(python), ""


@contextlib.contextmanager
def serve(shapes: list[str], info: dict[str, Any]) -> Iterator[str]:
    """MLServer serving ``make_policy(shape)`` as model ``shape``; yields its gRPC target."""
    from aiopool.inference.testing import mlserver_process, policy_model_settings

    models = {s: policy_model_settings("inference:make_policy", kwargs={"shape": s})
              for s in shapes}
    start = time.perf_counter()
    with mlserver_process(models, pythonpath=[ROOT / "benchmarks"]) as server:
        info["ready_s"] = time.perf_counter() - start
        info["pid"] = server.process.pid if server.process else None
        print(f"MLServer on {server.grpc_target}, ready in {info['ready_s']:.1f} s",
              file=sys.stderr)
        yield server.grpc_target
        start = time.perf_counter()
    info["stop_s"] = time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=1.5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--consumers", default="1,4,16")
    p.add_argument("--shapes", default="cartpole,pong")
    p.add_argument("--modes", default=None,
                   help=f"comma-separated, from {', '.join(MODES)} (default: all; --quick: "
                        f"the in-process ones)")
    p.add_argument("--triton-python", default=None,
                   help=f"a python that can import tritonclient (default: {TRITON_VENV})")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--pool-consumers", default="2,8",
                   help="consumers of the 64/32 CartPole pool rows ('' for none)")
    p.add_argument("--quick", action="store_true", help="1 repeat of 0.2 s, CartPole, 1 and 4")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.consumers, args.shapes = 0.2, 1, "1,4", "cartpole"
        args.modes = args.modes or ",".join(LOCAL_MODES)
    modes = (args.modes or ",".join(MODES)).split(",")
    if unknown := set(modes) - set(MODES):
        p.error(f"unknown modes {sorted(unknown)}; expected some of {', '.join(MODES)}")
    consumers = [int(c) for c in args.consumers.split(",")]
    shapes = args.shapes.split(",")
    skipped: dict[str, str] = {}
    python = {m: sys.executable for m in modes}
    if "triton" in modes:
        triton, why = triton_python(args.triton_python)
        if triton is None:
            skipped["triton"] = why
        else:
            python["triton"] = triton
    if set(modes) & set(SERVER_MODES) and importlib.util.find_spec("mlserver") is None:
        skipped.update({m: "mlserver is not installed (pip install -e '.[mlserver]')"
                        for m in SERVER_MODES})
    modes = [m for m in modes if m not in skipped]
    for m, why in skipped.items():
        print(f"skipping {m}: {why}", file=sys.stderr)
    cells = [(m, s, c) for s in shapes for c in consumers for m in modes]
    pool_consumers = [int(c) for c in args.pool_consumers.split(",") if c]
    pool_runs: dict[int, list[float]] = {c: [] for c in pool_consumers}
    load = [os.getloadavg()]
    server: dict[str, Any] = {}
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {cell: [] for cell in cells}
    with contextlib.ExitStack() as stack:
        target = None
        if set(modes) & set(SERVER_MODES):
            target = stack.enter_context(serve(shapes, server))
        for r in range(args.repeats):
            for k, (m, s, c) in enumerate(cells):
                print(f"repeat {r + 1}/{args.repeats}, {k + 1}/{len(cells)}: {m} {s} {c}",
                      file=sys.stderr)
                results[(m, s, c)].append(run_cell(m, s, c, args.seconds, target, python[m]))
            for c in pool_consumers:
                print(f"repeat {r + 1}/{args.repeats}: pool 64/32, {c} consumers",
                      file=sys.stderr)
                pool_runs[c].append(run_pool_cell(c, args.seconds)["rows_per_s"])
    load.append(os.getloadavg())
    keys = ("median_us", "p99_us", "req_per_s", "rows_per_s", "rows_per_forward",
            "lag_p99_us", "lag_max_us")
    rows = {cell: {k: statistics.median(x[k] for x in runs) for k in keys}
            for cell, runs in results.items()}
    print(f"# aiopool inference, torch 1 thread, load {load[0][0]:.2f} -> {load[1][0]:.2f}, "
          f"{args.repeats} interleaved repeats x {args.seconds} s, medians"
          + (f"; MLServer ready in {server['ready_s']:.1f} s, stopped in "
             f"{server['stop_s']:.1f} s" if server else "") + "\n")
    print("| shape | consumers | mode | median µs | p99 µs | requests/s | env-steps/s | "
          "rows/forward | loop lag p99 µs | lag max µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (m, s, c), v in rows.items():
        print(f"| {s} | {c} | {m} | {v['median_us']:.0f} | {v['p99_us']:.0f} | "
              f"{v['req_per_s']:.0f} | {v['rows_per_s']:.0f} | {v['rows_per_forward']:.0f} | "
              f"{v['lag_p99_us']:.0f} | {v['lag_max_us']:.0f} |")
    print()
    pool_rows = {c: statistics.median(v) for c, v in pool_runs.items()}
    if pool_rows:
        print("| CartPole pool 64/32, stream() + DynamicBatcher | consumers | env-steps/s |")
        print("|---|---|---|")
        for c, v in pool_rows.items():
            print(f"| | {c} | {v:.0f} |")
        print()
    for line in summary(rows, shapes, consumers):
        print(line)
    if 2 in pool_rows and 8 in pool_rows:
        print(f"pool 64/32: 8 consumers / 2 consumers env-steps/s: "
              f"{pool_rows[8] / pool_rows[2]:.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "inference.json").write_text(json.dumps(
        {"load": load, "args": {k: str(v) for k, v in vars(args).items()},
         "server": server, "skipped": skipped,
         "cells": [{"mode": m, "shape": s, "consumers": c, **v} for (m, s, c), v in rows.items()],
         "runs": {f"{m}/{s}/{c}": r for (m, s, c), r in results.items()},
         "pool": {"cells": pool_rows, "runs": pool_runs}}, indent=1))
    plot(rows, modes, shapes, consumers, args.out / "inference.png")
    print(f"\nwrote {args.out / 'inference.json'} and {args.out / 'inference.png'}")
    return 0


def summary(rows: dict[tuple[str, str, int], dict[str, Any]], shapes: list[str],
            consumers: list[int]) -> list[str]:
    """The issue's targets, where this run measured both sides."""
    lines = []
    many = max(consumers)
    for s in shapes:
        one = rows.get(("batcher", s, 1)), rows.get(("executor", s, 1))
        if one[0] and one[1]:
            lines.append(f"{s}: batcher - executor at 1 consumer: "
                         f"{one[0]['median_us'] - one[1]['median_us']:+.1f} µs per request")
        pair = rows.get(("batcher", s, many)), rows.get(("executor", s, many))
        if pair[0] and pair[1]:
            lines.append(f"{s}: batcher / executor requests/s at {many} consumers: "
                         f"{pair[0]['req_per_s'] / pair[1]['req_per_s']:.2f}x")
        stub = rows.get(("grpc", s, 1)), rows.get(("grpc-stub", s, 1))
        if stub[0] and stub[1]:
            lines.append(f"{s}: KServePolicy / bare grpcio stub round trip at 1 consumer: "
                         f"{stub[0]['median_us'] / stub[1]['median_us']:.2f}x "
                         f"({stub[0]['median_us'] / 1e3:.2f} vs "
                         f"{stub[1]['median_us'] / 1e3:.2f} ms)")
        elif stub[0]:
            lines.append(f"{s}: KServePolicy round trip at 1 consumer: "
                         f"{stub[0]['median_us'] / 1e3:.2f} ms")
        ratios = [f"{rows[('grpc', s, c)]['req_per_s'] / rows[('triton', s, c)]['req_per_s']:.2f}x"
                  f" at {c}" for c in consumers
                  if ("grpc", s, c) in rows and ("triton", s, c) in rows]
        if ratios:
            lines.append(f"{s}: KServePolicy / tritonclient.grpc.aio requests/s: "
                         f"{', '.join(ratios)} consumers")
    return lines


def plot(rows: dict[tuple[str, str, int], dict[str, Any]], modes: list[str], shapes: list[str],
         consumers: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 3.8), squeeze=False)
    for ax, s in zip(axes[0], shapes, strict=True):
        for m in modes:
            ax.plot(consumers, [rows[(m, s, c)]["rows_per_s"] for c in consumers], marker="o",
                    label=m, linestyle="-" if m in LOCAL_MODES else "--")
        ax.set(title=f"{s}, {'x'.join(map(str, SHAPES[s][0]))} {SHAPES[s][1]} per request",
               xlabel="consumers", ylabel="env-steps/s", xscale="log", yscale="log")
        ax.set_xticks(consumers, [str(c) for c in consumers])
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
