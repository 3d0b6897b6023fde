"""``anekit demo``: trace, save and simulate the feed-forward block of seed 003."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from anekit import config
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


@click.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write ffn.mlpackage (default: $ANEKIT_HOME/demo).",
)
@click.option(
    "--no-model",
    is_flag=True,
    help="Skip the embedding model's package (built once, about a minute).",
)
@with_json
def demo(out_dir: Path | None, no_model: bool, as_json: bool) -> None:
    """Trace the LLaMA-style FFN block (seed 003) and save it as an .mlpackage."""
    from anekit import demo as demo_module
    from anekit.backends import available_backends

    out = out_dir if out_dir is not None else config.home() / "demo"
    if not as_json:
        stderr.print(
            f"Tracing the feed-forward block (RMSNorm, SwiGLU, residual; "
            f"D={demo_module.D_MODEL}, H={demo_module.D_HIDDEN}, T={demo_module.TOKENS}, fp16)..."
        )
    result = demo_module.run(out)
    backends = available_backends()
    model = None
    if not no_model:
        if not as_json:
            stderr.print("Building the all-MiniLM-L6-v2 package (cached after the first run)...")
        model = demo_module.run_model(
            progress=None if as_json else lambda message: stderr.print(esc(message))
        )
    if as_json:
        payload = result.to_json()
        payload["backends"] = backends
        payload["model"] = model.to_json() if model is not None else None
        emit_json(payload)
        return

    program = result.program
    stdout.print(
        f"\n[bold]{esc(program.source)}[/]  ->  MIL program, opset {program.deployment_target}\n"
    )
    columns = ("", "name", "shape", "dtype")
    io_table = titled_table("Inputs and outputs", columns, overflow="ellipsis")
    for kind, specs in (("input", program.input_specs), ("output", program.output_specs)):
        for spec in specs:
            io_table.add_row(
                kind, esc(spec.name), " x ".join(map(str, spec.shape)), spec.dtype.name
            )
    stdout.print(io_table)

    ops_table = titled_table("Ops", ("#", "op", "type", "output", "traced from"))
    compute = [op for op in program.ops() if op.op_type != "const"]
    for index, op in enumerate(compute, 1):
        ops_table.add_row(
            str(index),
            esc(op.name),
            esc(op.op_type),
            esc(", ".join(op.outputs)),
            esc(op.location or ""),
        )
    stdout.print(ops_table)
    if program.pass_report is not None:
        changed = [item for item in program.pass_report.results if item.changed]
        stdout.print(
            "ANE passes: "
            + (
                "; ".join(f"{esc(item.name)} ({len(item.changes)})" for item in changed)
                or "nothing to rewrite"
            )
        )
    weights = program.weights()
    described = ", ".join(f"{w.name} {' x '.join(map(str, w.shape))}" for w in weights)
    stdout.print(
        f"{len(compute)} compute ops; {len(weights)} weight tensors "
        f"({format_bytes(sum(w.nbytes for w in weights))}): {esc(described)}"
    )
    stdout.print(
        f"\nSaved [bold]{esc_path(result.package)}[/] ({format_bytes(result.package_bytes)}; "
        f"traced in {result.trace_seconds * 1000:.0f} ms, saved in {result.save_seconds:.1f} s)"
    )
    fidelity = result.fidelity
    stdout.print(
        f"\n[bold]Simulated[/] with the ANE's fp16 numerics (not a Neural Engine measurement): "
        f"max relative error {fidelity.max_relative_error:.2e}, min row cosine "
        f"{fidelity.min_cosine:.6f} against NumPy float64 ({fidelity.seconds * 1000:.0f} ms)"
    )
    for line in fidelity.report.summary().splitlines()[1:]:
        stdout.print(f"  {line}", markup=False)
    stdout.print(f"Backends that can run it here: {', '.join(backends)}")
    if model is not None:
        _print_model(model)


def _print_model(model: Any) -> None:
    stdout.print(
        f"\n[bold]{esc_path(model.package)}[/] ({format_bytes(model.package_bytes)}): "
        "all-MiniLM-L6-v2, one function per bucket (batch 4)"
    )
    for name, (ane, total) in model.functions.items():
        stdout.print(f"  {esc(name)}: {ane} of {total} compute ops expected on the ANE (a14)")
    stdout.print(
        "  every family: "
        + ("all compute ops on the ANE" if model.families_all_on_ane else "some fall back")
        + " (see `anekit doctor`)"
    )
    stdout.print(
        f"[bold]Simulated[/] with ANE fp16 numerics (not a Neural Engine measurement): "
        f"min cosine {model.min_cosine:.6f} to the fp32 reference over {model.chunks} "
        f"known-answer chunks ({model.seconds:.1f} s)"
    )
