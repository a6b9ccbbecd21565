"""make_remote(): start one pool actor per host (or placement-group bundle) and merge them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import ray
from ray.exceptions import RayTaskError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from ._host import PoolHost
from .pool import RemotePool, _Actor

_HostActor: Any = ray.remote(PoolHost)
_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def make_remote(env_id: Any, num_envs: int = 1, batch_size: int | None = None, *,
                num_actors: int = 1, num_cpus: float = 1.0, num_threads: int | None = None,
                seed: int | None = 0, autoreset: str = "next_step", restart: bool = False,
                max_restarts: int = 3, restart_timeout: float = 60.0,
                placement_strategy: str | None = None, resources: dict[str, float] | None = None,
                actor_options: dict[str, Any] | None = None, timeout: float | None = 120.0,
                **make_kwargs: Any) -> RemotePool:
    """Make a pool of ``num_envs`` envs run by ``num_actors`` Ray actors; blocks until they
    are up (``make_remote_async`` awaits instead). Call ``ray.init(...)`` first to join a
    cluster; otherwise Ray starts a local one.

    Args:
        env_id, seed, autoreset, make_kwargs: as ``aiopool.make`` (env kwargs, and pool
            options such as ``max_episode_steps`` or ``backend``), for the whole pool: env
            ``i`` is seeded ``seed + i`` whichever actor holds it.
        num_envs: envs in all; actor ``j`` holds a contiguous range of them, split as evenly
            as possible (``pool.env_ids_of(j)``).
        batch_size: rows per batch, each batch from one actor (default: the smallest
            actor's share). At most half an actor's share keeps two calls in flight per actor,
            so its envs step while the previous batch travels.
        num_actors: actors (one per host, or per placement-group bundle).
        num_cpus: Ray CPUs each actor asks for (bookkeeping: Ray does not confine threads).
        num_threads: each actor's pool threads (default ``max(1, int(num_cpus))``).
        restart: restart a dead actor (Ray ``max_restarts``; never task retries, which
            would replay steps) and start its lost envs over; otherwise ``recv`` raises
            ``ActorDied``.
        max_restarts: restarts per actor with ``restart=True``.
        restart_timeout: seconds an actor may stay unreachable while it restarts before
            ``recv`` raises ``ActorDied`` for it.
        placement_strategy: None (Ray places the actors), or ``"STRICT_SPREAD"`` (one per
            node), ``"SPREAD"``, ``"PACK"``, ``"STRICT_PACK"``: a placement group of one bundle
            per actor, removed at close.
        resources: custom Ray resources per actor (``{"aiopool_host": 1}``).
        actor_options: more ``ActorClass.options(...)`` (``runtime_env``, ``num_gpus``...).
        timeout: seconds to wait for the actors to start (None: no limit).

    Raises:
        ValueError: bad sizes, or what ``aiopool.make`` raised in an actor.
        TimeoutError: the actors did not start in time (too few CPUs in the cluster?).
    """
    actors, pg, refs = _start(env_id, num_envs, batch_size, num_actors, num_cpus, num_threads,
                              seed, autoreset, restart, max_restarts, placement_strategy,
                              resources, actor_options, make_kwargs, timeout)
    try:
        described = ray.get(refs, timeout=timeout)
    except BaseException as e:
        _abort(actors, pg)
        raise _explained(e, num_actors, num_cpus, timeout) from e
    return _finish(actors, described, pg, restart, max_restarts, restart_timeout)


async def make_remote_async(env_id: Any, num_envs: int = 1, batch_size: int | None = None, *,
                            num_actors: int = 1, num_cpus: float = 1.0,
                            num_threads: int | None = None, seed: int | None = 0,
                            autoreset: str = "next_step", restart: bool = False,
                            max_restarts: int = 3, restart_timeout: float = 60.0,
                            placement_strategy: str | None = None,
                            resources: dict[str, float] | None = None,
                            actor_options: dict[str, Any] | None = None,
                            timeout: float | None = 120.0, **make_kwargs: Any) -> RemotePool:
    """``make_remote`` from a coroutine: the loop goes on while the actors start.

    Cancellation: the actors started so far are killed.
    """
    actors, pg, refs = _start(env_id, num_envs, batch_size, num_actors, num_cpus, num_threads,
                              seed, autoreset, restart, max_restarts, placement_strategy,
                              resources, actor_options, make_kwargs, timeout)
    try:
        described = await asyncio.wait_for(asyncio.gather(*refs), timeout)
    except BaseException as e:
        _abort(actors, pg)
        raise _explained(e, num_actors, num_cpus, timeout) from e
    return _finish(actors, list(described), pg, restart, max_restarts, restart_timeout)


def _start(env_id: Any, num_envs: int, batch_size: int | None, num_actors: int,
           num_cpus: float, num_threads: int | None, seed: int | None, autoreset: str,
           restart: bool, max_restarts: int, placement_strategy: str | None,
           resources: dict[str, float] | None, actor_options: dict[str, Any] | None,
           make_kwargs: dict[str, Any], timeout: float | None,
           ) -> tuple[list[_Actor], Any, list[Any]]:
    if num_actors < 1 or num_envs < num_actors:
        raise ValueError(f"num_envs={num_envs} over num_actors={num_actors}: expected "
                         "1 <= num_actors <= num_envs")
    sizes = [num_envs // num_actors + (j < num_envs % num_actors) for j in range(num_actors)]
    batch_size = min(sizes) if batch_size is None else batch_size
    if not 1 <= batch_size <= min(sizes):
        raise ValueError(f"batch_size is {batch_size}, expected 1 <= batch_size <= "
                         f"{min(sizes)} (the smallest actor's share of {num_envs} envs over "
                         f"{num_actors} actors): batches are never merged across actors")
    if max_restarts < 0:
        raise ValueError(f"max_restarts is {max_restarts}, expected >= 0")
    options: dict[str, Any] = {"num_cpus": num_cpus, "max_task_retries": 0,
                               "max_restarts": max_restarts if restart else 0}
    if resources:
        options["resources"] = dict(resources)
    options.update(actor_options or {})
    if options.get("max_task_retries"):
        raise ValueError("max_task_retries must stay 0: Ray would replay env steps on a "
                         "restarted actor (see restart=True)")
    pg = None
    if placement_strategy is not None:
        if placement_strategy not in _STRATEGIES:
            raise ValueError(f"placement_strategy is {placement_strategy!r}, expected None or "
                             f"one of {_STRATEGIES}")
        bundle = {"CPU": num_cpus, **(resources or {})}
        pg = placement_group([bundle] * num_actors, strategy=placement_strategy)
        try:
            ray.get(pg.ready(), timeout=timeout)
        except BaseException as e:
            with contextlib.suppress(Exception):
                remove_placement_group(pg)
            if isinstance(e, TimeoutError | ray.exceptions.GetTimeoutError):
                needs = {"STRICT_SPREAD": f"{num_actors} nodes, one per actor",
                         "STRICT_PACK": "one node with every bundle"}.get(
                             placement_strategy, "the resources, on any nodes")
                raise TimeoutError(
                    f"the placement group of {num_actors} bundles of {bundle} "
                    f"({placement_strategy}) was not ready within {timeout} s: it needs "
                    f"{needs}, free (ray.nodes(), ray.available_resources())") from e
            raise
    threads = max(1, int(num_cpus)) if num_threads is None else num_threads
    actors: list[_Actor] = []
    refs = []
    offset = 0
    for j, size in enumerate(sizes):
        opts = dict(options)
        if pg is not None:
            opts["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=j)
        kw = {"num_threads": threads, "autoreset": autoreset, **make_kwargs}
        handle = _HostActor.options(**opts).remote(
            env_id, size, batch_size, offset, None if seed is None else seed + offset, kw)
        actors.append(_Actor(index=j, handle=handle, offset=offset, size=size, pid=-1))
        refs.append(handle.describe.remote())
        offset += size
    return actors, pg, refs


def _finish(actors: list[_Actor], described: list[dict[str, Any]], pg: Any, restart: bool,
            max_restarts: int, restart_timeout: float) -> RemotePool:
    for a, d in zip(actors, described, strict=True):
        a.pid, a.life = d["pid"], d["incarnation"]
    return RemotePool(actors, described[0], restart=restart, max_restarts=max_restarts,
                      restart_timeout=restart_timeout, placement_group=pg)


def _abort(actors: list[_Actor], pg: Any) -> None:
    for a in actors:
        with contextlib.suppress(Exception):
            ray.kill(a.handle, no_restart=True)
    if pg is not None:
        with contextlib.suppress(Exception):
            remove_placement_group(pg)


def _explained(e: BaseException, num_actors: int, num_cpus: float,
               timeout: float | None) -> BaseException:
    if isinstance(e, RayTaskError) and isinstance(e.cause, Exception):
        return e.cause  # what aiopool.make raised in the actor, unwrapped
    if isinstance(e, TimeoutError | ray.exceptions.GetTimeoutError):
        return TimeoutError(f"{num_actors} pool actors of {num_cpus} CPUs each did not start "
                            f"within {timeout} s: does the cluster have the CPUs (and "
                            "resources) free? (ray.available_resources())")
    return e
