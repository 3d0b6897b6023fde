"""The ONNX graph builder anekit's compiled simulator and ONNX exporter share."""

from anekit.onnxgraph.graph import MIN_SIZE, Graph, run_elementwise

__all__ = ["MIN_SIZE", "Graph", "run_elementwise"]
