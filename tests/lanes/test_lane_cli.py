"""``anekit lanes`` and ``anekit embed``: JSON out, refusals reported, errors named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from anekit.cli import cli
from anekit.lanes import LANES, unavailable_reason
from anekit.models import Embedder, known_answers


def test_lanes_json_reports_state_rate_and_cosine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANEKIT_FAULT", "cpu:poison:zero")
    result = CliRunner().invoke(cli, ["lanes", "--lane", "numpy,cpu", "--json"])
    assert result.exit_code == 0, result.output
    report = {item["lane"]: item for item in json.loads(result.output)}
    assert report["numpy"]["state"] == "ready"
    assert report["numpy"]["min_cosine"] >= 0.999
    assert report["numpy"]["rate_tokens_per_s"] > 0
    assert report["numpy"]["device"] == "CPU (NumPy fp32)"
    assert report["cpu"]["state"] == "refused"  # zero vectors are no answer
    assert len(report["cpu"]["below_floor"]) == len(known_answers.load().texts)
    # the device as the worker's ONNX Runtime sessions report it
    assert report["cpu"]["providers"] == ["CPUExecutionProvider"]
    assert report["cpu"]["device"] == "CPU (ONNX Runtime int8)"


def _table_rows(output: str) -> dict[str, dict[str, str]]:
    """The rows of a rich table (box-drawn, cells folded over lines), by first cell."""
    lines = [line for line in output.splitlines() if line.startswith(("┃", "│"))]
    header = [cell.strip() for cell in lines[0].strip("┃").split("┃")]
    rows: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if cells[0]:  # a new row; otherwise a folded continuation of the last one
            current = rows.setdefault(cells[0], dict.fromkeys(header, ""))
        for name, cell in zip(header, cells, strict=True):
            if cell:
                current[name] = f"{current[name]} {cell}".strip()
    return rows


def test_lanes_table_lists_unavailable_lanes() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--all"])
    assert result.exit_code == 0, result.output
    rows = _table_rows(result.output)
    assert set(rows) == set(LANES) - {"sim"}, result.output  # sim only when named
    assert rows["cpu"]["state"] == rows["numpy"]["state"] == "ready"
    assert rows["cpu"]["device"] == "CPU (ONNX Runtime int8)"
    assert float(rows["cpu"]["min cosine"]) >= 0.98
    for lane in ("ane", "gpu"):  # ready where they can run; unavailable, and why, elsewhere
        reason = unavailable_reason(lane)
        if reason is None:
            assert rows[lane]["state"] in ("ready", "refused"), rows[lane]
        else:
            assert rows[lane]["state"] == "unavailable"
            assert rows[lane]["why"] == reason


def test_unknown_lanes_are_named() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--lane", "tpu", "--json"])
    assert result.exit_code == 2
    assert "unknown lane 'tpu'" in json.loads(result.output)["message"]


def test_embed_writes_one_json_vector_per_line(tmp_path: Path) -> None:
    texts = ["def add(a, b):\n    return a + b", "", "SELECT * FROM users;"]
    source = tmp_path / "texts.jsonl"
    lines = [json.dumps(texts[0]), json.dumps(texts[1]), json.dumps({"text": texts[2]})]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["embed", "--lane", "numpy", str(source)])
    assert result.exit_code == 0, result.output
    vectors = np.array([json.loads(line) for line in result.stdout.splitlines()], np.float32)
    reference = Embedder(backend="numpy").encode(texts)
    assert vectors.shape == reference.shape
    assert ((vectors * reference).sum(1) > 0.99999).all()


def test_embed_reads_stdin_and_names_bad_input() -> None:
    result = CliRunner().invoke(cli, ["embed", "--lane", "numpy", "-"], input=b"ok\n\xff\xfe\n")
    assert result.exit_code == 2
    assert "stdin, line 2: not UTF-8" in result.output
    missing = CliRunner().invoke(cli, ["embed", "no-such-file.txt"])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_bad_models_and_fault_specs_are_named_before_any_worker_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    missing = CliRunner().invoke(cli, ["lanes", "--model", "no/such/model", "--json"])
    assert missing.exit_code == 2 and "no model 'no/such/model'" in missing.output
    monkeypatch.setenv("ANEKIT_FAULT", "cpu:explode")
    fault = CliRunner().invoke(cli, ["lanes", "--lane", "cpu", "--json"])
    assert fault.exit_code == 2
    assert "ANEKIT_FAULT: cannot read 'cpu:explode'" in json.loads(fault.output)["message"]
