"""What a backend is given to load: :class:`LoadRequest`.

A backend never sees the :class:`~anekit.program.CompiledProgram` it runs for; it gets
the MIL program, the function to run, the I/O contract, and two ways to have the program
as a package holds it (:attr:`LoadRequest.lowered`, :attr:`LoadRequest.save`), which the
caller makes lazy (lowering and saving convert with coremltools: seconds to minutes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from anekit.specs import IOContract

if TYPE_CHECKING:
    from anekit._coremltools import Program

__all__ = ["LoadRequest"]


@dataclass(frozen=True)
class LoadRequest:
    """A program to load on a backend, and everything a backend may read about it.

    - ``program``, ``function``: the MIL program as traced (NumPy dtypes and semantics)
      or as read back from a package (``converted``), and the function of it to run.
    - ``contract``: the function's inputs and outputs as stored and as callers see them.
      Feeds reach :meth:`Session.predict` already padded to the stored shapes.
    - ``lowered()``: the program as it goes into a package (coremltools' pipeline at fp16,
      the weights compressed as ``compression`` says), one function named ``main``; the
      ``program`` itself when ``converted``.
    - ``save(path)``: writes that package as an ``.mlpackage`` at ``path`` (returns it).
    - ``package``: the package the program was read from, if any (load it as it is, the
      ``function`` of it).
    - ``compression``: the weight compression's name (``int8``, ``palettize6``...), None
      for fp16 weights.
    - ``source``: where the program came from, for messages.
    """

    program: Program
    function: str
    contract: IOContract
    lowered: Callable[[], Program]
    save: Callable[[Path], Path]
    source: str = "<program>"
    converted: bool = False
    package: Path | None = None
    compression: str | None = None

    def __post_init__(self) -> None:
        if self.function not in self.program.functions:
            raise ValueError(
                f"the program has no function {self.function!r}; "
                f"it has {', '.join(self.program.functions)}"
            )
