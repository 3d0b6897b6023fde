"""anekit._coremltools.quiet_passes: coremltools' pass pipelines without progress bars,
validating each program once after the pipeline instead of after every pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from coremltools.converters.mil.mil.passes.graph_pass import AbstractGraphPass
from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager
from coremltools.converters.mil.mil.passes.pass_registry import register_pass

from anekit._coremltools import Program, ct, mb, quiet_passes


def small_program() -> Any:
    def function(x: Any) -> Any:
        return mb.relu(x=mb.add(x=mb.mul(x=x, y=np.float32(2.0)), y=np.float32(1.0)))

    specs = [mb.TensorSpec(shape=(2, 8))]
    return mb.program(input_specs=specs, opset_version=ct.target.iOS18)(function)


@register_pass(namespace="anekit_test")
class break_consumers(AbstractGraphPass):  # type: ignore[misc]  # snake case, as coremltools
    """Leaves a Var claiming a consumer that does not read it: an invalid program."""

    def apply(self, prog: Any) -> None:
        ops = prog.functions["main"].operations
        ops[-1].outputs[0].add_child_op(ops[0])


def test_the_program_is_validated_once_after_the_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = Program.validate

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(kwargs.get("check_essential_scope"))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Program, "validate", counting)
    pipeline = ct.PassPipeline.DEFAULT
    PassPipelineManager.apply_pipeline(small_program(), pipeline)
    assert len(calls) == len(pipeline.passes) + 1  # coremltools: before, and after each
    calls.clear()
    with quiet_passes():
        PassPipelineManager.apply_pipeline(small_program(), pipeline)
    assert calls == [None, True]  # before, and once after (scopes: DCE ran)
    assert Program.validate is counting


def test_a_pass_that_breaks_the_program_is_still_caught() -> None:
    pipeline = ct.PassPipeline(["common::const_elimination", "anekit_test::break_consumers"])
    with quiet_passes(), pytest.raises(Exception, match="should be consumed by op"):
        PassPipelineManager.apply_pipeline(small_program(), pipeline)


def test_a_pipeline_prints_its_program_only_when_coremltools_logs_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """coremltools formats the whole program into its pipeline's debug f-strings whether
    or not DEBUG is logged; in quiet_passes a program prints in full only at DEBUG."""
    from anekit._coremltools import Function

    printed: list[str] = []
    real = Program.__str__

    def counting(self: Any, *args: Any, **kwargs: Any) -> str:
        printed.append("program")
        return str(real(self, *args, **kwargs))

    monkeypatch.setattr(Program, "__str__", counting)
    pipeline = ct.PassPipeline(["common::const_elimination"])
    PassPipelineManager.apply_pipeline(small_program(), pipeline)
    assert printed == ["program", "program"]  # coremltools: before and after, at any level
    printed.clear()
    program = small_program()
    with quiet_passes():
        PassPipelineManager.apply_pipeline(program, pipeline)
        assert str(program) == "<Program: printed when coremltools logs at DEBUG>"
        assert str(program.functions["main"]).startswith("<Function: printed")
    assert printed == []
    assert Program.__str__ is counting and "%mul" in str(program.functions["main"])  # put back
    with caplog.at_level("DEBUG", logger="coremltools"), quiet_passes():
        PassPipelineManager.apply_pipeline(program, pipeline)
    assert printed == ["program", "program"]
    assert any("relu" in record.getMessage() for record in caplog.records)
    assert Function.__str__(program.functions["main"]).startswith("function")
