"""The op records (anekit.ops.registry): one per MIL op type, holding what every layer
asks about that op."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from anekit.ops import defs, groups, registry
from anekit.ops.registry import OPS, record


def test_every_op_with_a_lowering_or_a_cliff_has_a_reference() -> None:
    # The reference defines the semantics the lowering and the cliff checks follow.
    assert defs is not None
    orphans = sorted(
        name for name, entry in OPS.items() if entry.reference is None and entry.op_type != "const"
    )
    assert orphans == [], orphans


def test_groups_are_asked_from_the_record() -> None:
    assert record("matmul").groups >= {"MATMUL_LIKE"}
    assert record("add").groups >= {"BINARY_ELEMENTWISE", "ARITHMETIC", "FLOAT_BINARY"}
    assert "VALUE_PRESERVING" in record("reverse_sequence").groups
    assert "VALUE_PRESERVING" not in record("exp").groups
    assert record("no_such_op").groups == frozenset()


def test_every_group_member_is_a_known_op() -> None:
    # A misspelt name in a group would silently never match.
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    known = set(SSAOpRegistry.core_ops) | set(SSAOpRegistry.dialect_ops)
    for name in groups.__all__:
        unknown = sorted(getattr(groups, name) - known)
        assert unknown == [], (name, unknown)


def test_every_record_has_an_op_table_verdict() -> None:
    # The record's op type is its key in the op table (analysis/data/ops.toml): an op the
    # simulator runs but the table lacks would get no placement verdict.
    from anekit.analysis import load_op_table

    table = load_op_table()
    missing = sorted(name for name in OPS if table.entry(name) is None)
    assert missing == [], missing


def test_the_cliffs_of_a_record_run_through_check() -> None:
    class Op:
        op_type = "matmul"

    saturating = record("matmul").check(Op(), {}, 40000.0)
    assert [rule for rule, _ in saturating] == ["ane.matmul_saturation"]
    assert record("matmul").check(Op(), {}, 100.0) == []
    tiny = {"x": np.array([1e-7, 1.0], np.float32), "epsilon": np.float32(0.0)}
    assert [rule for rule, _ in record("rsqrt").check(Op(), tiny, 1.0)] == ["ane.small_log_input"]
    assert record("exp").check(Op(), tiny, 1e9) == []


def test_a_second_definition_of_the_same_role_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "OPS", {})

    def impl(ctx: Any, x: Any) -> Any:
        return x

    registry.register("twice")(impl)
    registry.lowers("twice")(lambda low, op: [])
    with pytest.raises(RuntimeError, match="reference of MIL op 'twice' defined twice"):
        registry.register("twice")(impl)
    # cliffs accumulate: an op may have several
    registry.cliff("twice")(lambda op, inputs, peak: [])
    registry.cliff("twice")(lambda op, inputs, peak: [])
    assert len(registry.OPS["twice"].cliffs) == 2
