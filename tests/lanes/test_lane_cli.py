"""``anekit lanes`` and ``anekit embed``: JSON out, refusals reported, errors named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from anekit.cli import cli
from anekit.embedder import Embedder
from anekit.lanes import LANES, unavailable_reason
from anekit.models import known_answers


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
    reference = Embedder(runtime="numpy").encode(texts)
    assert vectors.shape == reference.shape
    assert ((vectors * reference).sum(1) > 0.99999).all()


def test_embed_reads_stdin_and_names_bad_input() -> None:
    result = CliRunner().invoke(cli, ["embed", "--lane", "numpy", "-"], input=b"ok\n\xff\xfe\n")
    assert result.exit_code == 0, result.output  # the line becomes null (--strict refuses)
    assert "stdin, line 2: not valid UTF-8 (byte 1: invalid start byte); skipped" in result.stderr
    assert result.stdout.splitlines()[1] == "null"
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


def _texts(count: int) -> list[str]:
    """``count`` distinct code chunks: the known answers, numbered."""
    base = known_answers.load().texts
    return [f"# part {index}\n{base[index % len(base)]}" for index in range(count)]


@pytest.mark.slow  # real workers killed and restarted
def test_embed_killed_mid_run_keeps_every_finished_vector_in_order(tmp_path: Path) -> None:
    """SIGKILL to ``anekit embed`` itself: what it wrote is whole lines, in input order,
    each the vector of its own line; its worker leaves once its parent is gone."""
    import os
    import select
    import signal
    import subprocess
    import sys
    import time

    texts = _texts(400)
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps(text) + "\n" for text in texts), encoding="utf-8")
    anekit = Path(sys.executable).with_name("anekit")  # the console script
    command = [str(anekit), "embed", "--lane", "cpu", str(source)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    received = b""
    limit = time.monotonic() + 240
    while received.count(b"\n") < 40 and time.monotonic() < limit:
        if select.select([process.stdout], [], [], 1.0)[0]:
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            assert chunk, "anekit embed ended before writing 40 lines"
            received += chunk
    workers = [int(pid) for pid in _children(process.pid)]
    process.send_signal(signal.SIGKILL)
    process.wait()
    received += process.stdout.read()
    lines = received.decode().splitlines(keepends=True)
    assert 40 <= len(lines) < len(texts)  # killed mid-run
    assert all(line.endswith("\n") for line in lines)  # whole lines only
    vectors = np.array([json.loads(line) for line in lines], np.float32)
    reference = Embedder(runtime="numpy").encode(texts[: len(lines)])
    assert ((vectors * reference).sum(1) >= 0.98).all()  # line n is text n's vector
    for pid in workers:  # the worker sees its stdin close and leaves
        deadline = time.monotonic() + 20
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _children(pid: int) -> list[str]:
    found: list[str] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += (task / "children").read_text().split()
    return found


def _zombie(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


@pytest.mark.slow  # real workers killed and restarted
def test_embed_writes_null_for_a_chunk_that_kills_every_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import Counter

    texts = _texts(12)
    token_ids = Embedder(runtime="numpy").tokenize(texts)
    counts = Counter(token for ids in token_ids for token in set(ids))
    poison = next(token for token in token_ids[7] if counts[token] == 1)
    monkeypatch.setenv("ANEKIT_FAULT", f"cpu:kill-on:{poison}")
    source = tmp_path / "texts.jsonl"
    lines = [json.dumps(text) for text in texts]
    lines.insert(3, "")  # a skipped line: output line n stays input line n
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["embed", "--lane", "cpu", str(source)])
    assert result.exit_code == 1, result.output
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(out) == 13 and out[3] is None and out[8] is None  # text 7 is line 9
    assert sum(row is None for row in out) == 2
    # int8 with activations quantized per batch: >= 0.98 to fp32, the lane's floor
    reference = Embedder(runtime="numpy").encode(texts)
    kept = [row for row in out if row is not None]
    expected = np.delete(reference, 7, axis=0)
    assert ((np.array(kept, np.float32) * expected).sum(1) >= 0.98).all()
    assert (
        f"{source}, line 9: not embedded: embedding this chunk alone killed the cpu lane's "
        "worker 2 time(s)"
    ) in result.stderr.replace("\n", " ")
    assert "embedded 11 of 13 lines;" in result.stderr
    assert "1 failed (line 9); 1 skipped (line 4)" in result.stderr
