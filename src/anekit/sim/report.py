"""The numerics report of a simulator run: per-op ranges, inf/NaN, ANE cliffs.

Every run is labelled ``simulated``: these are properties of the program's fp16
arithmetic as modelled here, not measurements of a Neural Engine.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anekit import config
from anekit.errors import NumericsError, NumericsWarning
from anekit.ops import hazards

#: The rules a report's warnings name: the hazard records of :mod:`anekit.ops.hazards`
#: (one registry with the placement rules), each with its number, source and fix.
RULES = hazards.RULES


@dataclass(frozen=True)
class OpStats:
    """What one op's float output looked like."""

    name: str
    op_type: str
    shape: tuple[int, ...]
    max_abs: float
    nonfinite: int
    location: str | None
    #: The value every element holds, when the output (more than one element) ended
    #: constant: 0.0 is an output zeroed (``x / sqrt(inf)``, a ReLU of all negatives).
    constant: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.name,
            "type": self.op_type,
            "shape": list(self.shape),
            "max_abs": self.max_abs,
            "nonfinite": self.nonfinite,
            "location": self.location,
            "constant": self.constant,
        }


def constant_of(shape: tuple[int, ...], high: float, low: float) -> float | None:
    """The value of an output whose largest and smallest elements are ``high`` and
    ``low``, when it has more than one element and they are equal and finite."""
    size = 1
    for dim in shape:
        size *= dim
    if size > 1 and high == low and np.isfinite(high):
        return float(high) + 0.0  # -0.0 reads as 0
    return None


@dataclass(frozen=True)
class NumericsFinding:
    """A rule that fired on one op."""

    rule: str
    op: str
    op_type: str
    message: str
    location: str | None

    def __str__(self) -> str:
        return f"[{self.rule}] {_op_place(self.op, self.op_type, self.location)}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "op": self.op,
            "type": self.op_type,
            "message": self.message,
            "location": self.location,
        }


@dataclass
class NumericsReport:
    """Per-op statistics and warnings of one simulated run."""

    mode: str
    accumulation: str
    function: str
    ops: list[OpStats] = field(default_factory=list)
    warnings: list[NumericsFinding] = field(default_factory=list)
    first_nonfinite: OpStats | None = None
    simulated: bool = True

    @property
    def ok(self) -> bool:
        """No inf/NaN produced and no warning raised."""
        return self.first_nonfinite is None and not self.warnings

    def stats(self, op_name: str) -> OpStats:
        """The statistics of the op called ``op_name``."""
        for item in self.ops:
            if item.name == op_name:
                return item
        raise KeyError(op_name)

    def warnings_for(self, rule: str) -> list[NumericsFinding]:
        """The warnings of ``rule``, an id or a retired alias of one
        (``ane.attention_score_size`` is ``attention.score_size``)."""
        wanted = hazards.canonical(rule)
        return [warning for warning in self.warnings if warning.rule == wanted]

    def summary(self) -> str:
        """One paragraph: mode, largest magnitude, first inf/NaN, warnings."""
        peak = max(self.ops, key=lambda item: item.max_abs, default=None)
        lines = [
            f"simulated ({self.mode} numerics, {self.accumulation} accumulation) over "
            f"{len(self.ops)} ops of function {self.function!r}"
        ]
        if peak is not None:
            lines.append(f"largest |value|: {peak.max_abs:.6g} at {peak.name} ({peak.op_type})")
        if self.first_nonfinite is not None:
            first = self.first_nonfinite
            place = _op_place(first.name, first.op_type, first.location)
            lines.append(f"first inf/NaN: {place}, {first.nonfinite} non-finite values")
        else:
            lines.append("no inf or NaN produced")
        lines.extend(f"warning {warning}" for warning in self.warnings)
        return "\n".join(lines)

    def overflow_origin(self) -> str | None:
        """Where the run first overflowed fp16: the first op that produced inf/NaN,
        else the first op whose internals overflowed (a norm's variance); None if
        nothing overflowed."""
        if self.first_nonfinite is not None:
            first = self.first_nonfinite
            return _op_place(first.name, first.op_type, first.location) + " produced inf/NaN"
        for finding in self.warnings_for("sim.internal_overflow"):
            return _op_place(finding.op, finding.op_type, finding.location) + " overflowed fp16"
        return None

    def output_problems(self, outputs: Mapping[str, Any]) -> list[str]:
        """What is garbage in this run's ``outputs`` (by name), naming the op where it
        started (see :func:`output_problems`)."""
        return output_problems(outputs, self.overflow_origin())

    def to_json(self) -> dict[str, Any]:
        return {
            "simulated": self.simulated,
            "mode": self.mode,
            "accumulation": self.accumulation,
            "function": self.function,
            "first_nonfinite": self.first_nonfinite and self.first_nonfinite.to_json(),
            "warnings": [warning.to_json() for warning in self.warnings],
            "ops": [item.to_json() for item in self.ops],
        }


def output_problems(outputs: Mapping[str, Any], origin: str | None = None) -> list[str]:
    """What is garbage in ``outputs`` (by name): inf/NaN in an output; with ``origin``
    (where a run overflowed, :meth:`NumericsReport.overflow_origin`) also a float output
    that is all zeros or constant after it (``x / sqrt(inf)`` is 0), or, when the
    outputs look fine, the overflow itself (some rows zeroed, say). Empty when nothing
    is."""
    problems: list[str] = []
    for name, value in outputs.items():
        array = np.asarray(value)
        if array.dtype.kind != "f" or array.size == 0:
            continue
        bad = int(array.size - np.count_nonzero(np.isfinite(array)))
        if bad:
            problems.append(
                f"output {name!r} holds {bad} inf/NaN value{'s' if bad != 1 else ''}"
                + (f": {origin}" if origin else "")
            )
        elif origin is not None and array.size > 1 and np.ptp(array) == 0:
            what = "all zeros" if not array.flat[0] else f"constant ({array.flat[0]:g})"
            problems.append(f"output {name!r} is {what} because {origin}")
    if origin is not None and not problems:
        problems.append(f"{origin}; the outputs are finite but computed from it")
    return problems


def _op_place(op: str, op_type: str, location: str | None) -> str:
    return f"{op} ({op_type})" + (f" at {location}" if location else "")


def alarm(problems: list[str], *, strict: bool | None = None, stacklevel: int = 2) -> None:
    """Warn with a :class:`~anekit.errors.NumericsWarning` listing ``problems``, or
    raise :class:`~anekit.errors.NumericsError` when ``strict`` (None: the
    ``ANEKIT_STRICT_NUMERICS`` environment variable decides)."""
    if not problems:
        return
    message = "simulated fp16 numerics: " + "; ".join(problems)
    if strict if strict is not None else config.strict_numerics():
        raise NumericsError(message)
    warnings.warn(message, NumericsWarning, stacklevel=stacklevel + 1)
