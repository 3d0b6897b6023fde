"""The bench page: ``anekit bench`` and ``bench sweep`` JSON as charts, GFLOP/s against
each workload's size (GFLOP), one line per column and per saved file, so that two
machines' runs read on one chart. Plain SVG, laid out here and drawn by the template."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anekit.pages.render import asset, render

__all__ = ["BenchFileError", "bench_page", "check_bench_json"]

#: Line colours by column, in the order columns are first met (colour-blind-safe set).
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
#: Dash patterns by saved file (the first solid).
DASHES = ("", "6 4", "2 3", "10 3 2 3")
WIDTH, HEIGHT = 760, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 48


class BenchFileError(ValueError):
    """A file that is not the throughput JSON of ``anekit bench`` or ``bench sweep``."""


@dataclass
class Point:
    x: float  # the workload's GFLOP
    y: float  # GFLOP/s at the median
    low: float  # GFLOP/s at the slowest pass
    high: float  # GFLOP/s at the fastest pass
    workload: str
    px: float = 0.0
    py: float = 0.0
    py_low: float = 0.0
    py_high: float = 0.0


@dataclass
class Series:
    label: str
    colour: str
    dash: str
    simulated: bool
    points: list[Point] = field(default_factory=list)

    @property
    def path(self) -> str:
        return " ".join(
            f"{'M' if index == 0 else 'L'}{point.px:.1f},{point.py:.1f}"
            for index, point in enumerate(self.points)
        )


@dataclass
class Chart:
    title: str
    series: list[Series]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    missing: list[str]


def check_bench_json(payload: Any, name: str) -> Mapping[str, Any]:
    """``payload`` when it is a throughput report (rows of cells per column, each cell
    that ran with a positive median, spread and GFLOP/s), else a :class:`BenchFileError`
    naming ``name`` and what is wrong."""

    def refuse(why: str) -> BenchFileError:
        return BenchFileError(f"{name}: {why}")

    if not isinstance(payload, Mapping):
        raise refuse("not a JSON object")
    method = payload.get("method", {})
    if not isinstance(method, Mapping) or not isinstance(payload.get("machine", {}), Mapping):
        raise refuse("its machine and method must be JSON objects")
    if "latency" in payload or "requests" in method:
        raise refuse(
            "a latency report (anekit bench --latency); charts take the throughput JSON of "
            "`anekit bench --save FILE` or `anekit bench sweep --save FILE`"
        )
    rows = payload.get("rows")
    if not isinstance(rows, list) or not all(
        isinstance(row, Mapping) and "cells" in row and "gflop" in row for row in rows
    ):
        raise refuse(
            "no rows of cells: not the JSON of `anekit bench --save FILE` or "
            "`anekit bench sweep --save FILE`"
        )
    columns = payload.get("columns", [])
    if not isinstance(columns, list) or not all(
        isinstance(column, Mapping) and "key" in column for column in columns
    ):
        raise refuse("its columns must each be an object with a key")
    for row in rows:
        workload = row.get("workload")
        if not isinstance(workload, str) or not _positive(row["gflop"]):
            raise refuse(f"row {workload!r}: needs a workload name and a positive gflop")
        if not isinstance(row["cells"], Mapping):
            raise refuse(f"row {workload!r}: its cells must be an object")
        for key, cell in row["cells"].items():
            if not isinstance(cell, Mapping):
                raise refuse(f"row {workload!r}, column {key!r}: not an object")
            if cell.get("available") and not _measured(cell):
                raise refuse(
                    f"row {workload!r}, column {key!r}: a cell that ran needs positive "
                    "median_ms, gflops and spread_ms [low, high]"
                )
    return payload


def _positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _measured(cell: Mapping[str, Any]) -> bool:
    spread = cell.get("spread_ms", [cell.get("median_ms")] * 2)
    return (
        _positive(cell.get("median_ms"))
        and _positive(cell.get("gflops"))
        and isinstance(spread, list)
        and len(spread) == 2
        and all(_positive(value) for value in spread)
    )


def bench_page(runs: Sequence[tuple[str, Mapping[str, Any]]], *, title: str | None = None) -> str:
    """The page of ``runs``: (a name for each, e.g. its file, and its bench JSON)."""
    checked = [(name, check_bench_json(payload, name)) for name, payload in runs]
    colours: dict[str, str] = {}
    families: dict[str, list[tuple[int, str, Mapping[str, Any], Mapping[str, Any]]]] = {}
    for index, (name, payload) in enumerate(checked):
        labels = {column["key"]: column for column in payload.get("columns", [])}
        for row in payload["rows"]:
            family = str(row["workload"]).split(" ", 1)[0]
            families.setdefault(family, []).append((index, name, row, labels))
    charts = [
        _chart(family, entries, colours, len(checked) > 1) for family, entries in families.items()
    ]
    return render(
        "bench.html.j2",
        title=title or "anekit bench",
        runs=[(name, run.get("machine", {}), run.get("method", {})) for name, run in checked],
        charts=charts,
        width=WIDTH,
        height=HEIGHT,
        plot=(LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM),
        style=asset("page.css"),
    )


def _chart(
    family: str,
    entries: list[tuple[int, str, Mapping[str, Any], Mapping[str, Any]]],
    colours: dict[str, str],
    several: bool,
) -> Chart:
    series: dict[tuple[int, str], Series] = {}
    missing: dict[str, list[str]] = {}  # why -> the columns (and files) it kept out
    for index, name, row, labels in entries:
        for key, cell in row["cells"].items():
            if not cell.get("available"):
                who = f"{key}{f' ({name})' if several else ''}"
                kept_out = missing.setdefault(str(cell.get("reason", "not run")), [])
                if who not in kept_out:
                    kept_out.append(who)
                continue
            colour = colours.setdefault(key, PALETTE[len(colours) % len(PALETTE)])
            about = labels.get(key, {})
            simulated = bool(about.get("simulated"))
            label = str(about.get("label", key)) + (f" — {name}" if several else "")
            target = series.setdefault(
                (index, key), Series(label, colour, DASHES[index % len(DASHES)], simulated)
            )
            low_ms, high_ms = cell.get("spread_ms", [cell["median_ms"]] * 2)
            flop = float(row["gflop"])
            target.points.append(
                Point(
                    x=flop,
                    y=float(cell["gflops"]),
                    low=flop / float(high_ms) * 1e3,
                    high=flop / float(low_ms) * 1e3,
                    workload=str(row["workload"]),
                )
            )
    lines = [item for item in series.values() if item.points]
    for item in lines:
        item.points.sort(key=lambda point: point.x)
    xs = [point.x for item in lines for point in item.points]
    ys = [value for item in lines for point in item.points for value in (point.low, point.high)]
    x_axis, y_axis = _LogAxis(xs, LEFT, WIDTH - RIGHT), _LogAxis(ys, HEIGHT - BOTTOM, TOP)
    for item in lines:
        for point in item.points:
            point.px, point.py = x_axis.at(point.x), y_axis.at(point.y)
            point.py_low, point.py_high = y_axis.at(point.low), y_axis.at(point.high)
    return Chart(
        title=family,
        series=lines,
        x_ticks=x_axis.ticks(),
        y_ticks=y_axis.ticks(),
        missing=[f"{', '.join(who)}: {why}" for why, who in missing.items()],
    )


class _LogAxis:
    """A log10 scale over ``values`` (padded to whole decades), onto pixels ``start`` to
    ``stop``."""

    def __init__(self, values: Sequence[float], start: float, stop: float) -> None:
        positive = [value for value in values if value > 0 and math.isfinite(value)] or [1.0]
        self.low = math.floor(math.log10(min(positive)))
        self.high = max(math.ceil(math.log10(max(positive))), self.low + 1)
        self.start, self.stop = start, stop

    def at(self, value: float) -> float:
        if value <= 0 or not math.isfinite(value):
            return self.start
        share = (math.log10(value) - self.low) / (self.high - self.low)
        return self.start + share * (self.stop - self.start)

    def ticks(self) -> list[tuple[float, str]]:
        return [
            (self.at(10.0**power), f"{10.0**power:g}") for power in range(self.low, self.high + 1)
        ]
