"""A real MLServer for tests and benchmarks, and a small numpy policy to serve with it.

::

    from aiopool.inference.testing import mlserver_process, policy_model_settings

    models = {"cartpole": policy_model_settings(
        "aiopool.inference.testing:numpy_mlp_policy", kwargs={"in_dim": 4})}
    with mlserver_process(models) as server:          # ready when this returns
        policy = KServePolicy(server.grpc_target, "cartpole")

``mlserver_process`` runs ``mlserver start`` as a child process on 127.0.0.1 with free ports
and the settings that suit a test (``parallel_workers: 0``: one process, and no clash with
uvloop >= 0.22; metrics and gzip off). It never imports mlserver into the calling process
(mlserver's protos clash with tritonclient's), and it leaves no process behind: on exit it
sends SIGTERM to the server's process group, then SIGKILL after ``stop_timeout`` seconds, and
checks that the group is gone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MLServerProcess", "NumpyMLP", "mlserver_process", "numpy_mlp_policy",
           "policy_model_settings"]

RUNTIME = "aiopool.inference.mlserver_runtime.PolicyRuntime"

# settings.json for tests: loopback only, one process (parallel workers break under uvloop
# >= 0.22 and double the latency on small machines), no metrics port, no gzip.
DEFAULT_SETTINGS: dict[str, Any] = {
    "host": "127.0.0.1", "parallel_workers": 0, "metrics_endpoint": None,
    "gzip_enabled": False, "debug": False, "grpc_max_message_length": 64 << 20,
}

_MAIN = "import sys; from mlserver.cli import main; sys.exit(main())"


def policy_model_settings(factory: str, *, kwargs: Mapping[str, Any] | None = None,
                          output_name: str | None = None, accept_weights: bool | None = None,
                          raw_fast_path: bool | None = None, weights_version: int | None = None,
                          **settings: Any) -> dict[str, Any]:
    """The model-settings.json (less its name) of a model served by ``PolicyRuntime``.

    ``factory`` is ``"package.module:function"``; ``settings`` adds top-level keys such as
    ``max_batch_size`` or ``parameters`` (whose ``extra`` is merged with ours).
    """
    extra: dict[str, Any] = {"factory": factory, "kwargs": dict(kwargs or {})}
    for key, value in (("output_name", output_name), ("accept_weights", accept_weights),
                       ("raw_fast_path", raw_fast_path), ("weights_version", weights_version)):
        if value is not None:
            extra[key] = value
    parameters = dict(settings.pop("parameters", {}))
    parameters["extra"] = {**parameters.get("extra", {}), **extra}
    return {"implementation": RUNTIME, **settings, "parameters": parameters}


class MLServerProcess:
    """A running ``mlserver start`` (from ``mlserver_process``): addresses, log and control.

    ``kill()`` then ``start()`` restarts it on the same ports (to test clients through a
    crash); ``stop()`` shuts it down cleanly.
    """

    def __init__(self, repository: Path, models: Sequence[str], http_port: int, grpc_port: int,
                 *, python: str, env: Mapping[str, str], stop_timeout: float) -> None:
        self.repository = repository
        self.models = list(models)
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.log_path = repository / "mlserver.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._python = python
        self._env = dict(env)
        self._stop_timeout = stop_timeout

    @property
    def grpc_target(self) -> str:
        """``"127.0.0.1:<grpc_port>"``, for ``KServePolicy``."""
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        """``"http://127.0.0.1:<http_port>"`` (the V2 REST API)."""
        return f"http://127.0.0.1:{self.http_port}"

    def log(self) -> str:
        """Everything the server printed, across restarts."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, ready_timeout: float = 60.0) -> None:
        """Start the server (again, on the same ports) and wait until every model is ready.

        Raises:
            RuntimeError: the server exited, or a model failed to load; the message holds the
                server's log.
            TimeoutError: not ready within ``ready_timeout`` seconds (the server is stopped).
        """
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError(f"the MLServer on {self.grpc_target} is already running")
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== aiopool: mlserver start {self.repository}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [self._python, "-c", _MAIN, "start", str(self.repository)],
                cwd=self.repository, env=self._env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise

    def kill(self) -> None:
        """SIGKILL the server's process group, as a crash would, and reap it."""
        self._signal_group(signal.SIGKILL)
        self._reap(5.0)

    def stop(self) -> None:
        """SIGTERM the process group; SIGKILL it if it has not exited after ``stop_timeout``
        seconds. Raises RuntimeError if a process of the group still runs after that."""
        if self.process is None:
            return
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(self._stop_timeout)
        self._signal_group(signal.SIGKILL)  # stragglers of the group, or a hung server
        self._reap(5.0)

    def pids(self) -> list[int]:
        """The processes still in the server's process group (empty once stopped)."""
        if self.process is None:
            return []
        return _group_members(self.process.pid)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def _reap(self, timeout: float) -> None:
        assert self.process is not None
        self.process.wait(timeout)
        deadline = time.monotonic() + timeout
        while (left := self.pids()) and time.monotonic() < deadline:
            time.sleep(0.02)
        if left:
            raise RuntimeError(f"processes {left} of the MLServer on {self.grpc_target} "
                               f"survived SIGKILL")

    def _wait_ready(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        pending = list(self.models)
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"mlserver exited with code {code} before its models were "
                                   f"ready; its log:\n{self._log_tail()}")
            log = self.log()
            for name in pending:
                if f"Couldn't load model '{name}'" in log:
                    raise RuntimeError(f"MLServer could not load model {name!r}; its log:\n"
                                       f"{self._log_tail()}")
            pending = [name for name in pending if not self._model_ready(name)]
            if not pending and _port_open(self.grpc_port):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"MLServer on {self.grpc_target} not ready after {timeout:g} s "
                    f"(models not ready: {pending}); its log:\n{self._log_tail()}")
            time.sleep(0.05)

    def _model_ready(self, name: str) -> bool:
        url = f"{self.http_url}/v2/models/{name}/ready"
        try:
            with urllib.request.urlopen(url, timeout=1.0) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self, chars: int = 20_000) -> str:
        return self.log()[-chars:]


