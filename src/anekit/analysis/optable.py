"""The op table: per MIL op and ANE family, whether Core ML can place it on the ANE.

The table is package data (``analysis/data/ops.toml``), not code; this module
reads and validates it. Verdicts: ``ane``, ``ane_if`` (with a condition id that
``anekit.analysis.rules.CONDITIONS`` checks), ``decompose`` (with the rewrite that
makes the op eligible) and ``cpu``.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from anekit.errors import PlacementError

VERDICTS: tuple[str, ...] = ("ane", "ane_if", "decompose", "cpu")
#: The verdicts that place an op on the ANE (``ane_if`` when its condition holds).
ON_ANE: tuple[str, ...] = ("ane", "ane_if")


@dataclass(frozen=True)
class Family:
    """An ANE generation the table distinguishes."""

    key: str
    name: str
    chips: str


@dataclass(frozen=True)
class Rule:
    """An op's verdict for one family."""

    verdict: str
    condition: str | None = None
    rewrite: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class OpEntry:
    """Everything the table says about one MIL op."""

    op_type: str
    default: Rule
    kind: str = "compute"
    dispute: str | None = None
    rule: str | None = None
    sources: tuple[str, ...] = ()
    overrides: dict[str, Rule] = field(default_factory=dict)

    def for_family(self, family: str) -> Rule:
        return self.overrides.get(family, self.default)

    @property
    def is_compute(self) -> bool:
        return self.kind == "compute"


@dataclass(frozen=True)
class OpTable:
    """The whole table: families and op entries."""

    families: dict[str, Family]
    ops: dict[str, OpEntry]

    def entry(self, op_type: str) -> OpEntry | None:
        return self.ops.get(op_type)

    def chosen_families(self, names: Sequence[str] = ()) -> list[str]:
        """``names`` (default: every family of the table), checked: a PlacementError
        names any the table does not have and lists the choices."""
        chosen = list(names) or list(self.families)
        unknown = [family for family in chosen if family not in self.families]
        if unknown:
            raise PlacementError(
                f"unknown ANE family {', '.join(unknown)}; choose from {', '.join(self.families)}"
            )
        return chosen

    def ane_capable(self) -> set[str]:
        """The compute op types some family places on the ANE."""
        return {
            op
            for op, entry in self.ops.items()
            if entry.is_compute
            and any(entry.for_family(family).verdict in ON_ANE for family in self.families)
        }


def _rule(data: dict[str, Any], where: str) -> Rule:
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        raise PlacementError(
            f"op table: {where} has verdict {verdict!r}; expected one of {VERDICTS}"
        )
    if verdict == "ane_if" and not data.get("condition"):
        raise PlacementError(f"op table: {where} is ane_if without a condition")
    if verdict == "decompose" and not data.get("rewrite"):
        raise PlacementError(f"op table: {where} is decompose without a rewrite")
    return Rule(verdict, data.get("condition"), data.get("rewrite"), data.get("reason"))


def parse(text: str) -> OpTable:
    """Parse and validate op-table TOML."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PlacementError(f"op table: not valid TOML: {error}") from error
    if data.get("schema") != 1:
        raise PlacementError(f"op table: unsupported schema {data.get('schema')!r}")
    families = {
        key: Family(key, str(value["name"]), str(value["chips"]))
        for key, value in data.get("families", {}).items()
    }
    ops = {}
    for op_type, value in data.get("ops", {}).items():
        overrides = {}
        for family, override in value.get("families", {}).items():
            if family not in families:
                raise PlacementError(f"op table: ops.{op_type} names unknown family {family!r}")
            overrides[family] = _rule({**value, **override}, f"ops.{op_type}.families.{family}")
        ops[op_type] = OpEntry(
            op_type=op_type,
            default=_rule(value, f"ops.{op_type}"),
            kind=str(value.get("kind", "compute")),
            dispute=value.get("dispute"),
            rule=value.get("rule"),
            sources=tuple(value.get("sources", ())),
            overrides=overrides,
        )
    return OpTable(families, ops)


@functools.cache
def load() -> OpTable:
    """The op table shipped with anekit."""
    text = resources.files("anekit.analysis").joinpath("data/ops.toml").read_text("utf-8")
    return parse(text)
