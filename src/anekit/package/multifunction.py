"""Several functions saved as one multifunction ``.mlpackage`` with shared weights.

Static shapes serve variable sizes through buckets: one function per shape, all in one
package, whose identical weights coremltools stores once (``MultiFunctionDescriptor``
and ``save_multifunction``; ane-knowledge.md, Apple's "Multifunction models"). Weights
are compressed per function before the functions are combined, as coremltools'
documentation advises, so that the combined package still shares them.

>>> import numpy as np, anekit
>>> from anekit.package import save_functions
>>> buckets = {f"seq{n}": anekit.compile(np.tanh, np.zeros((1, 64, 1, n), np.float16))
...            for n in (128, 256)}
>>> save_functions(buckets, "tanh.mlpackage", default="seq128")  # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from anekit.errors import ProgramError
from anekit.package.compression import METADATA_KEY, Compression, CompressionReport, compress_model
from anekit.package.saving import IO_WIDTHS_KEY, package_target, record_io_widths, save_package


class SavableFunction(Protocol):
    """What a function must offer: a Core ML model of itself (a ``CompiledProgram``)."""

    @property
    def io_widths(self) -> dict[str, int]:
        """Inputs and outputs a pass widened: name -> the width callers see."""
        ...

    def to_mlmodel(self) -> Any: ...


def save_functions(
    functions: Mapping[str, SavableFunction] | Iterable[tuple[str, SavableFunction]],
    path: str | Path,
    *,
    default: str | None = None,
    weights: str | Compression = "fp16",
    metadata: Mapping[str, str] | None = None,
    description: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Save ``functions`` (name -> ``CompiledProgram``, or ``(name, program)`` pairs, which
    may come from a generator: each is converted and let go before the next is made) as
    one ``.mlpackage`` at ``path``.

    Identical weights are stored once. ``default`` names the default function (the
    first otherwise); ``weights`` is ``fp16``, ``int8`` or ``palettize4``/``6``/``8``;
    ``metadata`` adds user-defined metadata. The package is written next to ``path``
    and moved into place whole (:func:`~anekit.package.saving.save_package`), so a
    reader never sees half a package; each function's I/O widths go under
    :data:`~anekit.package.saving.IO_WIDTHS_KEY`.
    """
    target = package_target(path)
    compression = Compression.parse(weights)
    pairs = functions.items() if isinstance(functions, Mapping) else functions
    from anekit._coremltools import ct, quiet_passes, shared_consts

    report = progress or (lambda message: None)
    with tempfile.TemporaryDirectory(prefix="anekit-package-") as scratch:
        descriptor = ct.utils.MultiFunctionDescriptor()
        names: list[str] = []
        widths: dict[str, dict[str, int]] = {}
        reports: dict[str, CompressionReport] = {}
        for name, function in pairs:
            if name in names:
                raise ProgramError(f"two functions are named {name!r}")
            report(f"function {name}: saving ({weights})")
            single = Path(scratch) / f"f{len(names)}.mlpackage"
            model, reports[name] = compress_model(function.to_mlmodel(), compression)
            if compression is not None:
                report(f"function {name}: {reports[name].summary()}")
            model.save(str(single))
            descriptor.add_function(
                str(single), src_function_name="main", target_function_name=name
            )
            names.append(name)
            widths[name] = dict(function.io_widths)
        if not names:
            raise ProgramError("save_functions needs at least one function")
        chosen = default if default is not None else names[0]
        if chosen not in names:
            raise ProgramError(f"default function {chosen!r} is not among {', '.join(names)}")
        descriptor.default_function_name = chosen
        combined = Path(scratch) / "combined.mlpackage"
        report(f"combining {len(names)} functions (shared weights)")
        with quiet_passes(), shared_consts():
            ct.utils.save_multifunction(descriptor, str(combined))
        package = ct.models.MLModel(str(combined), skip_model_load=True)
        if compression is not None:
            package.user_defined_metadata[METADATA_KEY] = reports[names[0]].metadata()
        record_io_widths(package.user_defined_metadata, widths)
        for key, value in (metadata or {}).items():
            package.user_defined_metadata[key] = value
        if description is not None:
            package.short_description = description
        save_package(package, target)
    return target


__all__ = ["IO_WIDTHS_KEY", "SavableFunction", "save_functions"]
