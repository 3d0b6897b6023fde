"""Import PyTorch models: ``torch.jit.trace`` or ``torch.export``, then coremltools'
converter into MIL (``convert_to="milinternal"``), then anekit's ANE passes.

Needs the ``torch`` extra (``pip install anekit[torch]``). Hugging Face BERT-family
models are wrapped by :mod:`anekit.frontends.huggingface` first, because
transformers 5 builds its attention mask with ops coremltools cannot convert.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anekit._coremltools import ct, quiet_passes
from anekit.errors import ConversionError
from anekit.frontends.saved_torch import saved_format
from anekit.program import CompiledProgram, deployment_target_from_name, finalize

_log = logging.getLogger(__name__)

METHODS = ("trace", "export")


def _torch() -> Any:
    try:
        import torch
    except ImportError as error:
        raise ConversionError(
            "anekit.convert needs PyTorch: pip install 'anekit[torch]'"
        ) from error
    return torch


def _as_tensors(example_inputs: Any) -> tuple[Any, ...]:
    torch = _torch()
    items = example_inputs if isinstance(example_inputs, tuple | list) else (example_inputs,)
    tensors = []
    for index, item in enumerate(items):
        if isinstance(item, np.ndarray):
            item = torch.from_numpy(item)
        if not isinstance(item, torch.Tensor):
            raise ConversionError(
                f"example input {index} is a {type(item).__name__}; pass torch tensors or "
                "NumPy arrays with the exact shapes the model will run at"
            )
        tensors.append(item)
    return tuple(tensors)


def _numpy_dtype(tensor: Any, float_io: np.dtype[Any]) -> np.dtype[Any]:
    """The Core ML input dtype for a tensor: floats as ``float_io``, integers as int32."""
    torch = _torch()
    if tensor.dtype in (torch.float16, torch.float32):
        return float_io
    if tensor.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.bool):
        return np.dtype(np.int32)
    raise ConversionError(f"inputs of dtype {tensor.dtype} are not supported by Core ML")


def _captured(module: Any, inputs: tuple[Any, ...], method: str) -> Any:
    """The model as coremltools takes it: TorchScript or an ExportedProgram."""
    torch = _torch()
    if isinstance(module, torch.jit.ScriptModule):
        return module
    if hasattr(module, "graph_module") and hasattr(module, "run_decompositions"):
        return module.run_decompositions({})  # already an ExportedProgram
    if not isinstance(module, torch.nn.Module):
        raise ConversionError(f"cannot convert a {type(module).__name__}: pass a torch.nn.Module")
    module = module.eval()
    try:
        with torch.no_grad():
            if method == "export":
                return torch.export.export(module, inputs).run_decompositions({})
            return torch.jit.trace(module, inputs, strict=False)
    except Exception as error:
        raise ConversionError(
            f"torch.{'export.export' if method == 'export' else 'jit.trace'} failed on "
            f"{type(module).__name__}: {error}"
        ) from error


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
    """``anekit.convert``: convert a PyTorch model (``pip install 'anekit[torch]'``) at the
    example inputs' static shapes, then run the ANE passes as ``anekit.compile`` does.

    ``module`` is a ``torch.nn.Module`` (a Hugging Face BERT-family model is adapted
    automatically), TorchScript or an ``ExportedProgram``; ``method`` is ``"trace"``
    (``torch.jit.trace``) or ``"export"`` (``torch.export`` + ``run_decompositions``).
    Float inputs and outputs are ``float_io`` (float16: what the ANE reads and writes).
    """
    _torch()
    from anekit.frontends import huggingface

    if method not in METHODS:
        raise ConversionError(f"method must be one of {METHODS}, got {method!r}")
    tensors = _as_tensors(example_inputs)
    source = type(module).__name__
    if float_io not in ("float16", "float32"):
        raise ConversionError(f"float_io must be float16 or float32, got {float_io!r}")
    io_dtype = np.dtype(float_io)
    if huggingface.is_bert_family(module):
        module = huggingface.BertAdapter(module)
        source = f"{source} (Hugging Face, {module.model_type})"
    if isinstance(module, huggingface.BertAdapter) and len(tensors) == 2:
        # the mask as a float input: no int->float cast inside the program
        tensors = (tensors[0], tensors[1].to(_torch().float16))
    names = list(input_names) if input_names is not None else _input_names(module, len(tensors))
    if len(names) != len(tensors):
        raise ConversionError(f"{len(names)} input names for {len(tensors)} example inputs")
    captured = _captured(module, tensors, method)
    inputs = [
        ct.TensorType(name=name, shape=tuple(tensor.shape), dtype=_numpy_dtype(tensor, io_dtype))
        for name, tensor in zip(names, tensors, strict=True)
    ]
    outputs = (
        [ct.TensorType(name=name, dtype=io_dtype) for name in output_names]
        if output_names
        else [ct.TensorType(dtype=io_dtype) for _ in range(_output_count(module, tensors))]
    )
    target = deployment_target_from_name(deployment_target)
    try:
        with quiet_passes():
            program = ct.convert(
                captured,
                inputs=inputs,
                outputs=outputs,
                convert_to="milinternal",
                minimum_deployment_target=target,
                compute_precision=ct.precision.FLOAT32,
            )
    except Exception as error:
        raise ConversionError(f"coremltools could not convert {source}: {error}") from error
    name = "main" if "main" in program.functions else next(iter(program.functions))
    return finalize(
        program,
        function_name=name,
        source=source,
        deployment_target=deployment_target,
        passes=passes,
        skip_passes=skip_passes,
        extra_passes=extra_passes,
        pass_options=pass_options,
    )


def _output_count(module: Any, tensors: tuple[Any, ...]) -> int:
    """How many tensors the model returns (run once on the examples)."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module) or isinstance(module, torch.jit.ScriptModule):
        return 1
    with torch.no_grad():
        result = module.eval()(*tensors)
    if isinstance(result, tuple | list):
        return len(result)
    return 1


def _input_names(module: Any, count: int) -> list[str]:
    import inspect

    signature = getattr(module, "graph_signature", None)  # an ExportedProgram
    if signature is not None and len(signature.user_inputs) == count:
        return [str(name) for name in signature.user_inputs]

    try:
        parameters = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError, AttributeError):
        parameters = []
    if len(parameters) >= count:
        return parameters[:count]
    return [f"input_{index}" for index in range(count)]


def load_saved(path: str | Path) -> Any:
    """A saved TorchScript (``torch.jit.save``) or ExportedProgram (``torch.export.save``,
    ``.pt2``) model, for ``anekit convert``; a file written by ``torch.save`` is refused
    with what it holds and how to save one of those (:mod:`anekit.frontends.saved_torch`)."""
    location = Path(path)
    form = saved_format(location)
    torch = _torch()
    try:
        if form == "exported":
            return torch.export.load(str(location))
        return torch.jit.load(str(location), map_location="cpu")
    except Exception as error:
        kind = "an ExportedProgram (.pt2)" if form == "exported" else "TorchScript"
        raise ConversionError(f"{location}: could not load it as {kind}: {error}") from error
