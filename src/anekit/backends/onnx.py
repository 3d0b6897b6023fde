"""ONNX Runtime backend: CPU everywhere, CUDA where ``onnxruntime-gpu`` and a GPU are.

A program is emitted to ONNX (:mod:`anekit.package.onnx_emitter`) and run with graph
optimizations on; ``mode="int8"`` quantizes the weights first
(:func:`anekit.package.onnx_int8.quantize_int8`: dynamic, one scale per output
channel). Results measure this machine's CPU or GPU, never a Neural Engine.

Device truth: ONNX Runtime does not refuse a provider it cannot use. Asked for CUDA and
the CPU where CUDA is missing or cannot load (no GPU, no cuDNN), it builds the session on
the CPU alone, with no error (a Python warning or an ORT log line at most). So every
device here is read back from ``session.get_providers()``; ``device="cuda"`` raises
:class:`ProviderMismatch` when CUDA is not the first of them, and ``device="cpu"`` asks
for the CPU provider only.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit.backends import RunReport
from anekit.backends.request import LoadRequest
from anekit.errors import BackendUnavailableError

MODES = ("fp32", "int8")
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
#: ``auto``: CUDA first where this ONNX Runtime has it, else the CPU; ``cpu``: the
#: CPU provider only; ``cuda``: CUDA first, and the session must really use it.
DEVICES = ("auto", "cpu", "cuda")


class ProviderMismatch(BackendUnavailableError):
    """A session does not run on the execution provider it was built for."""

    def __init__(self, message: str, providers: Sequence[str]) -> None:
        super().__init__(message)
        #: The providers the session actually uses, in ONNX Runtime's order.
        self.providers = list(providers)


def providers(device: str = "auto") -> list[str]:
    """The execution providers to ask for on ``device`` (see :data:`DEVICES`)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cpu":
        return [CPU]
    if device == "cuda":
        return [CUDA, CPU]  # the CPU for the few ops CUDA does not implement
    import onnxruntime

    return [CUDA, CPU] if CUDA in onnxruntime.get_available_providers() else [CPU]


def device_label(used: Sequence[str]) -> str:
    """``GPU (CUDA)``, ``CPU`` or the provider's name: what a session's first
    provider (the one that runs every op it supports) is."""
    first = used[0] if used else "no execution provider"
    return {CUDA: "GPU (CUDA)", CPU: "CPU"}.get(first, first)


def check_providers(session: Any, device: str) -> list[str]:
    """The providers ``session`` uses; :class:`ProviderMismatch` unless the one
    ``device`` names (``cpu``, ``cuda``) comes first."""
    used = [str(name) for name in session.get_providers()]
    wanted = {"cpu": CPU, "cuda": CUDA}.get(device)
    if wanted is not None and used[:1] != [wanted]:
        raise ProviderMismatch(
            f"ONNX Runtime built the session on {', '.join(used) or 'nothing'}, not "
            f"{wanted} (asked for {', '.join(providers(device))}; ONNX Runtime falls "
            "back to the CPU without an error when it cannot load CUDA or cuDNN)",
            used,
        )
    return used


def session_for(
    path: Path | bytes, threads: int | None = None, gpu: bool = True, *, device: str | None = None
) -> Any:
    """An optimized ONNX Runtime session; ``threads`` intra-op threads (default: all).

    ``device`` (:data:`DEVICES`; default ``auto``, or ``cpu`` with ``gpu=False``) chooses
    the providers; ``cuda`` raises :class:`ProviderMismatch` unless it really runs on CUDA.
    """
    import onnxruntime

    chosen = device or ("auto" if gpu else "cpu")
    requested = providers(chosen)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # CPU sessions: errors only. Sessions that may use CUDA keep ORT's warnings (ops
    # placed on the CPU, a provider that did not load) on stderr.
    options.log_severity_level = 3 if requested == [CPU] else 2
    options.inter_op_num_threads = 1
    if threads:
        options.intra_op_num_threads = threads
    if requested == [CPU]:
        # One CPU arena for every session of the process (ONNX Runtime's shared
        # allocators), with planning by pattern off (the pattern preallocates per
        # shape, and a lane's session sees every length). Measured on the CPU lane
        # when it held three bucket sessions: the same speed, 600 -> 315 MB.
        _share_cpu_arena(onnxruntime)
        options.add_session_config_entry("session.use_env_allocators", "1")
        options.enable_mem_pattern = False
    source = str(path) if isinstance(path, Path) else path
    session = onnxruntime.InferenceSession(source, options, providers=requested)
    check_providers(session, chosen)
    return session


