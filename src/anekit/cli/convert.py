"""``anekit convert``: a saved PyTorch model to an ANE-ready ``.mlpackage`` (and/or a Core
AI ``.aimodel`` of the same program)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import click

from anekit.cli._common import (
    emit_json,
    esc,
    esc_path,
    format_bytes,
    stderr,
    stdout,
    with_json,
)
from anekit.errors import ConversionError


def _input_specs(specs: tuple[str, ...]) -> tuple[list[str] | None, list[Any]]:
    """The ``--input`` specs parsed (names given to all or none): the names, or None,
    and each input's TensorSpec; checked before torch is imported."""
    from anekit.errors import ProgramError
    from anekit.frontends.function_ref import parse_shape

    names: list[str | None] = []
    parsed = []
    for text in specs:
        try:
            name, spec = parse_shape(text if ":" in text else f"{text}:float32")
        except ProgramError as error:
            raise ConversionError(str(error).replace("--shape", "--input")) from error
        names.append(name)
        parsed.append(spec)
    if any(name is None for name in names) and not all(name is None for name in names):
        raise ConversionError("--input: name every input (ids=...) or none of them")
    named = bool(names) and names[0] is not None
    return ([str(name) for name in names] if named else None), parsed


def _example_inputs(specs: tuple[str, ...], parsed: list[Any], model: Any) -> list[Any]:
    """Example tensors of the ``--input`` ``specs`` (``parsed``), or an ExportedProgram's
    own example inputs when none are given."""
    import torch

    if not specs:
        examples = getattr(model, "example_inputs", None)
        if examples is not None and examples[0]:
            return list(examples[0])
        raise ConversionError("give each model input with --input NAME=DIMS[:DTYPE]")
    tensors = []
    for text, spec in zip(specs, parsed, strict=True):
        dtype = getattr(torch, spec.dtype.name, None)
        if dtype is None:
            raise ConversionError(f"--input {text!r}: unsupported dtype {spec.dtype.name}")
        tensors.append(torch.zeros(spec.shape, dtype=dtype))
    return tensors


#: ``--to``: what is written, and the suffix ``--out`` takes for it.
TARGETS = {"coreml": ".mlpackage", "coreai": ".aimodel", "both": ".mlpackage"}


