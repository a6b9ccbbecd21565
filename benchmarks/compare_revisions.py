"""The per-batch path of the working tree against another revision, interleaved.

    python benchmarks/compare_revisions.py b709083                 # 3 pairs of 3 s each
    python benchmarks/compare_revisions.py HEAD~1 --pairs 5 --seconds 5 --only cartpole

Builds REV once (``git archive`` into ``build/compare/<sha>/src``, installed with its
dependencies into the venv ``build/compare/<sha>/venv``; both kept for the next run), then runs
each workload in the working tree's interpreter and in REV's, alternating which goes first,
``--pairs`` times, and prints each side's env-steps/s, the medians and their ratio (tree / REV;
above 1: the tree is faster), and the ratio of the best chunks of 200 batches of all runs
(which other load on the machine moves much less than the medians). Every run is a fresh
process: a pool consumed by ``stream()`` on asyncio with ``batch.send`` of actions drawn ahead
of time, so the Python per-batch work (the receive, the holders' bookkeeping, the send's
checks) is what differs between revisions.

Workloads: ``cartpole`` (examples/demo.py's: CartPole-v1, 64 envs, batches of 32, one
thread: a few µs of C++ per batch), ``mujoco`` (HalfCheetah-v5, 16 envs, batches of 8, 2
threads), ``atari`` (Pong-v5, 8 envs, batches of 4, 2 threads). Run it on an idle machine:
docs/development.md asks for it before a change to the batch path lands.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = {
    "cartpole": ("CartPole-v1", 64, 32, 1),
    "mujoco": ("HalfCheetah-v5", 16, 8, 2),
    "atari": ("Pong-v5", 8, 4, 2),
}
# One run: env-steps/s of a stream() consumer over `seconds` (after 0.3 s of warm-up), and the
# best rate of its chunks of 200 batches (what the run reaches while nothing else runs).
RUN = """
import asyncio, json, sys, time
import numpy as np
import aiopool

env_id, num_envs, batch_size, threads, seconds = json.loads(sys.argv[1])

async def main():
    async with aiopool.make(env_id, num_envs=num_envs, batch_size=batch_size,
                            num_threads=threads, seed=0) as pool:
        space = pool.single_action_space
        space.seed(0)
        actions = [np.stack([space.sample() for _ in range(batch_size)]) for _ in range(64)]
        steps, start, warm, best, chunk = 0, time.perf_counter(), None, 0.0, None
        async for batch in pool.stream():
            batch.send(actions[steps % 64])
            steps += 1
            now = time.perf_counter()
            if warm is None:
                if now - start >= 0.3:
                    warm = chunk = now
                    steps = 0
                continue
            if steps % 200 == 0:
                best, chunk = max(best, 200 * batch_size / (now - chunk)), now
            if now - warm >= seconds:
                return [steps * batch_size / (now - warm), best]

print(json.dumps(asyncio.run(main())))
"""


def build(rev: str) -> Path:
    """REV's interpreter, built once into build/compare/<sha>/venv."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.strip()
    home = ROOT / "build" / "compare" / sha[:12]
    python = home / "venv" / "bin" / "python"
    if (home / "ready").exists():
        return python
    src = home / "src"
    src.mkdir(parents=True, exist_ok=True)
    print(f"building {rev} ({sha[:12]}) into {home} (a few minutes, once)", flush=True)
    archive = subprocess.run(["git", "archive", sha], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    venv.create(home / "venv", with_pip=True, clear=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(src)], check=True)
    (home / "ready").touch()
    return python


def run(python: str, workload: str, seconds: float) -> list[float]:
    env_id, num_envs, batch_size, threads = WORKLOADS[workload]
    out = subprocess.run([python, "-c", RUN, json.dumps([env_id, num_envs, batch_size, threads,
                                                         seconds])],
                         cwd="/", capture_output=True, text=True, timeout=120 + seconds)
    if out.returncode != 0:
        sys.exit(f"{workload} failed in {python}:\n{out.stderr[-2000:]}")
    rate, best = json.loads(out.stdout.strip().splitlines()[-1])
    return [float(rate), float(best)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rev", help="the revision to compare the working tree with (a sha, a tag)")
    p.add_argument("--pairs", type=int, default=3, help="interleaved pairs of runs (3)")
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per run (3)")
    p.add_argument("--only", default=",".join(WORKLOADS),
                   help=f"workloads, comma-separated ({', '.join(WORKLOADS)})")
    p.add_argument("--json", type=Path, help="write the runs and ratios here")
    args = p.parse_args()
    workloads = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        p.error(f"unknown workloads {unknown}: expected some of {', '.join(WORKLOADS)}")
    sides = {"tree": sys.executable, args.rev: str(build(args.rev))}
    results: dict[str, dict[str, list[list[float]]]] = {w: {s: [] for s in sides}
                                                        for w in workloads}
    for pair in range(args.pairs):
        for workload in workloads:
            order = list(sides) if pair % 2 == 0 else list(reversed(sides))
            for side in order:
                results[workload][side].append(run(sides[side], workload, args.seconds))
            print(f"pair {pair + 1}/{args.pairs} {workload:>9}: " + ", ".join(
                f"{s} {results[workload][s][-1][0] / 1e6:.3f}" for s in sides)
                + " M env-steps/s", flush=True)
    # The runs' medians, and the best chunk of all runs: on a machine with other load, the
    # medians move with it and the best chunks much less.
    print(f"\n{'workload':>9}  {'tree (M/s)':>22}  {args.rev + ' (M/s)':>22}  tree/rev"
          "  best chunks: tree/rev")
    summary = {}
    for workload, runs in results.items():
        tree, other = (statistics.median(r[0] for r in runs[s]) for s in sides)
        best_tree, best_other = (max(r[1] for r in runs[s]) for s in sides)
        summary[workload] = {"median": tree / other, "best_chunk": best_tree / best_other}
        cells = [" ".join(f"{r[0] / 1e6:.2f}" for r in runs[s]) for s in sides]
        print(f"{workload:>9}  {cells[0]:>22}  {cells[1]:>22}  {tree / other:8.3f}"
              f"  {best_tree / best_other:21.3f}")
    if args.json:
        args.json.write_text(json.dumps({"rev": args.rev, "runs": results, "ratio": summary},
                                        indent=1))


if __name__ == "__main__":
    main()