@functools.cache
def _share_cpu_arena(onnxruntime: Any) -> None:
    """Register the process-wide CPU arena allocator sessions share (once)."""
    memory = onnxruntime.OrtMemoryInfo(
        "Cpu", onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxruntime.OrtMemType.DEFAULT
    )
    onnxruntime.create_and_register_allocator(memory, onnxruntime.OrtArenaCfg(0, -1, -1, -1))


def probe(device: str, threads: int | None = None) -> list[str]:
    """The providers a one-op session gets on ``device`` (checked as
    :func:`session_for` checks them): a quick test of whether CUDA really loads,
    before any model is built."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    session = session_for(model.SerializeToString(), threads, device=device)
    return [str(name) for name in session.get_providers()]


#: ONNX Runtime's input type names -> NumPy dtypes.
_ONNX_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
}


class OnnxSession:
    """A program on ONNX Runtime."""

    def __init__(self, session: Any, mode: str, model: Any = None) -> None:
        self.session = session
        self.mode = mode
        #: The ONNX model the session runs (the quantized one in int8 mode), if given.
        self.model = model
        self.last_run: RunReport | None = None
        #: The providers the session really uses, and what they are.
        self.providers = [str(name) for name in session.get_providers()]
        self.device = device_label(self.providers)
        #: Input name -> the dtype the model takes (fp16 programs compute in fp32 here).
        self.input_types = {item.name: _ONNX_TYPES.get(item.type) for item in session.get_inputs()}

    def predict(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start = time.perf_counter()
        names = [output.name for output in self.session.get_outputs()]
        ready = {
            name: np.asarray(value, self.input_types.get(name)) for name, value in feeds.items()
        }
        values = self.session.run(names, ready)
        self.last_run = RunReport(
            backend="onnx",
            device=f"{self.device} via ONNX Runtime ({self.mode})",
            simulated=False,
            seconds=time.perf_counter() - start,
            requested=self.mode,
        )
        return dict(zip(names, values, strict=True))


class OnnxBackend:
    """ONNX Runtime (fp32, or int8 weights with ``mode="int8"``)."""

    name = "onnx"

    def load(self, request: LoadRequest, mode: str | None = None) -> OnnxSession:
        import onnx

        from anekit.errors import ProgramError
        from anekit.package.onnx_emitter import save_onnx, to_onnx
        from anekit.package.onnx_int8 import quantize_int8

        chosen = mode or "fp32"
        if request.compression is not None:
            raise ProgramError(
                f"{request.source}: compressed weights ({request.compression}) are a "
                "Core ML package format; run it with backend='sim' or 'coreml', or compile "
                "it without compress= for ONNX Runtime"
            )
        if chosen not in MODES:
            raise ProgramError(f"onnx backend modes are {', '.join(MODES)}, got {chosen!r}")
        model = to_onnx(request.program, request.function)
        if chosen == "int8":
            with tempfile.TemporaryDirectory(prefix="anekit-onnx-") as scratch:
                source = save_onnx(model, Path(scratch) / "fp32.onnx")
                model = onnx.load(str(quantize_int8(source, Path(scratch) / "int8.onnx")))
        return OnnxSession(session_for(model.SerializeToString()), chosen, model)


__all__ = [
    "CPU",
    "CUDA",
    "DEVICES",
    "MODES",
    "OnnxBackend",
    "OnnxSession",
    "ProviderMismatch",
    "check_providers",
    "device_label",
    "probe",
    "providers",
    "session_for",
]
