"""What every anekit pass shares: registration under ``ane::``, and a record of what it changed.

A pass is a coremltools graph pass (``AbstractGraphPass``) registered with
``register_pass(namespace="ane")``, so its id (``ane::no_tile``) works in
coremltools' own pipelines too. Subclasses implement :meth:`AnePass.rewrite` for
one function and call :meth:`AnePass.changed` for every rewrite and
:meth:`AnePass.note` for anything the user should know (an epsilon raised).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from coremltools.converters.mil.mil.passes.graph_pass import AbstractGraphPass

from anekit import _miltext
from anekit.passes.graph import remove_dead_code


@dataclass
class PassResult:
    """What one pass did to a program."""

    name: str
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.name, "changes": list(self.changes), "notes": list(self.notes)}


@dataclass
class PassReport:
    """Every pass a pipeline ran, in order, with what it changed."""

    results: list[PassResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def result(self, name: str) -> PassResult:
        """The result of pass ``name`` (``ane::no_tile`` or just ``no_tile``)."""
        for item in self.results:
            if item.name == name or item.name.split("::")[-1] == name:
                return item
        raise KeyError(name)

    @property
    def changed(self) -> bool:
        return any(item.changed for item in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"passes": [item.to_json() for item in self.results], "skipped": self.skipped}

    def summary(self) -> str:
        """One line per pass: how many rewrites, and its notes (the same note on several
        ops once, with a count)."""
        lines = []
        for item in self.results:
            count = len(item.changes)
            what = f"{count} rewrite{'s' if count != 1 else ''}" if count else "no change"
            lines.append(f"{item.name}: {what}")
            grouped: dict[str, list[str]] = {}
            for note in item.notes:
                where, _, text = note.partition(": ")
                grouped.setdefault(text or note, []).append(where)
            for text, places in grouped.items():
                if len(places) == 1:
                    lines.append(f"  note: {places[0]}: {text}" if text else f"  note: {places[0]}")
                else:
                    lines.append(f"  note ({len(places)} ops, e.g. {places[0]}): {text}")
        lines += [f"{name}: skipped" for name in self.skipped]
        return "\n".join(lines)


class AnePass(AbstractGraphPass):  # type: ignore[misc]
    """Base class of anekit's passes: one function at a time, recording its changes."""

    #: Whether the pass runs in the default pipeline.
    default: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.result = PassResult(f"ane::{type(self).__name__}")

    def apply(self, prog: Any) -> None:
        for function in prog.functions.values():
            with function:
                self.rewrite(function)
        if self.result.changed:
            remove_dead_code(prog)

    def rewrite(self, function: Any) -> None:
        raise NotImplementedError

    def changed(self, op: Any, what: str) -> None:
        where = _miltext.op_location(op)
        self.result.changes.append(
            f"{op.name} ({op.op_type}): {what}" + (f" [{where}]" if where else "")
        )

    def note(self, text: str) -> None:
        self.result.notes.append(text)