@contextlib.contextmanager
def mlserver_process(models: Mapping[str, Mapping[str, Any]], *, ready_timeout: float = 60.0,
                     settings: Mapping[str, Any] | None = None,
                     directory: str | os.PathLike[str] | None = None,
                     python: str | None = None, env: Mapping[str, str] | None = None,
                     pythonpath: Sequence[str | os.PathLike[str]] = (),
                     blas_threads: int | None = 1,
                     stop_timeout: float = 10.0) -> Iterator[MLServerProcess]:
    """Run ``mlserver start`` on loopback with free ports, ready on entry, gone on exit.

    Args:
        models: model name -> its model-settings.json content (``policy_model_settings``
            builds one for ``PolicyRuntime``); the name is filled in.
        ready_timeout: seconds to wait for every model to be ready.
        settings: settings.json entries that override ``DEFAULT_SETTINGS``.
        directory: where to write the model repository and the log (default: a temporary
            directory, removed on exit).
        python: the interpreter that runs mlserver (default: this one); it needs mlserver and
            aiopool (for ``PolicyRuntime``).
        env: environment of the server (default: this process's, without ``MLSERVER_*``
            variables, which would override the settings); ``pythonpath`` is prepended to
            its ``PYTHONPATH`` (for factories outside installed packages).
        blas_threads: threads of the server's BLAS and OpenMP pools
            (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, where ``env``
            does not set them); None leaves them alone. One by default: on a 2-core machine
            a multi-threaded OpenBLAS, spinning next to the server's event loop and its
            clients, stalled an Atari-sized forward from ~5 ms to ~700 ms for seconds at a
            time.
        stop_timeout: seconds between SIGTERM and SIGKILL at exit.

    Raises:
        RuntimeError: mlserver is not installed for ``python``, exited, or failed to load a
            model (with the server's log); TimeoutError: not ready in time.
    """
    python = python or sys.executable
    if python == sys.executable and importlib.util.find_spec("mlserver") is None:
        raise RuntimeError("mlserver is not installed in this environment; "
                           "pip install mlserver==1.7.1 (aiopool's mlserver extra)")
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="aiopool-mls-"))
        repository = Path(directory)
        repository.mkdir(parents=True, exist_ok=True)
        http_port, grpc_port = _free_ports(2)
        config = {**DEFAULT_SETTINGS, **(settings or {}),
                  "http_port": http_port, "grpc_port": grpc_port}
        (repository / "settings.json").write_text(json.dumps(config, indent=1))
        for name, model in models.items():
            folder = repository / name
            folder.mkdir(exist_ok=True)
            (folder / "model-settings.json").write_text(
                json.dumps({**model, "name": name}, indent=1))
        child_env = {k: v for k, v in (os.environ if env is None else env).items()
                     if not k.startswith("MLSERVER_")}
        if blas_threads is not None:
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                child_env.setdefault(var, str(blas_threads))
        paths = [os.fspath(p) for p in pythonpath]
        if child_env.get("PYTHONPATH"):
            paths.append(child_env["PYTHONPATH"])
        if paths:
            child_env["PYTHONPATH"] = os.pathsep.join(paths)
        server = MLServerProcess(repository, list(models), http_port, grpc_port,
                                 python=python, env=child_env, stop_timeout=stop_timeout)
        try:
            server.start(ready_timeout)
            yield server
        finally:
            server.stop()


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid`` (read from /proc)."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) "
        if fields[0] != b"Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


