"""The inference examples on tiny budgets: rlpyt's three samplers over ``pool.stream()``, the
actor-learner whose policy MLServer serves (slow: to 475), and the gRPC modes of
benchmarks/inference.py against a real MLServer. Servers run on loopback as child processes
(``aiopool.inference.testing.mlserver_process``); every test checks that none is left."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import actor_learner_mlserver as al  # noqa: E402
import ppo_cartpole_async as ppo  # noqa: E402
import rlpyt_samplers as samplers  # noqa: E402

needs_mlserver = pytest.mark.skipif(importlib.util.find_spec("mlserver") is None,
                                    reason="needs mlserver: pip install -e '.[test]'")


def _children() -> set[int]:
    """The live child processes of this process (from /proc)."""
    pids = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids |= {int(p) for p in (task / "children").read_text().split()}
        except FileNotFoundError:  # the thread ended after the listing
            continue
    return {p for p in pids if _alive(p)}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _processes_mentioning(text: str) -> list[str]:
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


def _assert_server_gone(pid: int | None, repository: str | None = None) -> None:
    assert pid is not None
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), f"the MLServer process {pid} is still running"
    if repository:
        assert _processes_mentioning(repository) == [], "a server process survived"


# -- rlpyt's samplers ------------------------------------------------------------------------


def _assert_greedy(model: Any, samples: samplers.Samples) -> None:
    """Every action sent is the agent's argmax. A forward over another number of rows may
    round the last bit of a logit differently, so only near-ties may differ."""
    with torch.inference_mode():
        logits = model(torch.as_tensor(samples.obs, dtype=torch.float32)).numpy()
    top2 = np.sort(logits, axis=1)[:, -2:]
    differ = logits.argmax(1) != samples.action
    assert (top2[differ, 1] - top2[differ, 0] < 1e-5).all(), np.flatnonzero(differ)[:10]
    assert differ.mean() < 0.01


def _assert_rows_chain(samples: samplers.Samples) -> None:
    """Per env, in time order: a reward of 0 exactly on the step after an episode ended (the
    autoreset step; CartPole pays 1 for every other step)."""
    for env in np.unique(samples.env_id):
        rows = np.flatnonzero(samples.env_id == env)
        np.testing.assert_array_equal(samples.reward[rows[1:]] == 0, samples.done[rows[:-1]])


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("sampler", samplers.SAMPLERS)
def test_sampler_collects_every_step_with_the_agents_actions(sampler: str) -> None:
    before = _children()
    args = samplers.Args(sampler=sampler, num_envs=16, batch_size=4, batch_T=16, iterations=3)
    out = asyncio.run(samplers.main(args))
    samples = out["samples"]
    assert isinstance(samples, samplers.Samples)
    assert out["iterations"] == 3
    assert out["steps"] == 3 * 16 * 16 and samples.rows == 16 * 16
    assert out["rate"] > 0
    _assert_greedy(out["model"], samples)
    _assert_rows_chain(samples)
    batches = samples.env_id.reshape(-1, out["batch_size"])
    counts = np.bincount(samples.env_id, minlength=16)
    if sampler == "serial":  # every batch holds every env
        assert (np.sort(batches, axis=1) == np.arange(16)).all()
    elif sampler == "alternating":  # two fixed halves, taking turns
        first, second = set(batches[0]), set(batches[1])
        assert len(first) == len(second) == 8 and not first & second
        for k, batch in enumerate(batches):
            assert set(batch) == (first if k % 2 == 0 else second)
    if sampler != "central":
        assert (counts == 16).all()
    else:  # four consumers, whose calls shared forwards
        assert (counts > 0).all()
        stats = out["stats"]
        assert stats.requests >= 3 * 16 * 16 // 4
        assert stats.forwards < stats.requests and stats.rows_per_forward > 4
    assert _children() == before


# -- the actor-learner with its policy on MLServer -----------------------------------------------


def test_the_served_agent_is_the_published_weights() -> None:
    torch.manual_seed(7)
    agent = ppo.Agent(4, 2)
    blob = al.pack({k: v.numpy() for k, v in agent.state_dict().items()})
    obs = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    with torch.inference_mode():
        expected = agent.actor(torch.from_numpy(obs)).numpy()
    np.testing.assert_array_equal(al.serve_agent(4, 2, weights=blob)(obs), expected)
    assert not np.array_equal(al.serve_agent(4, 2)(obs), expected)  # fresh weights differ
    actions, logp = al.sample(expected, np.random.default_rng(0))
    log_softmax = torch.log_softmax(torch.from_numpy(expected), -1).numpy()
    np.testing.assert_allclose(logp, log_softmax[np.arange(32), actions], rtol=1e-5)


@needs_mlserver
def test_actor_learner_runs_and_publishes_every_update(tmp_path: Path) -> None:
    before = _children()
    out = al.main(al.Args(total_timesteps=2048, num_envs=8, batch_size=4, num_steps=32,
                          plot=str(tmp_path / "curve.png"), print_every=1.0))
    assert out["global_step"] >= 2048 and out["episodes"] > 20
    assert out["updates"] >= 2048 // (8 * 32) - 2
    # the answers came from the weights the learner published (version k after update k)
    assert out["updates"] - 1 <= out["weights_version"] <= out["updates"]
    assert out["requests"] >= out["global_step"] // 4 and out["calls"] <= out["requests"]
    assert (tmp_path / "curve.png").stat().st_size > 10_000
    _assert_server_gone(out["server"]["pid"], out["server"]["repository"])
    assert _children() == before


@needs_mlserver
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_actor_learner_reaches_475_with_its_policy_on_mlserver(tmp_path: Path) -> None:
    before = _children()
    start = time.perf_counter()
    out = al.main(al.Args(seed=1, plot=str(tmp_path / "curve.png"), print_every=10.0))
    took = time.perf_counter() - start
    print(f"reached {out['mean_return']:.1f} after {out['global_step']:,} env steps and "
          f"{out['updates']} published updates in {out['seconds']:.1f} s (test {took:.1f} s)")
    assert out["reached"] and out["mean_return"] >= 475, out
    assert took < 300
    assert out["updates"] - 1 <= out["weights_version"] <= out["updates"]
    _assert_server_gone(out["server"]["pid"], out["server"]["repository"])
    assert _children() == before


# -- benchmarks/inference.py's server modes -----------------------------------------------------


@pytest.mark.slow  # a benchmark (16 s): the exhaustive tier; the inference tests start MLServer too
@needs_mlserver
def test_inference_benchmark_grpc_modes_against_mlserver(tmp_path: Path) -> None:
    modes = ("grpc", "grpc-batcher", "grpc-stub", "triton")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "inference.py"), "--quick", "--modes",
         ",".join(modes), "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "inference.json").read_text())
    measured = {m for m in modes if m not in result["skipped"]}
    assert {"grpc", "grpc-batcher", "grpc-stub"} <= measured  # triton: if its venv exists
    assert {(c["mode"], c["consumers"]) for c in result["cells"]} == {
        (m, n) for m in measured for n in (1, 4)}
    cells = {(c["mode"], c["consumers"]): c for c in result["cells"]}
    assert all(c["req_per_s"] > 0 and c["rows_per_s"] == pytest.approx(32 * c["req_per_s"])
               and c["median_us"] > 0 and c["lag_p99_us"] > 0 for c in cells.values())
    assert cells[("grpc", 4)]["rows_per_forward"] == 32  # one call per request
    assert cells[("grpc-batcher", 4)]["rows_per_forward"] > 32  # the consumers' calls merged
    assert result["server"]["ready_s"] > 0 and result["server"]["stop_s"] > 0
    assert "| cartpole | 4 | grpc |" in proc.stdout
    assert "KServePolicy / bare grpcio stub round trip" in proc.stdout
    assert (tmp_path / "inference.png").stat().st_size > 0
    _assert_server_gone(result["server"]["pid"])


def test_npz_weights_round_trip() -> None:
    weights = {"a": np.arange(3, dtype=np.float32), "b": np.eye(2, dtype=np.float32)}
    with np.load(io.BytesIO(al.pack(weights))) as npz:
        assert set(npz.files) == {"a", "b"}
        np.testing.assert_array_equal(npz["b"], weights["b"])
