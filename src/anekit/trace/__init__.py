"""The NumPy tracer: run an ordinary NumPy function on tracer arrays, get a MIL program."""

from anekit.specs import TensorSpec
from anekit.trace.api import TraceResult, trace_function
from anekit.trace.tracer import Tracer

__all__ = ["TensorSpec", "TraceResult", "Tracer", "trace_function"]
