"""anekit.convert (torch extra): all-MiniLM-L6-v2 through the ANE pipeline, plain torch
modules by trace and by export, and errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
from anekit import errors
from anekit.analysis import PlacementReport, analyze

torch = pytest.importorskip("torch")
minilm = pytest.importorskip("minilm")

from anekit.frontends.huggingface import BertAdapter, sentence_embedder  # noqa: E402


@pytest.fixture(scope="module")
def tokens() -> tuple[np.ndarray, np.ndarray]:
    ids, mask = minilm.tokenize(minilm.chunks())
    return np.asarray(ids), np.asarray(mask)


@pytest.fixture(scope="module")
def converted(tokens: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    ids, mask = tokens
    model = sentence_embedder(minilm.hf_model())
    return {
        "raw": anekit.convert(model, (ids[:4], mask[:4]), passes=False),
        "ane": anekit.convert(model, (ids[:4], mask[:4])),
    }


def _single_function(report: PlacementReport) -> Any:
    (function,) = report.functions
    return function


def test_minilm_placement_before_and_after_the_pipeline(converted: dict[str, Any]) -> None:
    before = _single_function(analyze(converted["raw"]))
    after = _single_function(analyze(converted["ane"]))
    for family in ("a14", "a15", "a17"):
        assert after.fallbacks(family) <= before.fallbacks(family)
        # one CPU prefix (the embedding lookup and its int32 id arithmetic), then the ANE
        assert [segment.device for segment in after.segments(family)] == ["cpu", "ane"]
    assert before.transitions("a14") > after.transitions("a14") == 1
    rules_after = {rule for op in after.compute_ops() for rule in op.rules}
    assert "layout.not_bc1s" not in rules_after
    assert "layout.not_bc1s" in {rule for op in before.compute_ops() for rule in op.rules}


def test_minilm_ane_segment_has_no_fp32_or_int_compute(converted: dict[str, Any]) -> None:
    function = _single_function(analyze(converted["ane"]))
    prefix, ane = function.segments("a14")
    ops = function.compute_ops()[prefix.ops :]
    assert len(ops) == ane.ops
    assert not [op.name for op in ops if {"dtype.fp32", "dtype.int"} & set(op.rules)]
    assert all(op.device["a14"] == "ane" for op in ops)
    int_ops = [op.op_type for op in function.compute_ops()[: prefix.ops]]
    assert "gather" in int_ops


def test_minilm_passes_reported(converted: dict[str, Any]) -> None:
    report = converted["ane"].pass_report
    assert len(report.result("to_bc1s").changes) == 36  # 6 layers x (q, k, v, out, ffn x 2)
    assert len(report.result("prescale_query").changes) == 6
    norms = report.result("fp16_safe_norm").changes
    assert len(norms) == 14  # 13 layer_norms and sentence-transformers' l2 normalize
    assert sum("(layer_norm): layer_norm -> layer_norm(x / max(max|x|" in c for c in norms) == 13
    assert "(reduce_l2_norm): l2 norm of a sum of squares" in norms[-1]
    assert any("epsilon 1e-12" in note for note in report.result("fp16_safe_norm").notes)
    assert [spec.describe() for spec in converted["ane"].input_specs] == [
        "input_ids: int32[4, 256]",
        "attention_mask: float16[4, 256]",
    ]


def _cosines(program: Any, tokens: tuple[np.ndarray, np.ndarray], **call: Any) -> np.ndarray:
    ids, mask = tokens
    found = []
    for start in range(0, len(ids), 4):
        part = slice(start, start + 4)
        want = minilm.torch_embeddings(ids[part], mask[part])
        got = program(ids[part], mask[part].astype(np.float16), **call).astype(np.float64)
        found.append(
            (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
        )
    return np.concatenate(found)


def test_minilm_embeddings_match_torch_in_ane_numerics(
    converted: dict[str, Any], tokens: tuple[np.ndarray, np.ndarray]
) -> None:
    """The acceptance figure: cosine >= 0.9999 to torch fp32 on 32 code chunks."""
    program = converted["ane"]
    cosines = _cosines(program, tokens, backend="sim")
    assert len(cosines) == 32
    assert cosines.min() >= 0.9999
    assert program.last_run is not None and program.last_run.simulated
    assert program.last_run.numerics is not None and program.last_run.numerics.ok
    # the rewrites are exact up to rounding: fp32 simulation agrees with torch
    assert _cosines(program, tokens, mode="fp32").min() >= 0.999999


def test_convert_adapts_a_bare_bert_model(tokens: tuple[np.ndarray, np.ndarray]) -> None:
    ids, mask = tokens
    program = anekit.convert(minilm.hf_model(), (ids[:2, :64], mask[:2, :64]))
    assert "Hugging Face, bert" in program.source
    (output,) = program.output_specs
    assert output.shape == (2, 64, 384)
    got = program(ids[:2, :64], mask[:2, :64].astype(np.float16), mode="fp32")
    with torch.no_grad():
        want = BertAdapter(minilm.hf_model())(
            torch.from_numpy(ids[:2, :64].astype(np.int64)),
            torch.from_numpy(mask[:2, :64].astype(np.int64)),
        ).numpy()
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-3  # fp16 output storage


def tiny_block() -> Any:
    """LayerNorm, a GELU MLP and a residual, in the (B, S, C) layout torch models use."""

    class TinyBlock(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(64)
            self.up = torch.nn.Linear(64, 256)
            self.down = torch.nn.Linear(256, 64)

        def forward(self, x: Any) -> Any:
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    return TinyBlock().eval()


@pytest.mark.parametrize("method", ["trace", "export"])
def test_convert_a_plain_module(method: str) -> None:
    torch.manual_seed(0)
    module = tiny_block()
    x = torch.randn(1, 32, 64)
    program = anekit.convert(module, (x,), method=method)
    assert [spec.describe() for spec in program.input_specs] == ["x: float16[1, 32, 64]"]
    assert program.pass_report.result("to_bc1s").changed
    with torch.no_grad():
        want = module(x).numpy()
    got = program(x.numpy().astype(np.float16), mode="fp32")
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-3


def test_convert_errors_name_the_problem() -> None:
    with pytest.raises(errors.ConversionError, match=re.escape("pass a torch.nn.Module")):
        anekit.convert(object(), (np.zeros((1, 4), np.float32),))
    with pytest.raises(errors.ConversionError, match="example input 0 is a str"):
        anekit.convert(tiny_block(), ("not a tensor",))
    with pytest.raises(errors.ConversionError, match="method must be one of"):
        anekit.convert(tiny_block(), (torch.zeros(1, 4, 64),), method="script")
    with pytest.raises(errors.ConversionError, match=re.escape("jit.trace failed")):
        anekit.convert(tiny_block(), (torch.zeros(1, 4, 3),))


def test_saved_models_load_for_the_command_line(tmp_path: Path) -> None:
    from anekit.frontends.pytorch import load_saved

    module = tiny_block()
    scripted = torch.jit.trace(module, (torch.zeros(1, 8, 64),))
    path = tmp_path / "block.pt"
    torch.jit.save(scripted, str(path))
    assert isinstance(load_saved(path), torch.jit.ScriptModule)
    with pytest.raises(errors.ConversionError, match="no such file"):
        load_saved(tmp_path / "missing.pt")
    (tmp_path / "broken.pt2").write_bytes(b"not a model")
    with pytest.raises(errors.ConversionError, match="not a saved PyTorch model"):
        load_saved(tmp_path / "broken.pt2")


def test_convert_command_writes_a_package(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from anekit.cli import cli

    module = tiny_block()
    example = torch.zeros(1, 32, 64)
    torch.jit.save(torch.jit.trace(module, (example,)), str(tmp_path / "block.pt"))
    torch.export.save(torch.export.export(module, (example,)), str(tmp_path / "block.pt2"))
    runner = CliRunner()
    out = tmp_path / "block.mlpackage"
    text = runner.invoke(
        cli, ["convert", str(tmp_path / "block.pt"), "--input", "x=1,32,64", "--out", str(out)]
    )
    assert text.exit_code == 0, text.output
    assert "ane::to_bc1s: 2 rewrites" in text.output and out.is_dir()
    loaded = anekit.load(out)
    assert [spec.describe() for spec in loaded.input_specs] == ["x: float16[1, 32, 64]"]
    exported = runner.invoke(
        cli,
        ["convert", str(tmp_path / "block.pt2"), "--json", "--out", str(tmp_path / "e.mlpackage")],
    )
    assert exported.exit_code == 0, exported.output
    payload = json.loads(exported.stdout)
    assert payload["inputs"][0]["name"] == "x"  # from the ExportedProgram's signature
    assert payload["passes"]["passes"][-1]["pass"] == "ane::pad_io_width"
    assert set(payload["placement"]["main"]) == {"a14", "a15", "a17"}
    missing = runner.invoke(cli, ["convert", str(tmp_path / "block.pt"), "--json"])
    assert missing.exit_code == 2
    assert json.loads(missing.stdout)["error"] == "ConversionError"
    bad = runner.invoke(cli, ["convert", str(tmp_path / "block.pt"), "--input", "x=1,a"])
    assert bad.exit_code == 2 and "--input" in bad.output
    options = ["convert", str(tmp_path / "block.pt"), "--input", "x=1,32,64", "--out", str(out)]
    clamped = runner.invoke(cli, [*options, "--pass-option", "prescale_query.logit_clamp=50"])
    assert clamped.exit_code == 0, clamped.output
    unknown = runner.invoke(cli, [*options, "--pass-option", "to_bc1s.fast=1"])
    assert unknown.exit_code == 2 and "has no option 'fast'" in unknown.output
