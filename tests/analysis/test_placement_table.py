"""The op table (package data): complete, valid, and what docs/op-support.md shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

from anekit.analysis import RULES, load_op_table
from anekit.analysis.docs import op_support_markdown
from anekit.analysis.optable import VERDICTS, parse
from anekit.analysis.rules import CONDITIONS, placement_rules
from anekit.errors import PlacementError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "op-support.md"

VALID_HEADER = """
schema = 1
[families.a14]
name = "A14 / M1"
chips = "M1"
"""


def test_every_registered_mil_op_is_in_the_table() -> None:
    registered = set(SSAOpRegistry.core_ops) | set(SSAOpRegistry.dialect_ops)
    missing = sorted(registered - set(load_op_table().ops))
    assert missing == []


def test_the_table_names_at_least_the_three_families() -> None:
    assert {"a14", "a15", "a17"} <= set(load_op_table().families)


def test_every_entry_is_valid_and_sourced() -> None:
    table = load_op_table()
    for name, entry in table.ops.items():
        assert entry.sources, f"{name} has no sources"
        assert entry.kind in ("compute", "constant"), name
        if entry.rule is not None:
            assert entry.rule in RULES, f"{name} names unknown rule {entry.rule}"
            assert "placement" in RULES[entry.rule].checked_by, entry.rule
        for family in table.families:
            rule = entry.for_family(family)
            assert rule.verdict in VERDICTS, name
            if rule.verdict == "ane_if":
                assert rule.condition in CONDITIONS, f"{name}: unknown condition {rule.condition}"
            if rule.verdict == "decompose":
                assert rule.rewrite, f"{name}: decompose without a rewrite"


def test_disputed_ops_get_conservative_verdicts() -> None:
    """ane-knowledge.md §7: the disputed ops are off the ANE where the dispute applies."""
    table = load_op_table()
    for name in ("tile", "gather", "cos", "sin"):
        entry = table.ops[name]
        assert entry.dispute, name
        assert entry.for_family("a14").verdict != "ane", name


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[ops.x]\nverdict = "maybe"\nsources = ["s"]', "verdict 'maybe'"),
        ('[ops.x]\nverdict = "ane_if"\nsources = ["s"]', "without a condition"),
        ('[ops.x]\nverdict = "decompose"\nsources = ["s"]', "without a rewrite"),
        (
            '[ops.x]\nverdict = "ane"\nsources = ["s"]\nfamilies.a99 = { verdict = "cpu" }',
            "unknown family 'a99'",
        ),
        ("[ops.x\n", "not valid TOML"),
    ],
)
def test_invalid_tables_are_rejected_with_the_place(body: str, message: str) -> None:
    with pytest.raises(PlacementError, match=message):
        parse(VALID_HEADER + body)


def test_an_unknown_schema_is_rejected() -> None:
    with pytest.raises(PlacementError, match="unsupported schema 2"):
        parse("schema = 2\n")


def test_family_overrides_inherit_the_rest_of_the_entry() -> None:
    table = parse(
        VALID_HEADER
        + '[families.a17]\nname = "A17"\nchips = "M4"\n'
        + '[ops.x]\nverdict = "decompose"\nrewrite = "r"\nsources = ["s"]\n'
        + 'families.a17 = { verdict = "ane" }\n'
    )
    entry = table.ops["x"]
    assert entry.for_family("a14").verdict == "decompose"
    assert entry.for_family("a17").verdict == "ane"


def test_docs_op_support_is_generated_from_the_table() -> None:
    expected = op_support_markdown(load_op_table())
    assert DOCS.read_text() == expected, (
        "docs/op-support.md is stale: run `anekit ops --markdown > docs/op-support.md`"
    )


def test_docs_op_support_lists_every_compute_op_and_rule() -> None:
    text = DOCS.read_text()
    table = load_op_table()
    for name, entry in table.ops.items():
        if entry.is_compute:
            assert f"| `{name}` |" in text, name
    for rule in placement_rules():
        assert f"| `{rule.id}` |" in text, rule.id
