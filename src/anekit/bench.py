"""``anekit bench``: the seed-003 table on the machine in front of you.

The workloads of AppleNeuralEngine.jl's table (shared/seeds/003): the LLaMA-style FFN
block (D=512, H=1536, T=256) and x·W at three sizes, each traced once with
:func:`anekit.compile`, and the default embedding model (all-MiniLM-L6-v2) at 4 x 256
tokens through each column's encoder, run on every column this machine has:

- ``ane`` and ``gpu``: Core ML with ``CPU_AND_NE`` / ``CPU_AND_GPU`` (macOS; unverified
  on hardware in this project's CI, which has no Mac);
- ``numpy``: the same NumPy function in float32 (its BLAS and thread count named);
- ``onnxruntime``: the traced program through ONNX Runtime on the CPU, fp32;
- ``simulator``: the ANE simulator's fp16 numerics: simulated, never a device figure;
- ``direct``: the private ANE framework without Core ML (:mod:`anekit.backends.direct`;
  experimental, macOS, unverified on hardware): only when named (``--column direct``),
  and a program it refuses is a failed cell, never a run on Core ML.

A column this machine lacks stays in the table with the reason. Times are per call and
include what a caller pays around the device: the inputs' checks, casts and padding, and
the outputs' copies back. Each column is warmed up (its first call, timed apart as the
cold call, is also the fidelity check), then the columns take turns for
``passes`` passes of ``repeat`` calls (the first column rotates, so no column always
runs first); a cell is the median call and the range of the passes' medians. Fidelity
is the largest error relative to the largest |value| of the float64 result (for the
embedding model: of the fp32 NumPy encoder's vectors).
"""

from __future__ import annotations

import functools
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import anekit
from anekit._bench_columns import COLUMNS as COLUMNS
from anekit._bench_columns import DEFAULT_COLUMNS as DEFAULT_COLUMNS
from anekit.analysis import compute_plan
from anekit.demo import make_ffn

#: Columns, in table order: key -> label.
#: How each column runs a traced program: (backend, its mode); None: plain NumPy.
_RUNS: dict[str, tuple[str, str] | None] = {
    "ane": ("coreml", "CPU_AND_NE"),
    "gpu": ("coreml", "CPU_AND_GPU"),
    "numpy": None,
    "onnxruntime": ("onnx", "fp32"),
    "simulator": ("sim", "ane"),
    "direct": ("direct", "1.3"),
}
#: ``size="small"`` divides every dimension by this (CI and quick looks).
SMALL_DIVISOR = 8


@dataclass(frozen=True)
class Workload:
    """One row: a NumPy function whose fp16-valued weights are held in a given dtype."""

    name: str
    flops: float
    build: Callable[[Any], Callable[..., Any]]
    inputs: tuple[np.ndarray, ...]
    reference: str = "float64"


@dataclass(frozen=True)
class ModelWorkload:
    """The default embedding model on a batch of token ids, through each column's encoder
    (:func:`anekit.models.encoders.open_encoder`); its reference is the fp32 NumPy encoder."""

    name: str
    flops: float
    token_ids: list[list[int]]
    reference: str = "the fp32 NumPy encoder"


def model_workload(size: str = "full", batch: int = 4) -> ModelWorkload:
    """all-MiniLM-L6-v2 (the default model) at ``batch`` x its 256 tokens (small: 32)."""
    from anekit.embedder import Embedder
    from anekit.models.encoders import ModelEncoder

    embedder = Embedder(runtime="numpy")
    assert isinstance(embedder.encoder, ModelEncoder)
    config = embedder.encoder.config
    tokens = config.max_length // (SMALL_DIVISOR if size == "small" else 1)
    text = " ".join(f"def handler_{i}(request): return request.json()" for i in range(200))
    ids = [row[: tokens - 1] + row[-1:] for row in embedder.tokenize([text] * batch)]
    d, ff = config.hidden_size, config.intermediate_size
    # per layer: Q, K, V, output and the two FFN matmuls, then QK^T and scores x V
    per_layer = tokens * (4 * d * d + 2 * d * ff) + 2 * tokens * tokens * d
    flops = 2.0 * batch * config.num_layers * per_layer
    return ModelWorkload(f"all-MiniLM-L6-v2 embed {batch}x{tokens}", flops, ids)


def _matmul(m: int, k: int, n: int) -> Workload:
    rng = np.random.default_rng(k * n)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float16)
    x = rng.standard_normal((m, k)).astype(np.float16)

    def build(dtype: Any) -> Callable[..., Any]:
        weight = w.astype(dtype)
        return lambda a: a @ weight

    return Workload(f"x·W {m}x{k}·{k}x{n}", 2.0 * m * k * n, build, (x,))


