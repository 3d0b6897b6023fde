"""``anekit convert`` on what ``torch.save`` writes (issue 32 item 2): a pickled module or
a state_dict is named for what it is, with how to save TorchScript or an ExportedProgram,
instead of torch's "the checkpoint is corrupted"; and each kind of file is told apart by
its contents (:mod:`anekit.frontends.saved_torch`), without torch."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from anekit import errors
from anekit.cli import cli
from anekit.frontends.saved_torch import saved_format


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


HOW = ("torch.jit.trace(model, example_inputs).save(", "torch.export.save(torch.export.export(")


def _convert(model: Path, out: Path) -> dict[str, str]:
    result = CliRunner().invoke(
        cli, ["convert", str(model), "--input", "1,4", "--out", str(out), "--json"]
    )
    assert result.exit_code == 2, result.output
    payload: dict[str, str] = json.loads(result.stdout)
    assert payload["error"] == "ConversionError"
    return payload


def test_a_pickled_module_is_named_with_how_to_save_one_convert_takes(tmp_path: Path) -> None:
    model = tmp_path / "whole.pt"
    torch.save(Tiny(), model)
    message = _convert(model, tmp_path / "out.mlpackage")["message"]
    assert message.startswith(
        f"{model}: saved with torch.save, it holds a whole pickled module "
        f"({Tiny.__module__}.Tiny), which anekit convert does not unpickle"
    )
    assert all(how in message for how in HOW)
    assert "corrupted" not in message


@pytest.mark.parametrize(
    ("saved", "what"),
    [
        (lambda: Tiny().state_dict(), "(a state_dict)"),
        (lambda: {"model": Tiny().state_dict(), "epoch": 3}, "(a dict: a state_dict or a"),
    ],
    ids=["state_dict", "checkpoint"],
)
def test_saved_weights_are_named_as_weights(
    tmp_path: Path, saved: Callable[[], object], what: str
) -> None:
    model = tmp_path / "weights.pt"
    torch.save(saved(), model)
    message = _convert(model, tmp_path / "out.mlpackage")["message"]
    assert message.startswith(f"{model}: saved with torch.save, it holds weights {what}")
    assert "model.load_state_dict(...)" in message
    assert all(how in message for how in HOW)


def test_the_legacy_torch_save_format_is_told_apart_too(tmp_path: Path) -> None:
    model = tmp_path / "legacy.pt"
    torch.save(Tiny(), model, _use_new_zipfile_serialization=False)
    with pytest.raises(errors.ConversionError, match=r"holds a whole pickled module \(.*Tiny\)"):
        saved_format(model)


def test_a_file_that_is_no_model_says_so(tmp_path: Path) -> None:
    model = tmp_path / "notes.pt"
    model.write_text("def f(x):\n    return x\n")
    with pytest.raises(errors.ConversionError, match=r"notes\.pt: not a saved PyTorch model"):
        saved_format(model)


def test_torchscript_and_exported_programs_are_told_by_their_contents(tmp_path: Path) -> None:
    """By what the file holds, not its suffix: an ExportedProgram saved as .pt loads."""
    from anekit.frontends.pytorch import load_saved

    example = (torch.zeros(1, 4),)
    scripted, exported = tmp_path / "scripted.pt2", tmp_path / "exported.pt"
    torch.jit.trace(Tiny(), example).save(str(scripted))  # type: ignore[no-untyped-call]
    torch.export.save(torch.export.export(Tiny(), example), str(exported))
    assert saved_format(scripted) == "torchscript"
    assert saved_format(exported) == "exported"
    assert isinstance(load_saved(exported), torch.export.ExportedProgram)
