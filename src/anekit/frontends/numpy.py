"""The NumPy frontend: trace a function on example inputs, run the ANE passes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anekit.package.compression import Compression
from anekit.program import CompiledProgram, deployment_target_from_name, finalize
from anekit.trace import trace_function


def compile_function(
    fn: Callable[..., Any],
    *example_args: Any,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    deployment_target: str = "macOS15",
    passes: bool = True,
    skip_passes: Sequence[str] = (),
    extra_passes: Sequence[str] = (),
    pass_options: Mapping[str, Mapping[str, Any]] | None = None,
    compress: str | Compression | None = None,
) -> CompiledProgram:
    """``anekit.compile``: trace ``fn`` on inputs shaped like ``example_args`` into a
    Core ML MIL program.

    ``example_args`` are NumPy arrays (float16, float32, or int32 for ids) or
    :class:`TensorSpec` objects; only their shapes and dtypes matter. Arrays the
    function closes over become constants. Returns a :class:`CompiledProgram` that
    can be saved as ``.mlpackage``, printed, and called.

    The ANE passes (``anekit.passes.ANE_PIPELINE``) rewrite the traced program
    unless ``passes=False``; ``skip_passes`` names passes to leave out and
    ``extra_passes`` optional ones to add (``gelu_tanh``); ``pass_options`` sets pass
    options (``{"prescale_query": {"logit_clamp": 50.0}}``). What they changed is in
    ``program.pass_report``.

    ``compress`` stores the package's weights compressed (``"int8"``, ``"int4-b32"``,
    ``"palettize4"``, ``"palettize4-g16"``, ...: :mod:`anekit.package.compression`), each
    weight checked against an error bound and kept fp16 when over it
    (``program.compression_report`` once converted); the simulator then runs the
    decompressed weights, as the package holds them.

    >>> import numpy as np, anekit
    >>> prog = anekit.compile(lambda x: np.tanh(x) * 2, np.zeros((4, 32), np.float16))
    >>> [spec.describe() for spec in prog.output_specs]
    ['output: float16[4, 32]']
    """
    traced = trace_function(
        fn,
        example_args,
        input_names=input_names,
        output_names=output_names,
        target=deployment_target_from_name(deployment_target),
    )
    return finalize(
        traced.program,
        function_name=traced.function_name,
        source=traced.source,
        deployment_target=deployment_target,
        output_tree=traced.output_tree,
        before=(*traced.input_specs, *traced.output_specs),
        locations=traced.locations,
        passes=passes,
        skip_passes=skip_passes,
        extra_passes=extra_passes,
        pass_options=pass_options,
        compress=compress,
    )


__all__ = ["compile_function"]
