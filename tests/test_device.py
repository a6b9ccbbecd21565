"""--device in the training examples and benchmarks/training.py: ``auto`` is CUDA when torch
sees a GPU and the CPU otherwise, ``cuda`` without a GPU stops at once with a message that says
what to do, and the benchmark hands the device to every run. (What each device computes is
checked in test_ppo_mujoco_atari_examples.py.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import ppo_atari_async as atari
import ppo_continuous_async as mujoco
import torch
import training

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = [pytest.param(atari, id="atari"), pytest.param(mujoco, id="mujoco")]
NO_GPU = r"--device cuda, but .* use --device cpu, or --device auto"


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("example", EXAMPLES)
def test_auto_is_cuda_when_torch_sees_a_gpu_else_the_cpu(
        example: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    for available, auto in ((False, "cpu"), (True, "cuda")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda a=available: a)
        assert example.torch_device("auto") == torch.device(auto)
        assert example.torch_device("cpu") == torch.device("cpu")
    assert example.torch_device("cuda") == torch.device("cuda")  # a GPU (said to be) there


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("strict", [False, True], ids=["overlapped", "strict"])
@pytest.mark.parametrize("example", EXAMPLES)
def test_cuda_without_a_gpu_fails_before_anything_starts(example: ModuleType,
                                                        strict: bool) -> None:
    with pytest.raises(RuntimeError, match=NO_GPU):
        asyncio.run(example.main(example.Args(device="cuda", strict=strict)))
    with pytest.raises(ValueError, match="device is 'gpu', expected one of auto, cpu, cuda"):
        asyncio.run(example.main(example.Args(device="gpu", strict=strict)))


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("example", EXAMPLES)
def test_command_line_refuses_cuda_without_a_gpu(example: ModuleType,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert example.parse_args(["--device", "cpu"]).device == "cpu"
    assert example.parse_args([]).device == "auto"
    with pytest.raises(SystemExit) as exited:
        example.parse_args(["--device", "cuda"])
    assert exited.value.code == 2
    assert "--device cuda, but" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        example.parse_args(["--device", "gpu"])
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_atari_learner_placement_is_checked() -> None:
    assert atari.parse_args(["--learner", "thread"]).learner == "thread"
    with pytest.raises(ValueError, match="learner is 'gpu', expected one of auto, process"):
        asyncio.run(atari.main(atari.Args(learner="gpu", device="cpu")))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without a GPU")
def test_example_script_without_a_gpu_says_what_to_do() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "ppo_continuous_async.py"),
                           "--device", "cuda"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--device cuda, but" in proc.stderr and "use --device cpu" in proc.stderr


@pytest.mark.usefixtures("no_gpu")
def test_benchmark_refuses_cuda_without_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert training.parse_args(["--device", "auto"]).device == "cpu"  # resolved for the runs
    with pytest.raises(SystemExit):
        training.parse_args(["--device", "cuda"])
    assert "--device cuda, but" in capsys.readouterr().err
    # CleanRL's loops, called directly, refuse it too (before making any env)
    args = mujoco.Args(env_id="Hopper-v5", device="cuda")
    with pytest.raises(RuntimeError, match=NO_GPU):
        training.cleanrl_continuous(args)
    with pytest.raises(RuntimeError, match=NO_GPU):
        training.cleanrl_atari(atari.Args(device="cuda"), envs=object())


def test_benchmark_hands_the_device_to_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for env_id in ("Hopper-v5", "Breakout-v5"):
        assert training.example_args(env_id, 1, 4096, "cpu").device == "cpu"
    commands = []

    def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        commands.append(cmd)
        result = {"sps": 1.0, "episodes": [], "device": "cpu"}
        return subprocess.CompletedProcess(cmd, 0, json.dumps(result) + "\n", "")

    monkeypatch.setattr(subprocess, "run", run)
    run_ = training.measure("cleanrl", "Hopper-v5", 1, 4096, 60, device="cpu")
    cmd = commands[0]
    assert cmd[cmd.index("--device") + 1] == "cpu"
    assert run_["device"] == "cpu"
    training.measure("aiopool-overlapped", "Breakout-v5", 1, 4096, 60, device="cuda",
                     num_envs=32, num_threads=16, cuda_graph=False)
    cmd = commands[1]
    assert cmd[cmd.index("--device") + 1] == "cuda" and "--no-cuda-graph" in cmd
    assert cmd[cmd.index("--num-envs") + 1] == "32" and cmd[cmd.index("--num-threads") + 1] == "16"
