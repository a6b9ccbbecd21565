"""An MLServer runtime that serves a policy: ``obs [B, ...] -> actions [B, ...]``.

``model-settings.json``::

    {"name": "pong", "implementation": "aiopool.inference.mlserver_runtime.PolicyRuntime",
     "parameters": {"extra": {"factory": "mypkg.policies:make_policy",
                              "kwargs": {"checkpoint": "/ckpt/latest.pt"}}}}

``factory(**kwargs)`` is called once at load and returns a sync callable ``obs -> actions``
(numpy in, array-like out, one action per observation). Optional ``extra`` keys:
``"output_name"`` (default ``"actions"``), ``"accept_weights"`` (default true: see below),
``"raw_fast_path"`` (default true: see below), ``"weights_version"`` (default 0).

The forward runs in a worker thread of the model's own (one-thread) executor, so the server's
event loop keeps serving while it runs, and a policy that is not thread-safe is never called
twice at once. ``pip install mlserver==1.7.1`` (aiopool's ``mlserver`` extra); start with
``mlserver start <folder>``.

Inputs it reads: one tensor, as raw_input_contents (any V2 client), as typed contents (REST
JSON, or gRPC without raw) or in aiopool's packed form (one BYTES element with the shape and
datatype in its parameters; ``KServePolicy(packed=True)``).

Raw bytes without MLServer's list codec: MLServer 1.7 turns raw_input_contents into a Python
list in its gRPC servicer (``struct.unpack``), before any runtime sees them, and a runtime
would then rebuild the array from that list: ~27 ms of CPU per Atari batch [32,4,84,84]. When
a ``PolicyRuntime`` model loads with ``max_batch_size`` <= 1 (MLServer's adaptive batching
off, its default), the runtime hooks ``ModelInferRequestConverter.to_types`` so that, for the
models it serves and for no other, each raw input keeps its bytes; the runtime reads them with
``numpy.frombuffer`` (zero copy). Set ``"raw_fast_path": false`` to leave MLServer untouched.
With adaptive batching on, MLServer merges the list-decoded inputs itself (slow for images).

Publishing weights, two ways:

* ``await KServePolicy.publish_weights(blob)`` sends the weights in a ModelInfer request (see
  ``_v2_proto.CONTROL``); the runtime calls ``factory(**kwargs, weights=blob)`` in its worker
  thread and swaps the new policy in; later calls use it. Needs the factory to take
  ``weights=``; turn it off with ``"accept_weights": false``. Weights larger than 4 MiB need
  MLServer's ``grpc_max_message_length`` raised in settings.json.
* ``await KServePolicy.reload()`` (V2 ``RepositoryModelLoad``): MLServer re-reads this
  model-settings.json (change ``kwargs`` to name new weights on disk) and loads a new
  instance beside the old one before swapping.

Every answer carries the version of the weights that computed it as the response parameter
``aiopool_weights_version`` (``KServePolicy.weights_version``).

On a machine with few cores, give the server one BLAS thread (``OPENBLAS_NUM_THREADS=1``;
``torch.set_num_threads(1)`` in a torch factory): on 2 cores a multi-threaded OpenBLAS,
spinning beside the server's event loop, stalled an Atari-sized forward from ~5 ms to ~700 ms
for seconds at a time. ``aiopool.inference.testing.mlserver_process`` does so by default.

This module runs inside MLServer. It must not import tritonclient: tritonclient's protos clash
with MLServer's in one process.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._deps import install_hint

try:
    from mlserver import MLModel  # type: ignore[import-untyped]
    from mlserver.errors import InferenceError, MLServerError  # type: ignore[import-untyped]
    from mlserver.logging import logger  # type: ignore[import-untyped]
    from mlserver.types import (  # type: ignore[import-untyped]
        InferenceRequest,
        InferenceResponse,
        Parameters,
        RequestInput,
        ResponseOutput,
    )
except ModuleNotFoundError as e:
    if (e.name or "").partition(".")[0] != "mlserver":  # another module's (its dependencies')
        raise
    raise ImportError(install_hint("aiopool.inference.mlserver_runtime", "mlserver",
                                   "mlserver==1.7.1")) from e

from . import _v2_proto as v2

__all__ = ["PolicyRuntime", "load_factory"]

PolicyFn = Callable[[np.ndarray[Any, Any]], Any]

_RESERVED_KWARGS = frozenset({"weights"})


class PolicyRuntime(MLModel):  # type: ignore[misc]
    """Serves ``factory(**kwargs)`` (a sync ``obs -> actions``) named in model-settings.json."""

    async def load(self) -> bool:
        """Import the factory, call it (in the model's worker thread) and hook raw inputs.

        Cancellation: MLServer does not cancel loads; a cancelled load leaves the factory's
        call to finish in the worker thread, and the model not ready.
        """
        extra: Mapping[str, Any] = dict(self.settings.parameters.extra or {}) \
            if self.settings.parameters is not None else {}
        spec = extra.get("factory")
        if not isinstance(spec, str):
            raise MLServerError(
                f"model {self.name!r}: parameters.extra.factory must name the policy factory "
                f"as 'package.module:function', got {spec!r}; add it to model-settings.json")
        kwargs = extra.get("kwargs") or {}
        if not isinstance(kwargs, dict) or _RESERVED_KWARGS & kwargs.keys():
            raise MLServerError(
                f"model {self.name!r}: parameters.extra.kwargs must be an object of keyword "
                f"arguments for {spec} without 'weights' (weights arrive through "
                f"publish_weights), got {kwargs!r}")
        self._factory = load_factory(spec)
        self._kwargs: dict[str, Any] = kwargs
        self._output_name = str(extra.get("output_name", "actions"))
        self._accept_weights = bool(extra.get("accept_weights", True))
        self._weights_version = int(extra.get("weights_version", 0))
        self._executor = ThreadPoolExecutor(max_workers=1,
                                            thread_name_prefix=f"aiopool-policy-{self.name}")
        loop = asyncio.get_running_loop()
        self._fn: PolicyFn = await loop.run_in_executor(self._executor, self._make, None)
        self._raw_hooked = False
        if bool(extra.get("raw_fast_path", True)) and (self.settings.max_batch_size or 0) <= 1:
            self._raw_hooked = _raw_models.add(self.name)
        logger.info(f"aiopool PolicyRuntime {self.name!r}: {spec}(**{kwargs!r}); raw inputs "
                    f"{'read with numpy.frombuffer' if self._raw_hooked else 'via MLServer'}")
        return True

    async def unload(self) -> bool:
        """Stop hooking this model's raw inputs; the worker thread ends after its last call.

        Cancellation: nothing is awaited.
        """
        if getattr(self, "_raw_hooked", False):
            _raw_models.discard(self.name)
            self._raw_hooked = False
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=False)  # a forward still running finishes on its own
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        """Decode the observations, run the policy in the worker thread, encode the actions;
        or, for a control request, publish weights.

        Cancellation (the client cancelled or timed out): the forward already queued or
        running in the worker thread finishes and its result is dropped; a weight publication
        cancelled before its factory call returned is not applied.
        """
        params = _parameters(payload.parameters)
        if params.get(v2.CONTROL) is not None:
            return await self._control(payload, params)
        if len(payload.inputs) != 1:
            raise InferenceError(
                f"model {self.name!r} takes one input (the observations), got "
                f"{[i.name for i in payload.inputs]}; send obs as a single tensor [B, ...]")
        obs = _decode(payload.inputs[0], self.name)
        fn, version = self._fn, self._weights_version
        actions = np.asarray(await asyncio.get_running_loop().run_in_executor(
            self._executor, fn, obs))
        if actions.ndim == 0 or actions.shape[0] != obs.shape[0]:
            raise InferenceError(
                f"model {self.name!r}: the policy returned shape {list(actions.shape)} for "
                f"{obs.shape[0]} observations, expected [{obs.shape[0]}, *action_shape]; "
                f"the factory's callable must return one action per row")
        return InferenceResponse(
            model_name=self.name, model_version=self.version, id=payload.id,
            parameters=Parameters(**{v2.WEIGHTS_VERSION: version}),
            outputs=[_encode(self._output_name, actions)])

    def _make(self, weights: bytes | None) -> PolicyFn:
        kwargs = self._kwargs if weights is None else {**self._kwargs, "weights": weights}
        fn = self._factory(**kwargs)
        if not callable(fn):
            raise MLServerError(f"model {self.name!r}: the factory returned {type(fn).__name__}, "
                                f"expected a callable obs -> actions")
        return fn  # type: ignore[no-any-return]

    async def _control(self, payload: InferenceRequest, params: dict[str, Any]
                       ) -> InferenceResponse:
        command = params[v2.CONTROL]
        if command != v2.PUBLISH_WEIGHTS:
            raise InferenceError(f"model {self.name!r}: unknown control {command!r}, expected "
                                 f"{v2.PUBLISH_WEIGHTS!r}")
        if not self._accept_weights:
            raise MLServerError(f"model {self.name!r} does not accept published weights "
                                f"(accept_weights is false in its model-settings.json)", 422)
        if not _takes_weights(self._factory):
            raise MLServerError(
                f"model {self.name!r}: its factory takes no weights= keyword, so it cannot "
                f"receive published weights; add a weights: bytes | None = None parameter", 422)
        inputs = {i.name: i for i in payload.inputs}
        blob = _weights_blob(inputs.get(v2.WEIGHTS_INPUT), self.name)
        version = params.get(v2.WEIGHTS_VERSION)
        fn = await asyncio.get_running_loop().run_in_executor(self._executor, self._make, blob)
        self._fn = fn
        self._weights_version = self._weights_version + 1 if version is None else int(version)
        logger.info(f"aiopool PolicyRuntime {self.name!r}: weights version "
                    f"{self._weights_version} published ({len(blob)} bytes)")
        return InferenceResponse(
            model_name=self.name, model_version=self.version, id=payload.id,
            parameters=Parameters(**{v2.WEIGHTS_VERSION: self._weights_version}),
            outputs=[_encode(v2.WEIGHTS_VERSION,
                             np.array([self._weights_version], dtype=np.int64))])


def load_factory(spec: str) -> Callable[..., Any]:
    """``"package.module:attr"`` (``attr`` may be dotted) -> the object it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise MLServerError(f"factory {spec!r} must be 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise MLServerError(f"factory {spec!r}: cannot import {module_name!r} ({exc}); is it "
                            f"installed, or on PYTHONPATH of the server?") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise MLServerError(f"factory {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise MLServerError(f"factory {spec!r} is a {type(obj).__name__}, expected a callable")
    return obj  # type: ignore[no-any-return]


def _takes_weights(factory: Callable[..., Any]) -> bool:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return True  # a builtin or C callable: let the call say
    return "weights" in sig.parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def _parameters(p: Any) -> dict[str, Any]:
    if p is None:
        return {}
    return dict(p.model_extra or {})


def _decode(inp: RequestInput, model: str) -> np.ndarray[Any, Any]:
    """One V2 input tensor -> ndarray, from raw bytes (hooked), packed BYTES, or a list."""
    params = _parameters(inp.parameters)
    shape = [int(d) for d in inp.shape]
    datatype = _datatype(inp)
    data = inp.data.root
    if datatype == "BYTES":
        if v2.PACKED_SHAPE not in params:
            raise InferenceError(
                f"model {model!r}: input {inp.name!r} is BYTES without {v2.PACKED_SHAPE!r}; "
                f"send observations as a numeric tensor (or with KServePolicy(packed=True))")
        if isinstance(data, bytes | bytearray | memoryview):
            data = [_strip_length_prefix(bytes(data), model)]
        if len(data) != 1:
            raise InferenceError(
                f"model {model!r}: a packed input holds one BYTES element, got {len(data)}; "
                f"MLServer's adaptive batching cannot merge packed requests (set "
                f"max_batch_size to 1)")
        try:
            shape = [int(d) for d in str(params[v2.PACKED_SHAPE]).split(",") if d]
        except ValueError:
            raise InferenceError(f"model {model!r}: {v2.PACKED_SHAPE} must be dimensions "
                                 f"like '32,4,84,84', got {params[v2.PACKED_SHAPE]!r}") from None
        datatype = str(params.get(v2.PACKED_DATATYPE, ""))
        data = data[0]
        if isinstance(data, str):
            raise InferenceError(f"model {model!r}: the packed element arrived as text")
    dtype_name = v2.NUMPY_DTYPES.get(datatype)
    if dtype_name is None:
        raise InferenceError(f"model {model!r}: input {inp.name!r} has datatype {datatype!r}, "
                             f"expected one of {', '.join(v2.NUMPY_DTYPES)}")
    dtype = np.dtype(dtype_name)
    if isinstance(data, bytes | bytearray | memoryview):
        expected = math.prod(shape) * dtype.itemsize
        if len(data) != expected:
            raise InferenceError(
                f"model {model!r}: input {inp.name!r} has {len(data)} bytes, expected "
                f"{expected} for shape {shape} of {datatype}")
        arr = np.frombuffer(data, dtype=dtype.newbyteorder("<")).reshape(shape)
        return arr if arr.dtype.isnative else arr.astype(dtype)
    arr = np.asarray(data, dtype=dtype)
    if arr.size != math.prod(shape):
        raise InferenceError(f"model {model!r}: input {inp.name!r} has {arr.size} values, "
                             f"expected {math.prod(shape)} for shape {shape}")
    return arr.reshape(shape)


def _datatype(inp: RequestInput) -> str:
    """The datatype name ("FP32"): a str, or an enum where MLServer validated the request."""
    return str(getattr(inp.datatype, "value", inp.datatype))


def _strip_length_prefix(raw: bytes, model: str) -> bytes:
    """A raw BYTES tensor of one element: 4-byte little-endian length, then the bytes."""
    size = int.from_bytes(raw[:4], "little")
    if len(raw) != 4 + size:
        raise InferenceError(f"model {model!r}: a raw BYTES input must hold one element "
                             f"({4 + size} bytes), got {len(raw)} bytes")
    return raw[4:]


def _weights_blob(inp: RequestInput | None, model: str) -> bytes:
    if inp is None or _datatype(inp) != "BYTES":
        raise InferenceError(f"model {model!r}: publish_weights needs one BYTES input named "
                             f"{v2.WEIGHTS_INPUT!r}")
    data = inp.data.root
    if isinstance(data, bytes | bytearray | memoryview):
        return _strip_length_prefix(bytes(data), model)
    if len(data) != 1 or not isinstance(data[0], bytes | bytearray):
        raise InferenceError(f"model {model!r}: the {v2.WEIGHTS_INPUT!r} input must hold "
                             f"exactly one BYTES element, got {len(data)}")
    return bytes(data[0])


_V2_DATATYPES = {np.dtype(n): d for d, n in v2.NUMPY_DTYPES.items()}


def _encode(name: str, actions: np.ndarray[Any, Any]) -> ResponseOutput:
    datatype = _V2_DATATYPES.get(actions.dtype.newbyteorder("="))
    if datatype is None:
        raise InferenceError(f"the policy returned dtype {actions.dtype}, expected a numeric "
                             f"dtype ({', '.join(v2.NUMPY_DTYPES.values())})")
    return ResponseOutput(name=name, shape=list(actions.shape), datatype=datatype,
                          data=actions.reshape(-1).tolist())


class _RawModels:
    """The names of the models whose raw inputs keep their bytes (counted: during a reload
    the old and new instance of one model are both loaded for a moment)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._hooked = False

    def __contains__(self, name: str) -> bool:
        return self._counts[name] > 0

    def add(self, name: str) -> bool:
        with self._lock:
            if not self._hooked:
                self._hooked = _install_raw_hook(self)
            if self._hooked:
                self._counts[name] += 1
            return self._hooked

    def discard(self, name: str) -> None:
        with self._lock:
            if self._counts[name] > 0:
                self._counts[name] -= 1


_raw_models = _RawModels()


def _install_raw_hook(models: _RawModels) -> bool:
    """Wrap MLServer's ``ModelInferRequestConverter.to_types`` (the gRPC servicer's
    protobuf -> InferenceRequest step): for a model in ``models`` each input sent as
    raw_input_contents keeps its bytes as ``input.data.root`` instead of a Python list.
    Returns False (and leaves MLServer alone) if MLServer's internals are not as expected."""
    try:
        from mlserver import types
        from mlserver.grpc import converters  # type: ignore[import-untyped]

        cls = converters.ModelInferRequestConverter
        original = cls.to_types.__func__
        to_input = converters.InferInputTensorConverter.to_types
        to_output = converters.InferRequestedOutputTensorConverter.to_types
        to_params = converters.ParametersConverter.to_types
    except (ImportError, AttributeError) as exc:
        logger.warning(f"aiopool PolicyRuntime: MLServer's gRPC converter is not the one this "
                       f"runtime knows ({exc}); raw inputs go through MLServer's list codec")
        return False

    def to_types(klass: Any, pb: Any) -> Any:
        if not pb.raw_input_contents or pb.model_name not in models:
            return original(klass, pb)
        request = types.InferenceRequest.model_construct(
            id=pb.id, parameters=to_params(pb.parameters),
            inputs=[to_input(i) for i in pb.inputs])
        if pb.outputs:
            request.outputs = [to_output(o) for o in pb.outputs]
        raw = list(pb.raw_input_contents)
        empty = [inp for inp in request.inputs if not inp.data]
        if len(raw) != len(empty):  # as MLServer: raw contents go to inputs without contents
            raise InferenceError(
                f"model {pb.model_name!r}: {len(raw)} raw_input_contents for {len(empty)} "
                f"inputs without contents; send one raw entry per input")
        for inp, contents in zip(empty, raw, strict=True):
            inp.data = types.TensorData.model_construct(root=contents)
        return request

    cls.to_types = classmethod(to_types)
    return True
