"""A Policy served over the Open Inference Protocol (KServe V2) gRPC API.

``KServePolicy`` sends each batch of observations to a V2 server (MLServer, Triton, KServe,
aiopool's own ``PolicyRuntime``) as one ``ModelInfer`` call and returns the actions::

    async with KServePolicy("127.0.0.1:8081", "pong") as policy:
        await policy.wait_ready(30)
        async for batch in pool.stream():
            batch.send(await policy(batch.obs))

It depends on ``grpcio`` and ``protobuf`` only (``pip install grpcio protobuf``: aiopool's
``kserve`` extra); its messages live in a private descriptor pool (``_v2_proto``), so it loads
next to ``mlserver`` or ``tritonclient`` in one process.

Wire forms:

* default: the tensor as ``raw_input_contents`` (little-endian bytes). Every V2 server reads it.
* ``packed=True``: one ``BYTES`` element holding the same bytes, with the shape and datatype as
  input parameters. Only aiopool's ``PolicyRuntime`` reads it. It is MLServer's fast path for
  large observations when the runtime's raw-bytes hook is off (see ``mlserver_runtime``).

Faults: every failed call raises ``InferenceServerError`` naming the server address, the model
and the gRPC status, with a hint on what to do. A call that finds the server down fails at once
(``UNAVAILABLE``); the next call opens a fresh connection, so the policy works again as soon as
the server is back (there is no reconnect backoff to wait out). ``timeout=`` bounds each call
against a server that hangs.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .._deps import install_hint

try:
    import grpc  # type: ignore[import-untyped]

    from . import _v2_proto as v2
except ModuleNotFoundError as e:
    if (e.name or "").partition(".")[0] not in ("grpc", "google"):  # another module's
        raise
    raise ImportError(install_hint("aiopool.inference.kserve", "kserve", "grpcio>=1.67",
                                   "protobuf>=5.27")) from e

__all__ = ["InferenceServerError", "InferenceServerTimeout", "KServePolicy"]

_V2_DATATYPES: Final[dict[np.dtype[Any], str]] = {
    np.dtype(name): datatype for datatype, name in v2.NUMPY_DTYPES.items()}
# datatype -> (native dtype, little-endian dtype), for decoding answers
_NUMPY_DTYPES: Final[dict[str, tuple[np.dtype[Any], np.dtype[Any]]]] = {
    datatype: (np.dtype(name), np.dtype(name).newbyteorder("<"))
    for datatype, name in v2.NUMPY_DTYPES.items()}

_HINTS: Final[dict[str, str]] = {
    "UNAVAILABLE": "the server is down, restarting or not listening there; check that it runs "
                   "and serves gRPC on {target}. The next call reconnects; "
                   "`await policy.wait_ready(timeout)` waits until the model is back",
    "DEADLINE_EXCEEDED": "no answer within timeout={timeout} s; raise timeout= or check the "
                         "server's load",
    "NOT_FOUND": "the server does not serve this model or version; check the name in its "
                 "model-settings.json (or config.pbtxt) and version=",
    "RESOURCE_EXHAUSTED": "the message is larger than a gRPC limit; raise max_message_bytes= "
                          "here and the server's limit (MLServer: grpc_max_message_length in "
                          "settings.json)",
    "UNIMPLEMENTED": "the server does not implement this call",
    "INVALID_ARGUMENT": "the server refused the request; see its message above",
    "FAILED_PRECONDITION": "the server refused the request; see its message above",
    "INTERNAL": "the model raised on the server; see the server's log",
    "UNKNOWN": "the model or server raised; see the server's log",
    "CANCELLED": "the call was cancelled (the channel closed, or the server went away)",
}


def _serialize(request: Any) -> bytes:
    """Requests are messages, or ModelInfer requests already encoded (the hot path)."""
    return request if isinstance(request, bytes) else bytes(request.SerializeToString())


class InferenceServerError(RuntimeError):
    """A V2 call failed: the server refused it, is down, restarted, or did not answer in time.

    Attributes:
        target: the server address (``host:port``).
        model: the model name; ``version`` its version ("" for the server's default).
        method: the V2 call (``ModelInfer``, ``ModelReady``, ...).
        code: the gRPC status name (``"UNAVAILABLE"``, ``"DEADLINE_EXCEEDED"``, ...), or
            ``"NOT_READY"`` when ``wait_ready`` gave up.
        details: the server's (or gRPC's) message.
    """

    def __init__(self, *, target: str, model: str, version: str, method: str, code: str,
                 details: str, hint: str | None = None, timeout: float | None = None) -> None:
        self.target, self.model, self.version = target, model, version
        self.method, self.code, self.details = method, code, details
        if hint is None:
            hint = _HINTS.get(code, "see the server's log").format(
                target=target, timeout="None" if timeout is None else f"{timeout:g}")
        super().__init__(
            f"{method} to the V2 inference server at {target} for model {model!r}"
            f"{f' version {version!r}' if version else ''} failed with {code}: {details} "
            f"-- {hint}")


class InferenceServerTimeout(InferenceServerError, TimeoutError):
    """A V2 call ran past its timeout (``DEADLINE_EXCEEDED``), or ``wait_ready`` gave up."""


class KServePolicy:
    """``await policy(obs) -> actions`` through a KServe V2 gRPC server.

    Args:
        target: the server's gRPC address, ``"host:port"``.
        model: the model name; ``version``: its version ("" = the server's default).
        input_name: the name of the observation input.
        output_name: the output that holds the actions; None takes the only output (an error
            if the server returns several).
        action_shape: the shape of one action. None keeps the server's shape except that
            ``[B, 1]`` becomes ``[B]`` (MLServer's codecs return 1-D outputs as ``[B, 1]``);
            pass ``pool.single_action_space.shape`` to reshape exactly (needed for actions of
            shape ``(1,)``).
        timeout: seconds each call may take (None: as long as the server holds it open; a
            server that went away still fails at once).
        packed: send the observations as one BYTES element (aiopool's ``PolicyRuntime`` only).
        max_message_bytes: the gRPC send/receive limit of this client (default 64 MiB).
        metadata: gRPC metadata sent with every call (e.g. an authorization header).
        channel_options: extra ``grpc.aio.insecure_channel`` options (they override ours).

    One policy may be awaited by many coroutines at once: their calls share one HTTP/2
    connection. It belongs to the event loop that first used it.
    """

    def __init__(self, target: str, model: str, *, version: str = "", input_name: str = "obs",
                 output_name: str | None = None, action_shape: Sequence[int] | None = None,
                 timeout: float | None = None, packed: bool = False,
                 max_message_bytes: int = 64 << 20,
                 metadata: Sequence[tuple[str, str]] = (),
                 channel_options: Sequence[tuple[str, Any]] = ()) -> None:
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds or None, "
                             f"got {timeout!r}")
        self.target = target
        self.model = model
        self.version = version
        self.input_name = input_name
        self.output_name = output_name
        self.action_shape = None if action_shape is None else tuple(int(d) for d in action_shape)
        self.timeout = timeout
        self.packed = packed
        self.weights_version: int | None = None
        """The weights version the server reported with its last answer (aiopool's runtime
        reports one; other servers do not: then None)."""
        self._metadata = tuple(metadata)
        self._options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            # A channel of our own: a fresh channel must not inherit a shared subchannel that
            # is waiting out a reconnect backoff.
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
            *channel_options,
        ]
        self._channel: Any = None
        self._stubs: dict[str, Any] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generation = 0
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def __repr__(self) -> str:
        version = f", version={self.version!r}" if self.version else ""
        return f"KServePolicy({self.target!r}, {self.model!r}{version}, packed={self.packed})"

    async def __call__(self, obs: npt.ArrayLike, /) -> np.ndarray[Any, Any]:
        """The actions for ``obs`` (shape ``[B, *obs_shape]``): ``[B, *action_shape]``.

        ``obs`` is copied into the request before this coroutine first yields, so the caller
        may reuse its buffer (an aiopool ``Batch``) as soon as the call returns.

        Raises:
            InferenceServerError: the server refused the call, is down or restarted (the next
                call reconnects); ``InferenceServerTimeout`` past ``timeout``.
            TypeError, ValueError: ``obs`` has no batch axis or a datatype V2 cannot carry, or
                the server's answer does not hold one action per observation.

        Cancellation: cancelling the awaiting task cancels the RPC; the server may still run
        the forward, and its answer is dropped. Other calls on the connection go on.
        """
        return await self.infer(obs)

    async def infer(self, obs: npt.ArrayLike, *, timeout: float | None = None
                    ) -> np.ndarray[Any, Any]:
        """``policy(obs)`` with a per-call ``timeout`` (None: the policy's ``timeout``).

        Cancellation: as ``__call__``.
        """
        arr = np.asarray(obs)
        request = self._infer_request(arr)
        response = await self._unary("ModelInfer", request,
                                     self.timeout if timeout is None else timeout)
        return self._actions(response, rows=arr.shape[0])

    async def is_ready(self, *, timeout: float | None = None) -> bool:
        """Whether the server says the model is ready (one ``ModelReady`` call).

        Raises:
            InferenceServerError: the server is down or refused the call.

        Cancellation: cancels the RPC; nothing else to undo.
        """
        request = v2.message_class("ModelReadyRequest")(name=self.model, version=self.version)
        response = await self._unary("ModelReady", request,
                                     self.timeout if timeout is None else timeout)
        return bool(response.ready)

    async def wait_ready(self, timeout: float = 30.0, *, poll_interval: float = 0.05) -> None:
        """Wait until the server answers and says the model is ready.

        Polls ``ModelReady`` every ``poll_interval`` seconds, each poll on a fresh connection
        attempt, so it returns within about ``poll_interval`` of the model becoming ready.

        Raises:
            InferenceServerTimeout: not ready within ``timeout`` seconds; the message gives the
                last answer (for instance ``UNAVAILABLE: failed to connect``, or "model not
                ready").

        Cancellation: stops polling; nothing to undo.
        """
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InferenceServerTimeout(
                    target=self.target, model=self.model, version=self.version,
                    method="ModelReady", code="NOT_READY",
                    details=f"not ready after {timeout:g} s; last answer: {last}",
                    hint=f"check that the server runs on {self.target}, serves this model, "
                         f"and look at its log; or wait longer")
            try:
                if await self.is_ready(timeout=max(min(remaining, 1.0), 0.001)):
                    return
                last = "the model is loading (ModelReady answered false)"
            except InferenceServerError as exc:
                last = f"{exc.code}: {exc.details}"
            await asyncio.sleep(min(poll_interval, max(deadline - time.monotonic(), 0)))

    async def metadata(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The model's V2 metadata: name, versions, platform, inputs and outputs (each a dict
        of name, datatype and shape; -1 marks a variable dimension).

        Raises:
            InferenceServerError: the server is down or refused the call.

        Cancellation: cancels the RPC; nothing else to undo.
        """
        request = v2.message_class("ModelMetadataRequest")(name=self.model,
                                                           version=self.version)
        r = await self._unary("ModelMetadata", request,
                              self.timeout if timeout is None else timeout)

        def tensors(ts: Any) -> list[dict[str, Any]]:
            return [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in ts]

        return {"name": r.name, "versions": list(r.versions), "platform": r.platform,
                "inputs": tensors(r.inputs), "outputs": tensors(r.outputs)}

    async def publish_weights(self, weights: bytes, *, version: int | None = None,
                              timeout: float | None = None) -> int:
        """Hand new weights to the model (aiopool's ``PolicyRuntime`` only).

        The runtime calls its factory again with ``weights=weights`` and swaps the new policy
        in; calls that arrive after this returns use it (calls already running finish on the
        old one). ``weights`` is whatever the factory reads (``torch.save`` bytes, an ``.npz``,
        ...). It must fit ``max_message_bytes`` here and the server's gRPC limit.

        Returns:
            The server's weights version now: ``version`` if given, else the previous one + 1.
            Answers to later calls carry it (``policy.weights_version``).

        Raises:
            InferenceServerError: the server refused (``FAILED_PRECONDITION`` if the runtime
                does not accept weights, ``INTERNAL`` if the factory raised), or is down.

        Cancellation: the request may or may not have reached the server, so the weights may
        or may not be in place; publish again (the same weights and version are harmless).
        """
        params: dict[str, Any] = {v2.CONTROL: v2.InferParameter(string_param=v2.PUBLISH_WEIGHTS)}
        if version is not None:
            params[v2.WEIGHTS_VERSION] = v2.InferParameter(int64_param=int(version))
        request = v2.ModelInferRequest(
            model_name=self.model, model_version=self.version, parameters=params,
            inputs=[{"name": v2.WEIGHTS_INPUT, "datatype": "BYTES", "shape": [1],
                     "contents": {"bytes_contents": [bytes(weights)]}}])
        response = await self._unary("ModelInfer", request,
                                     self.timeout if timeout is None else timeout)
        if v2.WEIGHTS_VERSION not in response.parameters:
            raise InferenceServerError(
                target=self.target, model=self.model, version=self.version,
                method="ModelInfer", code="OK",
                details="the answer carries no weights version",
                hint="the model is not served by aiopool's PolicyRuntime, which is the only "
                     "runtime that takes published weights")
        published = int(response.parameters[v2.WEIGHTS_VERSION].int64_param)
        self.weights_version = published
        return published

    async def reload(self, *, timeout: float | None = None) -> None:
        """Ask the server to load the model again from its repository (V2 repository
        extension, ``RepositoryModelLoad``).

        MLServer re-reads the model's ``model-settings.json``, loads a new instance (for
        ``PolicyRuntime``: calls the factory with the kwargs now in that file, which may name
        new weights on disk), then swaps it in and unloads the old one; calls keep being
        answered meanwhile. Returns once the new instance serves.

        Raises:
            InferenceServerError: the load failed (see the server's log) or the server is down.

        Cancellation: the server goes on loading; the model may or may not have been swapped.
        """
        request = v2.message_class("RepositoryModelLoadRequest")(model_name=self.model)
        await self._unary("RepositoryModelLoad", request,
                          self.timeout if timeout is None else timeout)

    async def aclose(self) -> None:
        """Close the connection; later calls raise ``RuntimeError``. Idempotent.

        Cancellation: the channel still closes (the close runs shielded); calls in flight fail
        with ``CANCELLED``.
        """
        self._closed = True
        channel, self._channel, self._stubs = self._channel, None, {}
        if channel is not None and self._loop is asyncio.get_running_loop():
            self._close_later(channel, grace=None)  # (on another loop: dropped with it)
        if self._closing:
            await asyncio.shield(asyncio.gather(*self._closing))

    async def __aenter__(self) -> KServePolicy:
        """Returns the policy; it connects on its first call.

        Cancellation: nothing to undo.
        """
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        """``aclose()``.

        Cancellation: as ``aclose``.
        """
        await self.aclose()

    # -- requests and answers ------------------------------------------------------------

    def _infer_request(self, arr: np.ndarray[Any, Any]) -> bytes:
        if arr.ndim == 0:
            raise ValueError(f"obs is a scalar, expected a batch of shape [B, *obs_shape] "
                             f"for model {self.model!r}")
        datatype = _V2_DATATYPES.get(arr.dtype.newbyteorder("="))
        if datatype is None:
            raise TypeError(
                f"obs has dtype {arr.dtype}, which the V2 protocol cannot carry; expected one "
                f"of {', '.join(sorted({str(d) for d in _V2_DATATYPES}))} "
                f"(convert with obs.astype(np.float32), for instance)")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        # The one copy of obs, made here: the caller's buffer is free once this returns.
        tensor = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).data
        if not self.packed:
            return v2.encode_infer_request(
                model_name=self.model, model_version=self.version, input_name=self.input_name,
                datatype=datatype, shape=arr.shape, tensor=tensor, output_name=self.output_name)
        return v2.encode_infer_request(
            model_name=self.model, model_version=self.version, input_name=self.input_name,
            datatype="BYTES", shape=[1], tensor=tensor, output_name=self.output_name,
            input_parameters={v2.PACKED_SHAPE: ",".join(map(str, arr.shape)),
                              v2.PACKED_DATATYPE: datatype},
            in_contents=True)

    def _actions(self, response: Any, *, rows: int) -> np.ndarray[Any, Any]:
        outputs = response.outputs
        if self.output_name is None and len(outputs) == 1:
            index = 0
        else:
            names = [o.name for o in outputs]
            if self.output_name is None or self.output_name not in names:
                expected = "exactly one" if self.output_name is None else repr(self.output_name)
                raise ValueError(
                    f"model {self.model!r} at {self.target} returned outputs {names}, expected "
                    f"{expected}; pass output_name= (one of them)")
            index = names.index(self.output_name)
        out = outputs[index]
        dtypes = _NUMPY_DTYPES.get(out.datatype)
        if dtypes is None:
            raise TypeError(f"model {self.model!r} returned {out.name!r} as {out.datatype}, "
                            f"expected a numeric datatype ({', '.join(v2.NUMPY_DTYPES)})")
        dtype, little = dtypes
        shape = tuple(out.shape)
        if response.raw_output_contents:
            if len(response.raw_output_contents) != len(outputs):
                raise ValueError(f"model {self.model!r} returned {len(outputs)} outputs but "
                                 f"{len(response.raw_output_contents)} raw_output_contents")
            flat = np.frombuffer(response.raw_output_contents[index], dtype=little).astype(dtype)
        else:
            field = v2.CONTENTS_FIELDS.get(out.datatype)
            if field is None:
                raise TypeError(f"model {self.model!r} returned {out.datatype} contents "
                                f"outside raw_output_contents, which V2 does not allow")
            flat = np.array(getattr(out.contents, field), dtype=dtype)
        if flat.size != math.prod(shape) or not shape or shape[0] != rows:
            raise ValueError(
                f"model {self.model!r} at {self.target} returned {out.name!r} with shape "
                f"{list(shape)} and {flat.size} values for {rows} observations, expected "
                f"shape [{rows}, *action_shape]")
        if v2.WEIGHTS_VERSION in response.parameters:
            self.weights_version = int(response.parameters[v2.WEIGHTS_VERSION].int64_param)
        if self.action_shape is not None:
            if flat.size != rows * math.prod(self.action_shape):
                raise ValueError(
                    f"model {self.model!r} returned {out.name!r} with shape {list(shape)}, "
                    f"which does not hold {rows} actions of shape {self.action_shape}; "
                    f"check action_shape=")
            return flat.reshape(rows, *self.action_shape)
        if len(shape) == 2 and shape[1] == 1:
            return flat.reshape(rows)
        return flat.reshape(shape)

    # -- the channel ---------------------------------------------------------------------

    async def _unary(self, method: str, request: Any, timeout: float | None) -> Any:
        stub, generation = self._stub(method)
        try:
            return await stub(request, timeout=timeout, metadata=self._metadata or None)
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            if code == "UNAVAILABLE":
                self._reset_channel(generation)
            cls = InferenceServerTimeout if code == "DEADLINE_EXCEEDED" else InferenceServerError
            raise cls(target=self.target, model=self.model, version=self.version,
                      method=method, code=code, details=exc.details() or "",
                      timeout=timeout) from exc

    def _stub(self, method: str) -> tuple[Any, int]:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; make a new KServePolicy")
        loop = asyncio.get_running_loop()
        if self._channel is not None and self._loop is not loop:
            assert self._loop is not None
            if not self._loop.is_closed():
                raise RuntimeError(
                    f"{self!r} is in use on another event loop; make one KServePolicy per "
                    f"loop")
            self._channel, self._stubs = None, {}  # its loop is gone, and its sockets with it
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.target, options=self._options)
            self._loop = loop
            self._generation += 1
        stub = self._stubs.get(method)
        if stub is None:
            _, response_name = v2.METHODS[method]
            stub = self._channel.unary_unary(
                v2.method_path(method), request_serializer=_serialize,
                response_deserializer=v2.message_class(response_name).FromString)
            self._stubs[method] = stub
        return stub, self._generation

    def _reset_channel(self, generation: int) -> None:
        """Drop the channel that failed with UNAVAILABLE, so the next call connects afresh
        instead of waiting out gRPC's reconnect backoff. Calls still on the old channel get
        a second to finish."""
        if generation != self._generation or self._channel is None:
            return  # another call already replaced it
        channel, self._channel, self._stubs = self._channel, None, {}
        self._close_later(channel, grace=1.0)

    def _close_later(self, channel: Any, *, grace: float | None) -> None:
        task = asyncio.get_running_loop().create_task(channel.close(grace))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
