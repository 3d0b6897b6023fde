"""anekit: put NumPy functions and PyTorch models on the Apple Neural Engine."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

# Imported first: it quiets the warnings coremltools logs at import on Linux.
from anekit import _runtime as _runtime
from anekit._version import __version__

if TYPE_CHECKING:
    from anekit.embedder import Embedder
    from anekit.program import CompiledProgram
    from anekit.specs import TensorSpec

__all__ = [
    "CompiledProgram",
    "Embedder",
    "TensorSpec",
    "__version__",
    "compile",
    "convert",
    "load",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: coremltools (behind CompiledProgram and TensorSpec) takes
    # seconds and hundreds of megabytes to import, which lane workers and quick
    # commands should not pay for; Embedder pulls in tokenizers and safetensors.
    if name == "CompiledProgram":
        from anekit.program import CompiledProgram

        return CompiledProgram
    if name == "TensorSpec":
        from anekit.specs import TensorSpec

        return TensorSpec
    if name == "Embedder":
        from anekit.embedder import Embedder

        return Embedder
    raise AttributeError(f"module 'anekit' has no attribute {name!r}")


def compile(
    fn: Callable[..., Any],
    *example_args: Any,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    deployment_target: str = "macOS15",
    passes: bool = True,
    skip_passes: Sequence[str] = (),
    extra_passes: Sequence[str] = (),
    pass_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> CompiledProgram:
    """Trace ``fn`` on inputs shaped like ``example_args`` into a Core ML MIL program.

    ``example_args`` are NumPy arrays (float16, float32, or int32 for ids) or
    :class:`TensorSpec` objects; only their shapes and dtypes matter. Arrays the
    function closes over become constants. Returns a :class:`CompiledProgram` that
    can be saved as ``.mlpackage``, printed, and called.

    The ANE passes (``anekit.passes.ANE_PIPELINE``) rewrite the traced program
    unless ``passes=False``; ``skip_passes`` names passes to leave out and
    ``extra_passes`` optional ones to add (``gelu_tanh``); ``pass_options`` sets pass
    options (``{"prescale_query": {"logit_clamp": 50.0}}``). What they changed is in
    ``program.pass_report``.

    >>> import numpy as np, anekit
    >>> prog = anekit.compile(lambda x: np.tanh(x) * 2, np.zeros((4, 32), np.float16))
    >>> [spec.describe() for spec in prog.output_specs]
    ['output: float16[4, 32]']
    """
    from anekit.frontends.numpy import compile_function

    return compile_function(
        fn,
        *example_args,
        input_names=input_names,
        output_names=output_names,
        deployment_target=deployment_target,
        passes=passes,
        skip_passes=skip_passes,
        extra_passes=extra_passes,
        pass_options=pass_options,
    )


def convert(
    module: Any,
    example_inputs: Any,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    method: str = "trace",
    deployment_target: str = "macOS15",
    passes: bool = True,
    skip_passes: Sequence[str] = (),
    extra_passes: Sequence[str] = (),
    pass_options: Mapping[str, Mapping[str, Any]] | None = None,
    float_io: str = "float16",
) -> CompiledProgram:
    """Convert a PyTorch model (``pip install 'anekit[torch]'``) at the example inputs'
    static shapes, then run the ANE passes as :func:`compile` does.

    ``module`` is a ``torch.nn.Module`` (a Hugging Face BERT-family model is adapted
    automatically), TorchScript or an ``ExportedProgram``; ``method`` is ``"trace"``
    (``torch.jit.trace``) or ``"export"`` (``torch.export`` + ``run_decompositions``).
    Float inputs and outputs are ``float_io`` (float16: what the ANE reads and writes).
    """
    from anekit.frontends.pytorch import convert as convert_torch

    return convert_torch(
        module,
        example_inputs,
        input_names=input_names,
        output_names=output_names,
        method=method,
        deployment_target=deployment_target,
        passes=passes,
        skip_passes=skip_passes,
        extra_passes=extra_passes,
        pass_options=pass_options,
        float_io=float_io,
    )


def load(path: str | os.PathLike[str], *, function: str | None = None) -> CompiledProgram:
    """Read an ``.mlpackage`` (or mlprogram ``.mlmodel``) back into a MIL program.

    Works on any OS (coremltools' milproto loader); ``function`` picks a function
    of a multifunction package (default: the package's default function). The
    result runs in the simulator off macOS and on Core ML on a Mac.
    """
    from anekit.frontends.mlpackage import load_package

    return load_package(path, function=function)
