"""What anekit knows about MIL ops, below every layer that uses it: how the ANE stores
values (:mod:`~anekit.ops.fp16`, :mod:`~anekit.ops.numerics`), MIL's padding rules
(:mod:`~anekit.ops.conv`) and each op's ONNX lowering (:mod:`~anekit.ops.lowering`).
"""
