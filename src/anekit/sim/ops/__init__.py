"""Simulator op implementations; importing this package registers them all."""

from anekit.sim.ops import activation, elementwise, linear, misc, normalization, reduction, tensor

__all__ = ["activation", "elementwise", "linear", "misc", "normalization", "reduction", "tensor"]
