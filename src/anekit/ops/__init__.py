"""What anekit knows about MIL ops, below every layer that uses it: one record per op
type (:mod:`~anekit.ops.registry`, filled by :mod:`~anekit.ops.defs`: reference,
lowerings by target, cliffs), the groups of op types (:mod:`~anekit.ops.groups`), the
ANE's limits (:mod:`~anekit.ops.limits`) and one hazard record per limit
(:mod:`~anekit.ops.hazards`), how the ANE stores values (:mod:`~anekit.ops.fp16`,
:mod:`~anekit.ops.numerics`), MIL's padding rules (:mod:`~anekit.ops.conv`) and the
graph the lowerings build (:mod:`~anekit.ops.lowering`).
"""
