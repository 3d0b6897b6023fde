"""The pool protocol: what a caller of the lanes sees, whichever pool runs them.

A :class:`Pool` embeds token ids over lanes and says how it went: the local
:class:`~anekit.lanes.Scheduler` (worker processes on this machine) and the
:class:`~anekit.lanes.cluster.RayScheduler` (actors on a Ray cluster) are the two.
Code search and ``anekit embed`` hold a pool directly (:func:`open_pool`), as
sentence-transformers keeps its multi-process pool apart from the model; an
:class:`anekit.Embedder` with ``lanes=`` wraps one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from anekit.errors import EmbeddingFailed, LaneError

if TYPE_CHECKING:
    from anekit.models.encoders import LoadedModel

#: One row of a pool's stream: ``(index, vector, None, lane)`` for a row embedded by
#: ``lane``, ``(index, None, why, "")`` for a row given up.
Row = tuple[int, "np.ndarray | None", "str | None", str]


@dataclass
class RunSummary:
    """What one :meth:`Pool.stream` call did."""

    chunks: int = 0
    embedded: int = 0
    #: Chunks sent more than once (their worker failed, or they came back NaN).
    retried: int = 0
    #: Failed chunks' indices and why.
    failed: dict[int, str] = field(default_factory=dict)
    #: Worker restarts per lane during the call.
    restarts: dict[str, int] = field(default_factory=dict)
    #: The in-process engine that finished the run, when one had to.
    fallback: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        failed = [{"chunk": index, "reason": why} for index, why in self.failed.items()]
        return {**asdict(self), "failed": failed}


class Pool(Protocol):
    """Token ids in, unit vectors out, over lanes that prove themselves first."""

    model_id: str
    dimension: int
    #: Rows per call of the model inside: 1, the pool batches for its workers itself.
    batch: int
    #: A pool returns unit vectors.
    normalized: bool
    #: What the last :meth:`stream` did (replaced when the next one starts).
    summary: RunSummary
    #: Called with a line for the user when something changes how a run goes.
    notify: Callable[[str], None] | None
    #: Called with (rows done, rows) as a run goes.
    progress: Callable[[int, int], None] | None

    def stream(self, token_ids: Sequence[Sequence[int]]) -> Iterator[Row]:
        """Every row once, as it is done (see :data:`Row`)."""
        ...

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors in input order; :class:`~anekit.errors.EmbeddingFailed` (NaN in
        the failed rows) when some rows failed."""
        ...

    def status(self) -> list[dict[str, Any]]:
        """One entry per lane (or per node on a cluster): at least ``lane`` and ``state``."""
        ...

    def node_rates(self) -> list[dict[str, Any]]:
        """Chunks and chunks per second of each machine in the current run (none for a
        pool on one machine)."""
        ...

    @property
    def device(self) -> str:
        """The lanes (or the cluster) and what runs each."""
        ...

    def providers(self) -> list[str]:
        """Empty: each lane's are in :meth:`status`."""
        ...

    def release_memory(self) -> None:
        """Nothing to give back here: the workers hold the models, and leave when idle."""
        ...

    def workers_gone_idle(self) -> bool:
        """Whether every worker left on its own, idle: the pool holds nothing worth keeping."""
        ...

    def close(self) -> None: ...


def open_pool(
    lanes: Sequence[str] | None = None,
    *,
    model: str | Path | LoadedModel | None = None,
    max_length: int | None = None,
    deadline: float = 30.0,
    threads: int | None = None,
    ray: str | None = None,
) -> Pool:
    """The pool of ``lanes`` (None or empty: :func:`~anekit.lanes.default_lanes`) for
    ``model``: worker processes here, or with ``ray`` (an address, ``"local"``: an
    instance of this machine's own) one lane's engines as actors on a Ray cluster."""
    if ray is None:
        from anekit.lanes.scheduler import Scheduler

        return Scheduler(
            lanes, model=model, max_length=max_length, deadline=deadline, threads=threads
        )
    from anekit.lanes.cluster import RayScheduler
    from anekit.lanes.scheduler import default_lanes

    names = list(lanes or ()) or default_lanes()
    if len(names) != 1:
        raise LaneError(f"a Ray cluster runs one lane (or auto), got {', '.join(names)}")
    return RayScheduler(
        names[0],
        address=ray,
        model=model,
        max_length=max_length,
        threads=threads or 1,
    )


def lead_lane(lanes: Sequence[str] | None) -> str:
    """The lane whose numerics a run's vectors have: the first of ``lanes`` (None or
    empty: :func:`~anekit.lanes.default_lanes`), ``auto`` read as this node's lane."""
    from anekit.lanes.cluster import node_lane
    from anekit.lanes.scheduler import default_lanes

    return node_lane((list(lanes or ()) or default_lanes())[0])


def check_cluster(address: str | None) -> None:
    """:class:`~anekit.errors.LaneError` naming why the Ray cluster at ``address`` cannot
    be reached (without the extra, or nothing listening there)."""
    from anekit.lanes.cluster import reachable

    reachable(address)


def in_use(pool: Pool) -> str:
    """The lanes serving now, and the in-process engine if one finished the run."""
    ready = [item["lane"] for item in pool.status() if item["state"] == "ready"]
    fallback = pool.summary.fallback
    return ", ".join(ready + ([fallback] if fallback else []))


def gathered(rows: Iterable[Row], count: int, dimension: int) -> np.ndarray:
    """A stream's rows (in any order) as ``(count, dimension)`` float32 in input order;
    :class:`EmbeddingFailed`, with NaN in the failed rows, when some rows failed."""
    vectors = np.full((count, dimension), np.nan, np.float32)
    failed: dict[int, str] = {}
    for index, vector, why, _ in rows:
        if vector is not None:
            vectors[index] = vector
        else:
            failed[index] = why or "no vector"
    if failed:
        raise EmbeddingFailed(dict(sorted(failed.items())), vectors)
    return vectors


__all__ = [
    "Pool",
    "Row",
    "RunSummary",
    "check_cluster",
    "gathered",
    "in_use",
    "lead_lane",
    "open_pool",
]
