"""The program page (``anekit doctor --html``, ``simulate --html``, ``to_html()``): built
from the reports' JSON, every user-derived string escaped, whole when parts are missing.
What a browser makes of it: tests/pages/test_pages_in_chromium.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from markupsafe import escape

import anekit
from anekit import sim
from anekit.analysis import analyze
from anekit.cli import cli
from anekit.pages import program_page

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _overflowing(x: Any, w: Any) -> Any:
    zeroed = np.maximum(x @ w, 0.0) * 0.0  # ends all zero
    h = (x @ w) * 1000.0
    return h * h + zeroed  # overflows fp16 here


def _reports() -> tuple[dict[str, Any], dict[str, Any], Any]:
    x = np.full((4, 64), 0.5, np.float32)
    w = np.full((64, 64), 0.5, np.float32)
    program = anekit.compile(_overflowing, x, w)
    placement = analyze(program)
    saved = anekit.load(_save(program))
    feeds = saved.package_feeds({"x": x, "w": w})
    numerics = sim.run(saved.program, feeds, function=saved.function_name).report
    return placement.to_json(), numerics.to_json(), program.pass_report


_SAVED: dict[str, Path] = {}


def _save(program: Any) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="anekit-page-test-"))
    path = folder / "overflowing.mlpackage"
    program.save(path)
    return path


@pytest.fixture(scope="module")
def reports() -> tuple[dict[str, Any], dict[str, Any], Any]:
    return _reports()


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr class="op[^"]*"[^>]*data-op="([^"]+)"', page)


def test_every_op_is_a_row_with_its_devices_and_numerics(reports: Any) -> None:
    placement, numerics, passes = reports
    page = program_page(placement, {"main": numerics}, passes.to_json())
    ops = placement["functions"][0]["ops"]
    assert _rows(page) == [str(escape(op["name"])) for op in ops]
    compute = [op for op in ops if op["compute"]]
    for family in placement["families"]:
        on = {
            device: sum(op["device"][family] == device for op in compute)
            for device in ["ane", "gpu", "cpu"]
        }
        for device, count in on.items():
            assert f'data-count="{device}">{device} {count}</span>' in page
    # the first inf/NaN: the op the report names is marked, once
    first = numerics["first_nonfinite"]["op"]
    marked = re.findall(r'class="op first-nonfinite"[^>]*data-op="([^"]+)"', page)
    owner = next(op["name"] for op in ops if first in op["output_names"])
    assert marked == [owner] and page.count('class="badge bad first"') == 1
    # an output that ended all zero, and the ops whose numerics are worth a look
    zeroed = [item["op"] for item in numerics["ops"] if item["constant"] == 0.0]
    assert zeroed and page.count('class="badge zero"') == len(zeroed)
    assert "every compute op expected on the ANE" not in page or placement["all_on_ane"]
    # the pass report: one line per pass that ran
    for item in passes.results:
        assert f"<code>{item.name}</code>" in page


def test_user_strings_are_escaped_everywhere(reports: Any) -> None:
    placement, numerics, _ = reports
    hostile = json.loads(json.dumps(placement))
    hostile["source"] = HOSTILE + ".mlpackage"
    hostile["notes"] = [HOSTILE]
    function = hostile["functions"][0]
    function["name"] = HOSTILE
    op = next(op for op in function["ops"] if op["compute"])
    op["name"], op["location"] = HOSTILE, HOSTILE
    op["reason"] = dict.fromkeys(hostile["families"], HOSTILE)
    bad = json.loads(json.dumps(numerics))
    bad["warnings"].append(
        {"rule": "x", "op": HOSTILE, "type": "mul", "message": HOSTILE, "location": HOSTILE}
    )
    page = program_page(hostile, {HOSTILE: bad})
    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.count("<script>") == 1  # the page's own script, and nothing else
    assert str(escape(HOSTILE)) in page


def test_no_functions_no_ops_and_a_failed_simulation_still_make_a_page(reports: Any) -> None:
    placement, numerics, _ = reports
    empty = {**placement, "functions": []}
    assert "This program has no functions to show." in program_page(empty)
    no_ops = {**placement, "functions": [{**placement["functions"][0], "ops": [], "findings": []}]}
    assert "No ops." in program_page(no_ops, {"main": numerics})
    two = json.loads(json.dumps(placement))
    second = json.loads(json.dumps(two["functions"][0]))
    second["name"] = "seq256"
    two["functions"].append(second)
    page = program_page(two, {"main": numerics, "seq256": "NumericsError: stopped at op 7 of 12"})
    assert page.count('role="tab"') == 2
    assert '<span class="sim-error">NumericsError: stopped at op 7 of 12</span>' in page
    assert page.count('class="badge bad first"') == 1  # main's numerics still shown
    assert "Not recorded: the passes ran when the program was compiled" in page


def test_an_op_off_the_ane_because_of_the_whole_function_says_so(reports: Any) -> None:
    placement, _, _ = reports
    function = placement["functions"][0]
    fallbacks = [f for f in function["findings"] if f["severity"] == "fallback"]
    assert fallbacks, "the small program is expected to fall back as a whole"
    page = program_page(placement)
    assert f"the whole function: {escape(fallbacks[0]['message'])}" in page


def test_doctor_and_simulate_write_the_page(tmp_path: Path) -> None:
    (tmp_path / "over.py").write_text(
        "import numpy as np\n\ndef f(x, w):\n    h = (x @ w) * 1000.0\n    return h * h\n"
    )
    page = tmp_path / "doctor.html"
    runner = CliRunner()
    done = runner.invoke(
        cli,
        [
            "doctor",
            str(tmp_path / "over.py") + ":f",
            "--shape",
            "x=4,64",
            "--shape",
            "w=64,64",
            "--html",
            str(page),
            "--json",
        ],
    )
    assert done.exit_code == 1, done.output  # it falls back: too small
    assert json.loads(done.stdout)["source"].endswith("over.py:f")  # --json as before
    written = page.read_text()
    assert "first inf/NaN" in written and "over.py:5" in written
    assert re.search(r'data-op="mul_1"', written)
    assert (page.stat().st_mode & 0o777) != 0o600  # as the shell creates files
    nowhere = str(tmp_path / "no" / "p.html")
    shapes = ["--shape", "x=4,64", "--shape", "w=64,64"]
    missing = runner.invoke(
        cli, ["doctor", f"{tmp_path / 'over.py'}:f", *shapes, "--html", nowhere]
    )
    assert missing.exit_code == 2 and "no such folder for the page" in missing.output
    # simulate --html: the package's placement and the simulated numerics of the run
    x = np.full((4, 64), 0.5, np.float32)
    package = _save(anekit.compile(_overflowing, x, x.T.copy()))
    simulated = tmp_path / "simulate.html"
    done = runner.invoke(cli, ["simulate", str(package), "--html", str(simulated)])
    assert done.exit_code == 1, done.output  # inf/NaN appeared
    written = simulated.read_text()
    assert "first inf/NaN" in written and 'class="badge zero"' in written
    assert "Not recorded: the passes ran when the program was compiled" in written
