"""Accelerator lanes: embeddings on the ANE, the GPU and the CPU, each in its own
worker process, admitted on known answers, with deadlines, requeueing and crash
isolation. See docs/lanes.md.
"""

from __future__ import annotations

from anekit.lanes.engines import LANES, unavailable_reason
from anekit.lanes.pool import Pool, RunSummary, open_pool
from anekit.lanes.scheduler import Scheduler, default_lanes

__all__ = [
    "LANES",
    "Pool",
    "RunSummary",
    "Scheduler",
    "default_lanes",
    "open_pool",
    "unavailable_reason",
]
