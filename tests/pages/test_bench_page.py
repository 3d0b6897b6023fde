"""``anekit bench --html`` and ``anekit bench plot``: saved bench JSON as charts, two
machines' runs on one chart, a file that is not bench JSON refused by name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from anekit.cli import cli
from anekit.pages import BenchFileError, bench_page

CHECKOUT = Path(__file__).resolve().parents[2]
SAVED = CHECKOUT / "bench" / "results" / "bench-2026-12-01-66b5a44.json"


def _faster(payload: dict[str, Any], chip: str) -> dict[str, Any]:
    """Another machine's run: the same workloads, twice as fast."""
    other: dict[str, Any] = json.loads(json.dumps(payload))
    other["machine"]["chip"] = chip
    for row in other["rows"]:
        for cell in row["cells"].values():
            if cell.get("available"):
                cell["median_ms"] /= 2
                cell["spread_ms"] = [value / 2 for value in cell["spread_ms"]]
                cell["gflops"] *= 2
    return other


def _points(page: str) -> list[tuple[float, float]]:
    return [
        (float(x), float(y))
        for x, y in re.findall(r'class="point" cx="([\d.]+)" cy="([\d.]+)"', page)
    ]


def test_two_runs_on_one_chart_per_workload_family(tmp_path: Path) -> None:
    saved = json.loads(SAVED.read_text())
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_faster(saved, "M4 Max <script>x</script>")))
    page_file = tmp_path / "bench.html"
    done = CliRunner().invoke(
        cli, ["bench", "plot", str(SAVED), str(other), "--html", str(page_file)]
    )
    assert done.exit_code == 0, done.output
    page = page_file.read_text()
    families = re.findall(r'data-chart="([^"]+)"', page)
    assert families == ["FFN", "x·W", "all-MiniLM-L6-v2"]
    available = [key for key, cell in saved["rows"][1]["cells"].items() if cell.get("available")]
    # one line per column and per file, the second file dashed
    chart = page.split('data-chart="x·W"')[1].split("</section>")[0]
    assert chart.count('<g class="series"') == 2 * len(available)
    assert chart.count('stroke-dasharray="6 4"') >= len(available)
    # twice as fast plots higher (a smaller y in SVG), at the same size
    lines = re.findall(r'<g class="series" data-label="([^"]+)">(.*?)</g>', chart, re.DOTALL)
    by_label = {label: _points(body) for label, body in lines}
    for key in available:
        label = next(c["label"] for c in saved["columns"] if c["key"] == key)
        mine, theirs = by_label[f"{label} — {SAVED.name}"], by_label[f"{label} — other.json"]
        assert [x for x, _ in mine] == [x for x, _ in theirs]
        assert all(b < a for (_, a), (_, b) in zip(mine, theirs, strict=True))
    assert "simulated" in chart  # the simulator's line is labelled so
    assert "backend &#39;coreml&#39; cannot run here" in chart  # the columns not run, and why
    assert "<script>x</script>" not in page and "M4 Max &lt;script&gt;" in page


def test_what_is_not_throughput_json_is_refused_by_name(tmp_path: Path) -> None:
    latency = tmp_path / "latency.json"
    latency.write_text(json.dumps({"machine": {}, "method": {"requests": 20}, "rows": []}))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    other = tmp_path / "list.json"
    other.write_text("[1, 2]")
    out = str(tmp_path / "out.html")
    for path, why in [
        (latency, "a latency report"),
        (broken, "Expecting property name"),
        (other, "not a JSON object"),
    ]:
        done = CliRunner().invoke(cli, ["bench", "plot", str(path), "--html", out])
        assert done.exit_code == 2 and why in done.output and path.name in done.output
    assert not Path(out).exists()
    with pytest.raises(BenchFileError, match=r"x\.json: no rows of cells"):
        bench_page([("x.json", {"machine": {}, "rows": [{"workload": "w"}]})])
    # what a hand-edited or truncated file holds: refused by name, never a traceback
    saved = json.loads(SAVED.read_text())
    ran = next(key for key, cell in saved["rows"][0]["cells"].items() if cell["available"])
    malformed: list[tuple[str, Any]] = [
        ("method", None),
        ("machine", 3),
        ("columns", [{"label": "no key"}]),
    ]
    for field, value in malformed:
        with pytest.raises(BenchFileError, match=r"^x\.json: "):
            bench_page([("x.json", {**saved, field: value})])
    for change in ({"median_ms": 0}, {"spread_ms": [1.0]}, {"gflops": None}, {"spread_ms": [0, 1]}):
        bad = json.loads(json.dumps(saved))
        bad["rows"][0]["cells"][ran].update(change)
        with pytest.raises(BenchFileError, match=f"column '{ran}': a cell that ran needs"):
            bench_page([("x.json", bad)])
    bad = json.loads(json.dumps(saved))
    bad["rows"][0]["cells"] = [1, 2]
    with pytest.raises(BenchFileError, match="its cells must be an object"):
        bench_page([("x.json", bad)])


def test_an_empty_run_still_makes_a_page() -> None:
    page = bench_page(
        [("empty.json", {"machine": {"chip": "c"}, "method": {}, "columns": [], "rows": []})]
    )
    assert "No rows to chart." in page
