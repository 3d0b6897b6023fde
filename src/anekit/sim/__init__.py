"""The ANE simulator: run any MIL program with the Neural Engine's fp16 numerics.

``run(program, feeds, mode="ane")`` interprets a coremltools MIL program on any
machine, storing every float value as fp16 with IEEE overflow (``mode="fp32"``
for reference math), and returns the outputs with a :class:`NumericsReport`:
per-op ranges, the first op that produced inf/NaN, and warnings for the ANE's
known numeric cliffs. Results are simulations, never ANE measurements.
"""

from anekit.ops import defs as _defs  # noqa: F401  (defines the ops)
from anekit.ops.numerics import Numerics
from anekit.ops.registry import supported_ops
from anekit.sim.interpreter import SimResult, run
from anekit.sim.report import RULES, NumericsFinding, NumericsReport, OpStats
from anekit.sim.single_op import run_op

__all__ = [
    "RULES",
    "Numerics",
    "NumericsFinding",
    "NumericsReport",
    "OpStats",
    "SimResult",
    "run",
    "run_op",
    "supported_ops",
]
