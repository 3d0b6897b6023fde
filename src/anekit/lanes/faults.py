"""Fault injection for lane workers, from ``ANEKIT_FAULT``.

``ANEKIT_FAULT=LANE:FAULT[,LANE:FAULT...]`` where FAULT is one of

- ``load``: the worker dies while loading;
- ``batch:N``: the worker dies (as with kill -9) on its N-th batch;
- ``kill-on:ID``: the worker dies on every batch holding token id ID (a chunk
  that kills the driver, whichever worker tries it);
- ``hang:MS``: every batch takes MS milliseconds longer;
- ``poison:nan`` / ``poison:zero``: every vector is NaN / zero (admission refuses it);
- ``nan-after:N``: vectors are NaN from the N-th batch on (after admission);
- ``malformed:N``: the N-th reply is not a valid frame.

Only the named lane is affected; the tests use it to prove that no fault loses a chunk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from anekit.errors import LaneError

VARIABLE = "ANEKIT_FAULT"
#: The faults that take a number, and the :class:`Faults` field each sets.
_NUMBERED = {
    "batch": "die_at",
    "kill-on": "kill_on",
    "hang": "hang_ms",
    "nan-after": "nan_after",
    "malformed": "malformed_at",
}


@dataclass(frozen=True)
class Faults:
    """The faults one lane should show."""

    load: bool = False
    die_at: int | None = None
    kill_on: int | None = None
    hang_ms: int = 0
    poison: str | None = None
    nan_after: int | None = None
    malformed_at: int | None = None


def parse(text: str | None, lane: str) -> Faults:
    """The faults ``text`` (the variable's value) asks of ``lane``."""
    found: dict[str, object] = {}
    for item in (part.strip() for part in (text or "").split(",")):
        name, _, spec = item.partition(":")
        if name != lane:
            continue
        kind, _, argument = spec.partition(":")
        try:
            if kind == "load":
                found["load"] = True
            elif kind == "poison" and argument in ("nan", "zero"):
                found["poison"] = argument
            else:
                found[_NUMBERED[kind]] = int(argument)
        except (KeyError, ValueError):
            raise LaneError(f"{VARIABLE}: cannot read {item!r}; see anekit.lanes.faults") from None
    return Faults(**found)  # type: ignore[arg-type]


def from_environment(lane: str) -> Faults:
    return parse(os.environ.get(VARIABLE), lane)
