"""benchmarks/throughput.py runs end to end on a tiny budget and reports positive rates.

Speed itself is never asserted here (DESIGN.md §6): this only checks that the benchmark works.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # benchmarks: the exhaustive tier
def test_throughput_quick_run_writes_json_and_plot(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--quick",
         "--env", "Counting-v0", "--no-peers", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]

    result = json.loads((tmp_path / "throughput.json").read_text())
    runners = {s["runner"] for s in result["summary"]}
    assert {"aiopool stream (asyncio)", "aiopool recv+send (asyncio)",
            "aiopool step (asyncio, B=M)", "aiopool recv_blocking+send"} <= runners
    if shutil.which("g++"):
        assert "C++ 1 thread" in runners, result["skipped"]
    assert all(s["median"] > 0 and s["min"] > 0 for s in result["summary"])
    assert all(m["steps"] > 0 for m in result["measurements"])
    assert (tmp_path / "throughput.png").stat().st_size > 0
    assert "| aiopool stream (asyncio) |" in proc.stdout


@pytest.mark.slow  # benchmarks: the exhaustive tier
def test_inference_quick_run_writes_json_and_plot(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs torch (the benchmark's policy is a torch MLP): "
                                        "pip install -e '.[test]'")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "inference.py"), "--quick",
         "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "inference.json").read_text())
    modes = {(c["mode"], c["consumers"]) for c in result["cells"]}
    assert modes == {(m, n) for m in ("direct", "executor", "batcher") for n in (1, 4)}
    assert all(c["req_per_s"] > 0 and c["median_us"] > 0 for c in result["cells"])
    batched = [c for c in result["cells"] if c["mode"] == "batcher" and c["consumers"] == 4]
    assert batched[0]["rows_per_forward"] > 32  # the four consumers were coalesced
    assert (tmp_path / "inference.png").stat().st_size > 0


@pytest.mark.slow  # benchmarks: the exhaustive tier
def test_actor_forward_times_each_way_of_acting() -> None:
    torch = pytest.importorskip("torch", reason="needs torch (the actor is the example's CNN): "
                                                "pip install -e '.[test]'")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "actor_forward.py"), "--rows", "1,2"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines()
            if line.startswith("| cpu") or line.startswith("| cuda")]
    ways = [r[0].strip() for r in rows]
    assert ways[0] == "cpu, 1 thread" and ways[1].startswith("cpu, ")
    assert ("cuda, graph" in ways) == torch.cuda.is_available()
    assert all(float(ms) > 0 for r in rows for ms in r[1:]) and all(len(r) == 3 for r in rows)


def test_control_suite_limit_takes_the_physics_of_the_tasks_reset(tmp_path: Path) -> None:
    """The Control Suite's limit program resets an env as dm_control's task does to the
    simulator: cheetah's reset lets the model settle for 200 physics steps (counted in
    dm_control's own reset), walker's takes none; the program reports and takes them."""
    pytest.importorskip("dm_control", reason="pip install -e '.[test]'")
    if not shutil.which("g++"):
        pytest.skip("needs g++ (the limit program is compiled)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import throughput
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert throughput.dmc_reset_steps("dmc/cheetah-run", resets=2) == 200
    assert throughput.dmc_reset_steps("dmc/walker-walk", resets=2) == 0
    limit, why = throughput.build_dmc_limit("dmc/cheetah-run", tmp_path)
    assert limit is not None, why
    model, sub_steps, _, reset_steps = limit.overrides
    assert reset_steps == "200"

    def run(steps: str) -> dict[str, float]:
        # 2 envs, 120 rounds, episodes of 50 steps: each env is reset twice.
        out = subprocess.run([str(limit.binary), "dmc/cheetah-run", "2", "rounds=120", model,
                              sub_steps, "50", steps], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    settled, again, unsettled = run(reset_steps), run(reset_steps), run("0")
    assert (settled["steps"], settled["episodes"], settled["reset_steps"]) == (240, 4, 200)
    assert unsettled["reset_steps"] == 0
    assert settled["checksum"] == again["checksum"] != unsettled["checksum"]


@pytest.mark.slow  # benchmarks: the exhaustive tier
def test_xla_quick_run_writes_json(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "xla.py"), "--quick", "--envs",
         "CartPole-v1", "--threads", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((tmp_path / "xla.json").read_text())["rows"]
    assert [(r["env"], r["threads"]) for r in rows] == [("CartPole-v1", 1)]
    assert rows[0]["aiopool xla()"] > 0 and rows[0]["aiopool recv_blocking loop"] > 0
    assert "| CartPole-v1 | 64 | 1 |" in proc.stdout


@pytest.mark.slow  # benchmarks: the exhaustive tier
def test_procgen_quick_run_writes_json(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "procgen.py"), "--games", "starpilot",
         "--threads", "1", "--repeats", "1", "--seconds", "0.2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "procgen.json").read_text())
    (row,) = result["rows"]
    assert {"aiopool stream", "gym3 ProcgenGym3Env"} <= row["median"].keys()
    assert all(rate > 0 for rate in row["median"].values())
    assert all(us > 0 for us in row["cpu_us_per_step"].values())
    assert "| starpilot | 1 |" in proc.stdout
