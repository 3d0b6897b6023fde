"""The hazard records (anekit.ops.hazards): one per ANE limit, cited by the placement
analysis and by the simulator, in one registry."""

from __future__ import annotations

from typing import Any

import numpy as np

from anekit import analysis, sim
from anekit.analysis.rules import OP_CHECKS, PROGRAM_CHECKS, placement_rules
from anekit.ops import defs, limits
from anekit.ops.hazards import ALIASES, RULES, canonical, checked_by, hazard
from anekit.ops.registry import OPS
from anekit.sim.report import NumericsFinding, NumericsReport


def test_one_registry() -> None:
    assert sim.RULES is RULES
    assert analysis.RULES is RULES


def test_every_hazard_has_its_source_and_fix() -> None:
    for rule in RULES.values():
        assert rule.title and rule.source and rule.fix, rule.id
        assert rule.severity in ("fallback", "risk"), rule.id
        assert rule.checked_by and set(rule.checked_by) <= {"placement", "simulator"}, rule.id


def test_one_limit_one_id() -> None:
    # The attention score size is one hazard, found by both sides, under one id.
    score = RULES["attention.score_size"]
    assert score.checked_by == ("placement", "simulator")
    assert score.limit == limits.ATTENTION_SCORE_LIMIT
    assert "ane.attention_score_size" not in RULES
    assert canonical("ane.attention_score_size") == "attention.score_size"
    assert hazard("ane.attention_score_size") is score
    assert canonical("io.narrow") == "io.narrow"
    # no two records state the same number for the same thing
    numbered = [(rule.limit, rule.title) for rule in RULES.values() if rule.limit is not None]
    assert len(numbered) == len(set(numbered))
    assert not set(ALIASES) & set(RULES)


def test_every_placement_check_and_every_cliff_cites_a_hazard_of_its_side() -> None:
    assert defs is not None
    for rule in [*OP_CHECKS, *PROGRAM_CHECKS]:
        assert "placement" in RULES[rule].checked_by, rule
    cliffs = {cliff.rule for entry in OPS.values() for cliff in entry.cliffs}
    for rule in cliffs:
        assert "simulator" in RULES[rule].checked_by, rule
    # and each hazard is found by the side it says
    simulator_found = cliffs | {"sim.nonfinite", "sim.internal_overflow"}
    assert {rule.id for rule in checked_by("simulator")} == simulator_found
    placement = {rule.id for rule in placement_rules()}
    assert placement == set(OP_CHECKS) | set(PROGRAM_CHECKS) | {"op.table"}


def _simulate(fn: Any, x: np.ndarray, engine: str) -> Any:
    import anekit

    program = anekit.compile(fn, x, passes=False)
    feeds = {str(program.input_specs[0].name): x}
    return sim.run(program.program, feeds, mode="ane", executor=engine).report


def test_every_rule_a_simulator_report_names_is_a_hazard(rng: np.random.Generator) -> None:
    # A program per simulator rule, in both engines: every rule a report names is a
    # record with a source and a fix, and the one-limit-one-id rule holds there too.
    from anekit import nn

    w = np.full((64, 4), 20.0, np.float32)
    q = rng.standard_normal((1024, 8)).astype(np.float32)
    cases = [
        (lambda v: v @ w, np.full((2, 64), 30.0, np.float32), "ane.matmul_saturation"),
        (lambda v: np.log(v), np.array([[1e-6, 1.0]], np.float32), "ane.small_log_input"),
        (lambda v: v[:, 2:] + 0, np.full((2, 8), 5000.0, np.float32), "ane.width_slice_saturation"),
        (lambda v: nn.softmax((v @ v.T) * 0.125, axis=-1), q, "attention.score_size"),
        (lambda v: np.exp(v), np.full((2, 4), 20.0, np.float32), "sim.nonfinite"),
    ]
    for fn, x, expected in cases:
        for engine in ("interpreter", "auto"):
            report = _simulate(fn, x, engine)
            named = {warning.rule for warning in report.warnings}
            if report.first_nonfinite is not None:
                named.add("sim.nonfinite")
            assert expected in named, (expected, engine, named)
            for rule in named:
                assert rule in RULES and RULES[rule].source and RULES[rule].fix, rule
                assert "simulator" in RULES[rule].checked_by, rule


def test_warnings_for_accepts_a_retired_id() -> None:
    report = NumericsReport(mode="ane", accumulation="fp32", function="main")
    report.warnings.append(NumericsFinding("attention.score_size", "s", "softmax", "big", None))
    assert report.warnings_for("ane.attention_score_size") == report.warnings
    assert report.warnings_for("attention.score_size") == report.warnings
    assert report.warnings_for("io.narrow") == []