def _conv1x1(channels: int, sequence: int) -> Workload:
    from anekit import nn

    rng = np.random.default_rng(channels * sequence)
    w = (rng.standard_normal((channels, channels)) / np.sqrt(channels)).astype(np.float16)
    x = rng.standard_normal((1, channels, 1, sequence)).astype(np.float16)

    def build(dtype: Any) -> Callable[..., Any]:
        weight = w.astype(dtype)
        return lambda a: nn.conv1x1(a, weight)

    flops = 2.0 * channels * channels * sequence
    return Workload(f"conv1x1 C={channels} S={sequence}", flops, build, (x,))


#: ``anekit bench sweep``'s default grid: channels x sequence, for conv1x1 and matmul.
SWEEP_CHANNELS = (256, 512, 1024, 2048)
SWEEP_SEQUENCE = (64, 256, 1024)


def sweep_workloads(
    channels: Sequence[int] = SWEEP_CHANNELS, sequence: Sequence[int] = SWEEP_SEQUENCE
) -> list[Workload]:
    """conv1x1 on (1, C, 1, S) and x·W with x (S, C), W (C, C), over the grid: where
    throughput steps as the shapes grow."""
    grid = [(c, s) for c in channels for s in sequence]
    return [_conv1x1(c, s) for c, s in grid] + [_matmul(s, c, c) for c, s in grid]


