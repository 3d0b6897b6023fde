"""The exception hierarchy of anekit.

Every error anekit raises on purpose is an :class:`AnekitError`. Each class also
subclasses the builtin exception that fits it (``TypeError``, ``ValueError``, ...),
so ``except TypeError`` clauses written for NumPy keep working. Messages say what
was wrong, where (the user's ``file:line`` for tracing errors, the op name for
program errors) and what to do.

The class name is the stable error code used in ``--json`` output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anekit.trace.source import SourceLocation

__all__ = [
    "AnekitError",
    "BackendUnavailableError",
    "ConcretizationError",
    "DynamicShapeError",
    "EmbeddingFailed",
    "InPlaceWriteError",
    "LaneError",
    "NumericsError",
    "NumericsWarning",
    "PlacementError",
    "ProbeError",
    "ProgramError",
    "SearchError",
    "ShapeError",
    "TraceError",
    "UnsupportedDtypeError",
    "UnsupportedFunctionError",
    "UnsupportedOpError",
]


class AnekitError(Exception):
    """Base class of every error anekit raises on purpose."""

    @property
    def code(self) -> str:
        """Stable machine-readable code: the class name."""
        return type(self).__name__


class TraceError(AnekitError, TypeError):
    """Tracing a NumPy function failed; names the construct and the user's line.

    ``location`` is the first stack frame outside anekit and NumPy, ``hint`` says
    how to rewrite the code so that it traces.
    """

    def __init__(
        self,
        message: str,
        *,
        location: SourceLocation | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        text = self.message
        if self.location is not None:
            text += f"\n  at {self.location.describe()}"
            if self.location.code:
                text += f"\n      {self.location.code}"
        if self.hint:
            text += f"\n  fix: {self.hint}"
        return text


class ConcretizationError(TraceError):
    """A concrete value was needed from a traced one.

    Raised for Python ``if``/``while``/``and``/``or``, ``bool()``, ``int()``,
    ``float()``, ``np.asarray()`` and ``.item()`` on a traced value: while tracing
    the value is symbolic. Use ``np.where(cond, a, b)`` to select elementwise.
    """


class DynamicShapeError(TraceError):
    """An output shape would depend on input values (``x[x > 0]``, ``np.nonzero``).

    ANE programs have static shapes; compute a mask and use ``np.where`` instead.
    """


class ShapeError(TraceError, ValueError):
    """Shapes or axes that NumPy itself would refuse (bad reshape, axis out of range,
    non-broadcastable operands, index out of bounds), found while tracing."""


class InPlaceWriteError(TraceError):
    """An in-place write that tracing cannot represent exactly.

    ``x[i] = v`` and in-place operators on arrays that share memory with a view
    are refused rather than traced into a graph that could differ from NumPy.
    """


class UnsupportedFunctionError(TraceError):
    """A NumPy function, ufunc or method the tracer does not implement."""


class UnsupportedDtypeError(TraceError):
    """A dtype Core ML programs cannot carry (float64 inputs, complex, strings...)."""


class ProgramError(AnekitError, ValueError):
    """A MIL program is invalid or cannot be saved; names the op or the path."""


class UnsupportedOpError(AnekitError, NotImplementedError):
    """A MIL op that an anekit component (simulator, emitter) does not implement."""


class BackendUnavailableError(AnekitError, RuntimeError):
    """No backend on this machine can run the program; says which would and where."""


class PlacementError(AnekitError, ValueError):
    """Placement analysis could not read or analyse a program."""


class ProbeError(AnekitError, ValueError):
    """An op probe that cannot run, or a probe report that cannot be read or applied."""


class PassError(AnekitError, ValueError):
    """An ANE rewrite pass is unknown, or left an invalid program (names the pass)."""


class ConversionError(AnekitError, ValueError):
    """A PyTorch model could not be converted; names the model and the failing step."""


class ModelError(AnekitError, ValueError):
    """A model folder is missing, incomplete or not a supported encoder; names the file."""


class LaneError(AnekitError, RuntimeError):
    """An accelerator lane failed to start, pass admission or answer in time."""


class EmbeddingFailed(LaneError):
    """Some chunks could not be embedded (a chunk that kills every worker that tries
    it); the rest were. ``failed`` maps each failed chunk's index to why; ``vectors``
    holds every vector, NaN in the failed chunks' rows."""

    def __init__(self, failed: dict[int, str], vectors: Any) -> None:
        listed = "; ".join(f"chunk {index}: {why}" for index, why in list(failed.items())[:5])
        more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
        super().__init__(f"{len(failed)} chunk(s) not embedded: {listed}{more}")
        self.failed = dict(failed)
        self.vectors = vectors


class MissingExtraError(AnekitError, ImportError):
    """A part of anekit whose extra is not installed (``pip install 'anekit[search]'``);
    the message names the extra, the missing distributions and the command."""


class SearchError(AnekitError, ValueError):
    """Code search cannot go on: a path outside the indexed root, no store found, a store
    of a newer schema or locked by another writer; the message names the path."""


class DamagedStoreError(SearchError):
    """A code search store whose database SQLite finds corrupt (or not a database at all).
    ``anekit index`` rebuilds it from the files; readers say so."""


class NumericsError(AnekitError, FloatingPointError):
    """A simulated run produced garbage and strict numerics were asked for
    (``strict=True`` or ``ANEKIT_STRICT_NUMERICS=1``); the message is the
    :class:`NumericsWarning`'s."""


class NumericsWarning(UserWarning):
    """Garbage from a simulated run: inf/NaN in an output, an output that an fp16
    overflow upstream made all zeros or constant, or an input that became inf when
    cast to fp16. Names the first op that overflowed and the user's line."""