def _destination(out: Path | None, model: Path, suffix: str = ".mlpackage") -> Path:
    """Where the package goes, checked before any work: a ``suffix`` path that is not an
    existing file, below a directory that exists (or can be made) and is writable."""
    target = out if out is not None else Path.cwd() / f"{model.stem}{suffix}"
    what = f"--out {target}" if out is not None else f"{target} (the default for --out)"
    if target.suffix != suffix:
        inside = target / f"{model.stem}{suffix}"
        example = inside if target.is_dir() else target.with_suffix(suffix)
        raise ConversionError(f"{what}: a package path must end in {suffix}, e.g. {example}")
    if target.exists() and not target.is_dir():
        raise ConversionError(f"{what}: exists and is a file, not a package directory")
    ancestor = target.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConversionError(f"{what}: {ancestor} is a file, not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ConversionError(f"{what}: the directory {ancestor} is not writable")
    return target


def _pass_options(texts: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``prescale_query.logit_clamp=50`` -> {"prescale_query": {"logit_clamp": 50.0}}."""
    options: dict[str, dict[str, Any]] = {}
    for text in texts:
        key, _, value = text.partition("=")
        name, _, option = key.partition(".")
        if not value or not option:
            raise ConversionError(f"--pass-option {text!r}: expected PASS.OPTION=VALUE")
        try:
            number: Any = float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            raise ConversionError(f"--pass-option {text!r}: {value!r} is not a number") from None
        options.setdefault(name, {})[option] = number
    return options


@click.command()
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="[NAME=]DIMS[:DTYPE]",
    help="An example input, e.g. input_ids=4,256:int32 (repeatable; dtype float32 by default).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write the .mlpackage, or the .aimodel with --to coreai (default: MODEL's "
    "name in the current directory).",
)
@click.option(
    "--to",
    "to",
    type=click.Choice(list(TARGETS)),
    default="coreml",
    show_default=True,
    help="coreml: an .mlpackage; coreai: a Core AI .aimodel of the same program (macOS 27; "
    "the extra anekit[coreai]); both: the .mlpackage and the .aimodel beside it.",
)
@click.option(
    "--method",
    type=click.Choice(["trace", "export"]),
    default="trace",
    show_default=True,
    help="For a plain module: torch.jit.trace or torch.export.",
)
@click.option("--no-passes", is_flag=True, help="Skip anekit's ANE passes.")
@click.option("--skip-pass", "skip", multiple=True, help="Leave out one pass (repeatable).")
@click.option("--extra-pass", "extra", multiple=True, help="Add an optional pass, e.g. gelu_tanh.")
@click.option(
    "--pass-option",
    "pass_options",
    multiple=True,
    metavar="PASS.OPTION=VALUE",
    help="Set a pass option, e.g. prescale_query.logit_clamp=50 (repeatable).",
)
@click.option(
    "--float-io",
    type=click.Choice(["float16", "float32"]),
    default="float16",
    show_default=True,
    help="dtype of float inputs and outputs in the package.",
)
@with_json
def convert(
    model: Path,
    inputs: tuple[str, ...],
    out: Path | None,
    to: str,
    method: str,
    no_passes: bool,
    skip: tuple[str, ...],
    extra: tuple[str, ...],
    pass_options: tuple[str, ...],
    float_io: str,
    as_json: bool,
) -> None:
    """Convert a saved PyTorch MODEL (TorchScript .pt, or an ExportedProgram .pt2) at
    fixed shapes, run the ANE passes and save an .mlpackage (--to coreai: a Core AI
    .aimodel of the same program; --to both: the two).

    MODEL is told by its contents: TorchScript from torch.jit.trace(...).save or
    torch.jit.script(...).save, an ExportedProgram from torch.export.save. A file
    written by torch.save (a pickled module or a state_dict) is refused with what it
    holds and how to save one of those.

    Exit status: 0 when the package was written, 2 on errors. `anekit doctor` on
    the package then says where each op is expected to run.
    """
    from anekit.frontends.saved_torch import saved_format

    target = _destination(out, model, TARGETS[to])
    if to != "coreml":
        from anekit.package.coreai import authoring

        authoring()  # the missing extra named before torch loads
    options = _pass_options(pass_options)
    names, specs = _input_specs(inputs)
    saved_format(model)  # no such file, or a torch.save file: said before torch loads
    import anekit  # torch and coremltools: only once the arguments are good
    from anekit.analysis import analyze
    from anekit.frontends.pytorch import load_saved

    started = time.perf_counter()
    loaded = load_saved(model)
    examples = _example_inputs(inputs, specs, loaded)
    if not as_json:
        stderr.print(f"Converting {esc_path(model)} ({len(examples)} input(s))...")
    program = anekit.convert(
        loaded,
        tuple(examples),
        input_names=names,
        method=method,
        passes=not no_passes,
        skip_passes=skip,
        extra_passes=extra,
        pass_options=options,
        float_io=float_io,
    )
    package = program.save(target)  # an .aimodel with --to coreai
    asset = None
    if to == "both":
        from anekit.package.coreai import save_package_asset

        asset = save_package_asset(package, target.with_suffix(".aimodel"))
    size = _bytes(package)
    report = analyze(program)
    seconds = time.perf_counter() - started
    if as_json:
        emit_json(
            {
                "package": {"path": str(package), "bytes": size},
                "coreai": None if asset is None else {"path": str(asset), "bytes": _bytes(asset)},
                "inputs": [spec.to_json() for spec in program.input_specs],
                "outputs": [spec.to_json() for spec in program.output_specs],
                "passes": program.pass_report.to_json() if program.pass_report else None,
                "placement": {
                    function.name: {
                        family: {
                            "compute_ops": len(function.compute_ops()),
                            "ane": function.on_ane(family),
                            "transitions": function.transitions(family),
                        }
                        for family in report.families
                    }
                    for function in report.functions
                },
                "seconds": seconds,
            }
        )
        return
    for spec in program.input_specs:
        stdout.print(f"input   {esc(spec.describe())}")
    for spec in program.output_specs:
        stdout.print(f"output  {esc(spec.describe())}")
    if program.pass_report is not None:
        stdout.print("ANE passes:")
        for line in program.pass_report.summary().splitlines():
            stdout.print(f"  {line}", markup=False)
    for function in report.functions:
        for family in report.families:
            stdout.print(f"placement: {esc(function.summary(family))}")
    saved = f"[bold]{esc_path(package)}[/] ({format_bytes(size)})"
    if asset is not None:
        saved += f" and [bold]{esc_path(asset)}[/] ({format_bytes(_bytes(asset))})"
    stdout.print(
        f"\nSaved {saved} in {seconds:.1f} s; "
        f"`anekit doctor {esc_path(package)}` shows every op's expected device."
    )


def _bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())