def workloads(size: str = "full") -> list[Workload]:
    """The seed-003 rows at full size, or each dimension divided by :data:`SMALL_DIVISOR`."""
    if size not in ("full", "small"):
        raise ValueError(f"size must be 'full' or 'small', got {size!r}")
    div = SMALL_DIVISOR if size == "small" else 1
    d, h, t = 512 // div, 1536 // div, 256 // div
    rng = np.random.default_rng(1)
    ffn = Workload(
        f"FFN block D={d} H={h} T={t}",
        6.0 * t * d * h,  # three (T,D)x(D,H)-sized matmuls; the norm and SiLU are noise
        lambda dtype: make_ffn(d, h, dtype=dtype),
        (rng.standard_normal((t, d)).astype(np.float16),),
    )
    shapes = [(256, 1024, 1024), (1024, 1024, 1024), (2048, 2048, 2048)]
    return [ffn, *(_matmul(*(s // div for s in shape)) for shape in shapes)]


@dataclass
class Cell:
    """One workload on one column: per-pass call times (ms), fidelity, or why not."""

    column: str
    reason: str | None = None
    passes: list[list[float]] = field(default_factory=list)
    first_call_ms: float | None = None
    rel_error: float | None = None

    @property
    def median_ms(self) -> float:
        return float(np.median([t for times in self.passes for t in times]))

    @property
    def spread_ms(self) -> tuple[float, float]:
        medians = [float(np.median(times)) for times in self.passes]
        return min(medians), max(medians)

    def to_json(self, flops: float) -> dict[str, Any]:
        if self.reason is not None:
            return {"available": False, "reason": self.reason}
        low, high = self.spread_ms
        return {
            "available": True,
            "median_ms": self.median_ms,
            "spread_ms": [low, high],
            "gflops": flops / self.median_ms / 1e6,
            "rel_error": self.rel_error,
            "first_call_ms": self.first_call_ms,
            "calls": sum(len(times) for times in self.passes),
        }


def _unavailable(column: str) -> str | None:
    """Why ``column`` cannot run here (None: it can)."""
    run = _RUNS[column]
    if run is None:
        return None
    from anekit.backends import select_backend
    from anekit.errors import BackendUnavailableError

    try:
        select_backend(run[0])
    except BackendUnavailableError as error:
        return str(error)
    return None


#: How each column runs the embedding model: (open_encoder kind, its options).
_ENCODERS: dict[str, tuple[str, dict[str, Any]]] = {
    "ane": ("coreml", {"compute_units": "CPU_AND_NE"}),
    "gpu": ("coreml", {"compute_units": "CPU_AND_GPU"}),
    "numpy": ("numpy", {}),
    "onnxruntime": ("onnx", {"variant": "fp32", "device": "cpu"}),
    "simulator": ("sim", {}),
    "direct": ("direct", {}),
}


def _model_caller(column: str, workload: ModelWorkload) -> Callable[[], np.ndarray]:
    from anekit.models.encoders import SimEncoder, open_encoder

    kind, options = _ENCODERS[column]
    encoder = open_encoder(kind, **options)
    if isinstance(encoder, SimEncoder):
        encoder.package  # noqa: B018  (found or built now, not in the first timed call)
    return lambda: encoder.embed(workload.token_ids)


def _caller(column: str, workload: Workload | ModelWorkload, program: Any) -> Callable[[], Any]:
    if isinstance(workload, ModelWorkload):
        return _model_caller(column, workload)
    run = _RUNS[column]
    if run is None:
        fn = workload.build(np.float32)
        inputs = [x.astype(np.float32) for x in workload.inputs]
        return lambda: np.asarray(fn(*inputs))
    backend, mode = run
    if backend == "direct":
        return functools.partial(_without_fallback, program, workload.inputs, mode)
    return lambda: np.asarray(program(*workload.inputs, backend=backend, mode=mode))


def _without_fallback(program: Any, inputs: Sequence[np.ndarray], mode: str) -> np.ndarray:
    """``program`` on the direct path; a refusal raises instead of timing Core ML."""
    from anekit.backends.direct import no_fallback

    with no_fallback():
        return np.asarray(program(*inputs, backend="direct", mode=mode))


@dataclass
class BenchResult:
    """The table: rows of cells, the columns and how they were measured."""

    rows: list[tuple[Workload | ModelWorkload, dict[str, Cell]]]
    columns: list[str]
    repeat: int
    passes: int
    warmup: int
    size: str

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": machine(),
            "method": {
                "size": self.size,
                "warmup_calls": self.warmup,
                "passes": self.passes,
                "calls_per_pass": self.repeat,
                "includes": "input checks, casts and padding; output copies",
                "simulated_columns": ["simulator"],
                "experimental_columns": ["direct"],
            },
            "columns": [
                {"key": key, "label": COLUMNS[key], "simulated": key == "simulator"}
                for key in self.columns
            ],
            "rows": [
                {
                    "workload": workload.name,
                    "gflop": workload.flops / 1e9,
                    "reference": workload.reference,
                    "cells": {key: cell.to_json(workload.flops) for key, cell in cells.items()},
                }
                for workload, cells in self.rows
            ],
        }


def _program(workload: Workload | ModelWorkload) -> Any:
    """The traced program (None for the model: each column opens its encoder)."""
    if isinstance(workload, ModelWorkload):
        return None
    return anekit.compile(workload.build(np.float16), *workload.inputs)


def _prepare(workload: Workload | ModelWorkload) -> tuple[Any, np.ndarray]:
    """The traced program and the reference result."""
    if isinstance(workload, ModelWorkload):
        from anekit.models.encoders import open_encoder

        return None, open_encoder("numpy").embed(workload.token_ids)
    inputs = (x.astype(np.float64) for x in workload.inputs)
    return _program(workload), np.asarray(workload.build(np.float64)(*inputs))


def run(
    size: str = "full",
    columns: Sequence[str] = DEFAULT_COLUMNS,
    repeat: int = 5,
    passes: int = 3,
    warmup: int = 2,
    model: bool = True,
    progress: Callable[[str], None] | None = None,
    rows: Sequence[Workload] | None = None,
) -> BenchResult:
    """Measure every workload (and the embedding model unless ``model=False``) on every
    column (see the module docstring for how); ``rows``: these workloads instead (a
    sweep), without the model."""
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown:
        known = ", ".join(COLUMNS)
        raise ValueError(f"unknown column(s) {', '.join(unknown)}; choose from {known}")
    if min(repeat, passes, warmup) < 1:
        raise ValueError("repeat, passes and warmup must each be at least 1")
    reasons = {key: _unavailable(key) for key in columns}
    measured: list[tuple[Workload | ModelWorkload, dict[str, Cell]]] = []
    every: list[Workload | ModelWorkload] = [*(workloads(size) if rows is None else rows)]
    if model and rows is None:
        every.append(model_workload(size))
    for workload in every:
        if progress is not None:
            progress(f"{workload.name}: preparing")
        program, want = _prepare(workload)
        cells = {key: Cell(key, reason=reasons[key]) for key in columns}
        callers: dict[str, Callable[[], np.ndarray]] = {}
        for key, cell in cells.items():
            if cell.reason is not None:
                continue
            if progress is not None:
                progress(f"{workload.name}: warming up {COLUMNS[key]}")
            try:
                caller = _caller(key, workload, program)
                started = time.perf_counter()
                got = caller()
                cell.first_call_ms = (time.perf_counter() - started) * 1000
                for _ in range(warmup - 1):
                    caller()
            except Exception as error:  # a column that fails is a cell that says so
                cell.reason = f"failed: {type(error).__name__}: {error}"
                continue
            cell.rel_error = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
            callers[key] = caller
        order = list(callers)
        for index in range(passes if order else 0):
            if progress is not None:
                progress(f"{workload.name}: pass {index + 1} of {passes}")
            first = index % len(order)
            for key in order[first:] + order[:first]:
                if cells[key].reason is not None:
                    continue
                times = []
                try:
                    for _ in range(repeat):
                        started = time.perf_counter()
                        callers[key]()
                        times.append((time.perf_counter() - started) * 1000)
                except Exception as error:  # failed mid-run: the cell says so, the rest go on
                    cells[key].reason = f"failed: {type(error).__name__}: {error}"
                    cells[key].passes.clear()
                    continue
                cells[key].passes.append(times)
        measured.append((workload, cells))
    return BenchResult(measured, list(columns), repeat, passes, warmup, size)


def _blas() -> str:
    """NumPy's BLAS and its thread count (threadpoolctl reads the loaded library)."""
    from threadpoolctl import threadpool_info

    np.ones((2, 2)) @ np.ones((2, 2))  # loads the BLAS if nothing has yet
    pools = [pool for pool in threadpool_info() if pool.get("user_api") == "blas"]
    if not pools:
        return "unknown BLAS"
    pool = pools[0]
    return f"{pool['internal_api']} {pool.get('version') or ''} ({pool['num_threads']} threads)"


def machine() -> dict[str, Any]:
    """The header: chip, OS, versions."""
    import importlib.metadata
    import os

    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "chip": compute_plan.chip(),
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}"
        + (f" (macOS {platform.mac_ver()[0]})" if platform.system() == "Darwin" else ""),
        "python": platform.python_version(),
        "anekit": anekit.__version__,
        "numpy": f"{np.__version__}, {_blas()}",
        "onnxruntime": version("onnxruntime"),
        "coremltools": version("coremltools"),
    }


def _cell_text(cell: Cell, flops: float) -> str:
    if cell.reason is not None:
        return "failed" if cell.reason.startswith("failed") else "unavailable"
    low, high = cell.spread_ms
    return (
        f"{cell.median_ms:.3g} ms ({low:.3g}-{high:.3g}), "
        f"{flops / cell.median_ms / 1e6:.3g} GFLOP/s, err {cell.rel_error:.1e}"
    )


def markdown(result: BenchResult) -> str:
    """The table as Markdown, with the machine and the method in its header."""
    info = machine()
    lines = [
        f"## anekit bench: {info['chip']}, {info['os']}",
        "",
        f"anekit {info['anekit']}, Python {info['python']}, NumPy {info['numpy']}, "
        f"ONNX Runtime {info['onnxruntime']}, coremltools {info['coremltools']}; "
        f"{time.strftime('%Y-%m-%d')}.",
        "",
        f"Per call: median ms (range of {result.passes} passes' medians, {result.repeat} calls "
        f"each, after {result.warmup} warm-up calls, columns taking turns), GFLOP/s, and the "
        "largest error relative to max |float64 result| (the embedding row: max |fp32 NumPy "
        "encoder's vectors|). Times include the inputs' checks, "
        "casts and padding and the outputs' copies. The simulator column is simulated, not a "
        "device figure."
        + (
            " The direct column runs the private ANE framework without Core ML "
            "(experimental; unverified on hardware in anekit's CI)."
            if "direct" in result.columns
            else ""
        ),
        "",
        "| workload | " + " | ".join(COLUMNS[key] for key in result.columns) + " |",
        "|---|" + "---|" * len(result.columns),
    ]
    for workload, cells in result.rows:
        texts = [_cell_text(cells[key], workload.flops) for key in result.columns]
        lines.append(f"| {workload.name} | " + " | ".join(texts) + " |")
    notes = {
        (key, cell.reason) for _, cells in result.rows for key, cell in cells.items() if cell.reason
    }
    if notes:
        lines.append("")
        lines += [f"- {COLUMNS[key]}: {reason}" for key, reason in sorted(notes)]
    return "\n".join(lines) + "\n"


@dataclass
class LatencyCell:
    """One workload on one column: single-request latency and saturated throughput."""

    column: str
    reason: str | None = None
    latencies_ms: list[float] = field(default_factory=list)
    in_flight: int = 0
    requests: int = 0
    seconds: float = 0.0  # wall clock for ``requests`` calls with ``in_flight`` at a time

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds

    def to_json(self) -> dict[str, Any]:
        if self.reason is not None:
            return {"available": False, "reason": self.reason}
        return {
            "available": True,
            "latency_ms": {f"p{q}": self.percentile(q) for q in (50, 95, 99)},
            "latency_calls": len(self.latencies_ms),
            "throughput": {
                "in_flight": self.in_flight,
                "requests": self.requests,
                "requests_per_second": self.requests_per_second,
            },
        }


def latency(
    size: str = "full",
    columns: Sequence[str] = DEFAULT_COLUMNS,
    requests: int = 40,
    in_flight: int = 4,
    warmup: int = 2,
    model: bool = True,
    progress: Callable[[str], None] | None = None,
) -> list[tuple[Workload | ModelWorkload, dict[str, LatencyCell]]]:
    """Per workload and column: ``requests`` calls one at a time (latency p50/p95/p99),
    then ``requests`` calls with ``in_flight`` threads each holding its own loaded copy
    (saturated throughput, requests per second). The embedding model runs one text per
    request (batch 1)."""
    if min(requests, in_flight, warmup) < 1:
        raise ValueError("requests, in_flight and warmup must each be at least 1")
    from concurrent.futures import ThreadPoolExecutor

    reasons = {key: _unavailable(key) for key in columns}
    every: list[Workload | ModelWorkload] = [*workloads(size)]
    if model:
        every.append(model_workload(size, batch=1))
    rows = []
    for workload in every:
        cells = {key: LatencyCell(key, reason=reasons[key]) for key in columns}
        for key, cell in cells.items():
            if cell.reason is not None:
                continue
            if progress is not None:
                progress(f"{workload.name}: {COLUMNS[key]}")
            try:
                callers = [_caller(key, workload, _program(workload)) for _ in range(in_flight)]
                for caller in callers:
                    for _ in range(warmup):
                        caller()
            except Exception as error:  # a column that fails is a cell that says so
                cell.reason = f"failed: {type(error).__name__}: {error}"
                continue
            for _ in range(requests):
                started = time.perf_counter()
                callers[0]()
                cell.latencies_ms.append((time.perf_counter() - started) * 1000)
            shares = [requests // in_flight + (i < requests % in_flight) for i in range(in_flight)]

            def work(caller: Callable[[], Any], count: int) -> None:
                for _ in range(count):
                    caller()

            started = time.perf_counter()
            with ThreadPoolExecutor(in_flight) as pool:
                for done in [pool.submit(work, c, n) for c, n in zip(callers, shares, strict=True)]:
                    done.result()
            cell.seconds = time.perf_counter() - started
            cell.in_flight, cell.requests = in_flight, requests
        rows.append((workload, cells))
    return rows


def latency_json(
    rows: list[tuple[Workload | ModelWorkload, dict[str, LatencyCell]]], columns: Sequence[str]
) -> dict[str, Any]:
    return {
        "machine": machine(),
        "columns": list(columns),
        "rows": [
            {"workload": workload.name, "cells": {k: c.to_json() for k, c in cells.items()}}
            for workload, cells in rows
        ],
    }


def latency_markdown(
    rows: list[tuple[Workload | ModelWorkload, dict[str, LatencyCell]]], columns: Sequence[str]
) -> str:
    """The latency table: p50/p95/p99 of single requests, then requests/s in flight."""
    info = machine()
    lines = [
        f"## anekit bench --latency: {info['chip']}, {info['os']}",
        "",
        "Per column: latency of one request at a time (p50 / p95 / p99 ms), then saturated "
        "throughput (requests/s with several in flight, each thread holding its own loaded "
        "copy). The simulator column is simulated, not a device figure.",
        "",
        "| workload | " + " | ".join(COLUMNS[key] for key in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for workload, cells in rows:
        texts = []
        for key in columns:
            cell = cells[key]
            if cell.reason is not None:
                texts.append("failed" if cell.reason.startswith("failed") else "unavailable")
                continue
            p50, p95, p99 = (cell.percentile(q) for q in (50, 95, 99))
            texts.append(
                f"{p50:.3g} / {p95:.3g} / {p99:.3g} ms; "
                f"{cell.requests_per_second:.3g} req/s at {cell.in_flight} in flight"
            )
        lines.append(f"| {workload.name} | " + " | ".join(texts) + " |")
    notes = {(key, c.reason) for _, cells in rows for key, c in cells.items() if c.reason}
    if notes:
        lines.append("")
        lines += [f"- {COLUMNS[key]}: {reason}" for key, reason in sorted(notes)]
    return "\n".join(lines) + "\n"