class NumpyMLP:
    """A tiny numpy policy for tests: ``argmax(relu(x @ w1) @ w2)`` with ``x = obs * scale``
    flattened to float32; int64 actions ``[B]``. ``delay_s`` sleeps in each call (a slow
    model)."""

    def __init__(self, w1: np.ndarray[Any, Any], w2: np.ndarray[Any, Any], *,
                 scale: float = 1.0, delay_s: float = 0.0) -> None:
        self.w1 = np.ascontiguousarray(w1, dtype=np.float32)
        self.w2 = np.ascontiguousarray(w2, dtype=np.float32)
        self.scale = np.float32(scale)
        self.delay_s = delay_s

    def __call__(self, obs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        if self.delay_s:
            time.sleep(self.delay_s)
        x = np.asarray(obs).reshape(len(obs), -1).astype(np.float32) * self.scale
        if x.shape[1] != self.w1.shape[0]:
            raise ValueError(f"obs has {x.shape[1]} features per row, expected "
                             f"{self.w1.shape[0]}")
        actions: np.ndarray[Any, Any] = np.argmax(np.maximum(x @ self.w1, 0) @ self.w2, axis=1)
        return actions.astype(np.int64)

    def to_bytes(self) -> bytes:
        """The weights as ``.npz`` bytes, for ``KServePolicy.publish_weights``."""
        buf = io.BytesIO()
        np.savez(buf, w1=self.w1, w2=self.w2)
        return buf.getvalue()


def numpy_mlp_policy(in_dim: int, *, hidden: int = 64, n_actions: int = 2, seed: int = 0,
                     scale: float = 1.0, delay_s: float = 0.0,
                     weights: bytes | None = None) -> NumpyMLP:
    """A ``NumpyMLP`` with weights drawn from ``seed``, or read from ``weights`` (``.npz``
    bytes from ``NumpyMLP.to_bytes``): a factory for ``PolicyRuntime``."""
    if weights is not None:
        with np.load(io.BytesIO(weights)) as npz:
            w1, w2 = npz["w1"], npz["w2"]
        if w1.shape[0] != in_dim:
            raise ValueError(f"published w1 has shape {w1.shape}, expected ({in_dim}, hidden)")
    else:
        rng = np.random.default_rng(seed)
        w1 = rng.standard_normal((in_dim, hidden)) / math.sqrt(in_dim)
        w2 = rng.standard_normal((hidden, n_actions)) / math.sqrt(hidden)
    return NumpyMLP(w1, w2, scale=scale, delay_s=delay_s)
