"""Writes docs/images/frames/<id>.png: one frame of an env of each rendering family, after a
few random steps, as ``pool.render()`` gives it (gymnasium's frame of that state).

    python docs/frames.py [id ...]   # every id below, or those named
"""

from __future__ import annotations

import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np

import aiopool

IDS = {"CartPole-v1": {}, "Acrobot-v1": {}, "FrozenLake8x8-v1": {}, "Taxi-v4": {},
       "HalfCheetah-v5": {"width": 320, "height": 240}, "Ant-v5": {"width": 320, "height": 240},
       "Pong-v5": {}, "Breakout-v5": {}, "LunarLander-v3": {}, "BipedalWalkerHardcore-v3": {},
       "CarRacing-v3": {},
       "dmc/cheetah-run": {"camera_id": "side"}, "dmc/manipulator-bring_ball": {}}


def main() -> None:
    out = Path(__file__).resolve().parent / "images" / "frames"
    out.mkdir(parents=True, exist_ok=True)
    named = sys.argv[1:] or list(IDS)
    for env_id, kwargs in IDS.items():
        if env_id not in named:
            continue
        with aiopool.make(env_id, num_envs=1, seed=1, render_mode="rgb_array", **kwargs) as pool:
            space = pool.single_action_space
            space.seed(1)
            pool.async_reset()
            pool.recv_blocking()
            for _ in range(40):
                pool.send(np.stack([space.sample()]))
                pool.recv_blocking()
            path = out / f"{env_id}.png"
            path.parent.mkdir(exist_ok=True)  # dmc/
            iio.imwrite(path, pool.render()[0])
            print(path)


if __name__ == "__main__":
    main()
