"""Videos of agents: gymnasium's RecordVideo over aiopool's gymnasium adapter writes an mp4 of
a policy on HalfCheetah (a gait of sine waves) and on Pong (random play), headless.

    pip install -e ".[render]"
    python examples/record_video.py          # videos/: 200 frames of each, HalfCheetah at 480x480
    python examples/record_video.py --steps 100 --width 240 --height 240
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.wrappers.vector import RecordVideo

from aiopool.adapters.gymnasium import make_gymnasium


@dataclass
class Args:
    out: str = "videos"
    num_envs: int = 2
    steps: int = 200
    width: int = 480
    height: int = 480
    seed: int = 0


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


def gait(t: int, num_envs: int) -> Any:
    """HalfCheetah's six joints driven by sine waves in two phases: a trot of sorts."""
    phase = np.array([0.0, 1.0, 2.0, np.pi, np.pi + 1.0, np.pi + 2.0])
    return np.tile(np.sin(0.5 * t + phase), (num_envs, 1)).astype(np.float32)


def record(env_id: str, args: Args, policy: Any, **render_kwargs: Any) -> Path:
    """Record the first env's frames (``record_first_only``) for ``args.steps`` steps."""
    folder = Path(args.out) / env_id
    envs = RecordVideo(make_gymnasium(env_id, num_envs=args.num_envs, render_mode="rgb_array",
                                      **render_kwargs),
                       str(folder), step_trigger=lambda t: t == 0, video_length=args.steps,
                       record_first_only=True, name_prefix=env_id)
    envs.reset(seed=args.seed)
    for t in range(args.steps):
        envs.step(policy(t, envs))
    envs.close()
    (video,) = sorted(folder.glob("*.mp4"))
    return video


def main(args: Args) -> dict[str, Path]:
    videos = {}
    for env_id, policy, kwargs in [
        ("HalfCheetah-v5", lambda t, e: gait(t, args.num_envs),
         {"width": args.width, "height": args.height}),
        ("Pong-v5", lambda t, e: e.action_space.sample(), {}),
    ]:
        start = time.perf_counter()
        videos[env_id] = record(env_id, args, policy, **kwargs)
        print(f"{env_id}: {videos[env_id]} ({args.steps} frames in "
              f"{time.perf_counter() - start:.1f} s)")
    return videos


if __name__ == "__main__":
    main(parse_args())
