"""Lanes on a Ray cluster: the embedding stage spread over machines (``anekit index
--ray [ADDRESS]``, ``Embedder(lanes=..., ray=...)``; the extra ``anekit[ray]``).

anekit does not schedule across machines itself: it hands the work to Ray Data, Ray's
engine for distributed batch inference. Only the embedding stage leaves the driver.
Walking, reading, chunking, the vector cache and the store stay where they were
(:mod:`anekit.search.index`), and only chunks that need a vector are sent.

- What travels: the chunks' token ids, in blocks of :data:`BLOCK_ROWS` rows (sorted by
  length, so a block pads little), and the vectors that come back. File contents and
  paths never leave the driver.
- The actors: a pool of ``map_batches`` actors, as many as the cluster's CPUs allow at
  ``threads`` CPUs each. Each actor holds one embedding engine
  (:func:`anekit.lanes.engines.make_engine`) for the lane its node runs: the one asked
  for, or with ``auto`` the ANE lane's Core ML package on a Mac, else the gpu lane where
  ONNX Runtime has CUDA, else ONNX Runtime int8 on the CPU.
- Admission: every actor passes the lanes' known-answer check
  (:func:`anekit.lanes.worker.admission`) before it takes work. A refused actor fails
  the run, and every chunk not yet back is reported as failed with the reason.
- Failures, as the lanes have them: an actor or node that dies costs its in-flight
  blocks, which Ray retries on a restarted actor (``max_restarts=-1``,
  ``max_task_retries=-1``). A row that comes back twice is yielded once.
  ``ANEKIT_FAULT=LANE:batch:N`` kills each actor on its N-th block, once (not again
  after Ray restarts it), for the tests and for drills. A driver
  interrupted mid-run loses nothing either: the index's checkpoints and vector cache
  resume it.
- The vectors are written by the driver's single store writer, as for a local index.

Ray is imported only here, and only when a cluster is asked for.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from anekit.errors import LaneError
from anekit.lanes import faults
from anekit.lanes.engines import LANES, unavailable_reason
from anekit.lanes.pool import RunSummary, gathered

if TYPE_CHECKING:
    from pathlib import Path

    from anekit.models.encoders import LoadedModel

#: Rows per block: one Ray task's worth of work for an actor.
BLOCK_ROWS = 64
#: A local instance's object store: token ids and vectors in flight, nothing more.
LOCAL_OBJECT_STORE = 256 * 1024**2
#: ``lane="auto"``: the lanes an actor tries on its node, best first.
AUTO = ("ane", "gpu", "cpu")
#: ``address`` for a Ray instance of this machine's own, started for the run.
LOCAL = "local"


def node_lane(requested: str) -> str:
    """The lane an actor runs on its node: ``requested``, or with ``auto`` the first of
    :data:`AUTO` this node can run."""
    if requested != "auto":
        return requested
    return next(lane for lane in AUTO if unavailable_reason(lane) is None)


class EmbedActor:
    """One embedding engine on one node (a Ray Data actor): admitted on the known
    answers when made, then embedding blocks of token ids. Its settings are bound to a
    subclass (:func:`actor_class`), not passed to the constructor: Ray restarts a dead
    actor from its class alone, where constructor arguments kept in the object store may
    be lost with a node (ray-project/ray#53727)."""

    #: lane, model, max_length, threads, fault_text: set by :func:`actor_class`.
    settings: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        import ray

        from anekit.lanes.engines import make_engine
        from anekit.lanes.worker import admission

        lane, model = self.settings["lane"], self.settings["model"]
        max_length, threads = self.settings["max_length"], self.settings["threads"]
        fault_text = self.settings["fault_text"]
        self.lane = node_lane(lane)
        context = ray.get_runtime_context()
        self.node = str(context.get_node_id())
        #: Whether Ray restarted this actor after its process died.
        self.restarted = bool(context.was_current_actor_reconstructed)
        self.faults = faults.parse(fault_text, self.lane)
        self.engine = make_engine(self.lane, model, max_length, threads)
        hello = admission(self.lane, self.engine, self.faults, model)
        if not hello["admitted"]:
            raise LaneError(
                f"lane {self.lane} on node {self.node[:12]}: refused at admission: "
                f"{len(hello['below_floor'])} known-answer chunk(s) under the floor "
                f"{hello['floor']} (lowest cosine {hello['min_cosine']:.4f})"
            )
        self.blocks = 0

    def __call__(self, block: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.blocks += 1
        if self.faults.die_at == self.blocks and not self.restarted:
            os._exit(137)  # as abrupt as kill -9: Ray restarts the actor, retries the block
        ids = [[int(token) for token in row] for row in block["ids"]]
        vectors = np.asarray(self.engine.embed(ids), np.float32)
        rows = len(ids)
        return {
            "position": np.asarray(block["position"], np.int64),
            "vector": vectors.reshape(rows, -1),
            "node": np.array([self.node] * rows),
            "lane": np.array([self.lane] * rows),
        }


def actor_class(settings: dict[str, Any]) -> type[EmbedActor]:
    """:class:`EmbedActor` with ``settings`` bound (pickled by value with the class)."""
    return type("EmbedActor", (EmbedActor,), {"settings": dict(settings)})


@dataclass
class NodeRate:
    """What one node embedded in the current run."""

    node: str
    lane: str
    chunks: int = 0
    tokens: int = 0
    first: float = 0.0
    last: float = 0.0

    def as_dict(self, started: float) -> dict[str, Any]:
        seconds = max(self.last - started, 1e-6)
        return {
            "node": self.node,
            "lane": self.lane,
            "chunks": self.chunks,
            "chunks_per_s": self.chunks / seconds,
            "tokens_per_s": self.tokens / seconds,
        }


def connect(address: str | None) -> bool:
    """Join the Ray cluster at ``address`` (:data:`LOCAL` or None: start an instance of
    this machine's own); whether this call did (then :meth:`RayScheduler.close` leaves
    it). An already connected process is left as it is."""
    try:
        import ray
    except ImportError as error:
        raise LaneError(
            "embedding on a Ray cluster needs Ray: pip install 'anekit[ray]'"
        ) from error
    reachable(address)
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    try:
        if address in (None, LOCAL):
            ray.init(include_dashboard=False, object_store_memory=LOCAL_OBJECT_STORE, **options)
        else:
            ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise LaneError(f"cannot join the Ray cluster at {address}: {error}") from error
    return True


#: Seconds to wait for a cluster's HOST:PORT to answer before saying it does not.
REACH_SECONDS = 5.0


def reachable(address: str | None) -> None:
    """Refuse, at once, a ``HOST:PORT`` (or ``ray://HOST:PORT``) where nothing listens:
    Ray itself retries such an address for minutes before it gives up. None,
    :data:`LOCAL` and ``auto`` pass (nothing to reach yet)."""
    import socket

    if address in (None, LOCAL):
        return
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=REACH_SECONDS).close()
    except OSError as error:
        raise LaneError(
            f"cannot reach the Ray cluster at {address}: nothing answered at {host}:{port} "
            f"({error}); start its head with `ray start --head --port={port}`, or leave "
            "the address out for an instance of this machine's own"
        ) from error


class RayScheduler:
    """The lanes' :class:`~anekit.lanes.Scheduler` interface (``stream``, ``embed``,
    ``status``) over a Ray Data actor pool; unit vectors, like any lane."""

    normalized = True

    def __init__(
        self,
        lane: str = "cpu",
        *,
        address: str | None = None,
        model: str | Path | LoadedModel | None = None,
        max_length: int | None = None,
        threads: int = 1,
        actors: int | None = None,
    ) -> None:
        from anekit.models.encoders import load_model

        if lane != "auto" and lane not in LANES:
            raise LaneError(f"unknown lane {lane!r}; lanes are auto, {', '.join(LANES)}")
        if threads < 1:
            raise LaneError(f"threads must be at least 1, got {threads}")
        self.fault_text = os.environ.get(faults.VARIABLE)
        if lane != "auto":
            faults.parse(self.fault_text, lane)  # a bad ANEKIT_FAULT is named here
        loaded = load_model(model, max_length)  # a missing model is named here, not by actors
        self.model_id, config = loaded.model_id, loaded.config
        self.dimension = config.hidden_size
        self.batch = 1
        #: The model as actors resolve it for themselves (None: the default model).
        self.model = None if loaded.request is None else str(loaded.request)
        self.lane, self.max_length = lane, config.max_length
        self.threads = threads
        self._owns = connect(address)
        self.address = address or LOCAL
        self.actors = actors or self._actors_for_cluster()
        self.summary = RunSummary()
        self.notify: Callable[[str], None] | None = None
        self.progress: Callable[[int, int], None] | None = None
        self._nodes: dict[str, NodeRate] = {}
        self._started = time.monotonic()

    def _actors_for_cluster(self) -> int:
        """As many actors as the cluster's CPUs hold at ``threads`` each (at least one)."""
        import ray

        cpus = float(ray.cluster_resources().get("CPU", 1))
        return max(1, int(cpus // self.threads))

    @property
    def device(self) -> str:
        return f"Ray cluster ({self.address}): {self.actors} actor(s), lane {self.lane}"

    def providers(self) -> list[str]:
        return []

    def status(self) -> list[dict[str, Any]]:
        """One entry per node that has answered in the current run (``lane@node``)."""
        if not self._nodes:
            return [{"lane": f"ray:{self.lane}", "state": "starting", "actors": self.actors}]
        return [
            {
                **rate.as_dict(self._started),
                "lane": f"{rate.lane}@{rate.node[:8]}",
                "state": "ready",
            }
            for rate in self._nodes.values()
        ]

    def node_rates(self) -> list[dict[str, Any]]:
        """Chunks and chunks per second of each node in the current run."""
        return [rate.as_dict(self._started) for rate in self._nodes.values()]

    def workers_gone_idle(self) -> bool:
        return False  # the actors live for one run; nothing is held between runs

    def release_memory(self) -> None:
        pass

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors in input order; :class:`~anekit.errors.EmbeddingFailed` (NaN in
        the failed rows) when some rows failed."""
        return gathered(self.stream(token_ids), len(token_ids), self.dimension)

    def stream(
        self, token_ids: Sequence[Sequence[int]]
    ) -> Iterator[tuple[int, np.ndarray | None, str | None, str]]:
        """``(index, vector, None, lane)`` for every row as its block comes back (in the
        order blocks finish), then ``(index, None, why, "")`` for any row the run could not
        embed."""
        import ray

        self.summary = RunSummary(chunks=len(token_ids))
        self._nodes, self._started = {}, time.monotonic()
        if not token_ids:
            return
        order = sorted(range(len(token_ids)), key=lambda index: len(token_ids[index]))
        rows = [{"position": index, "ids": list(token_ids[index])} for index in order]
        _quiet(ray.data.DataContext.get_current())
        blocks = -(-len(rows) // BLOCK_ROWS)
        settings = {
            "lane": self.lane,
            "model": self.model,
            "max_length": self.max_length,
            "threads": self.threads,
            "fault_text": self.fault_text,
        }
        dataset = ray.data.from_items(rows, override_num_blocks=blocks).map_batches(
            actor_class(settings),
            batch_size=BLOCK_ROWS,
            batch_format="numpy",
            # Ray Data restarts a pool's actors and retries their tasks by default
            # (max_restarts=-1, max_task_retries=-1: ray/data/_internal/execution/
            # operators/actor_pool_map_operator.py); an error in the constructor (a
            # refused admission) is not retried.
            compute=ray.data.ActorPoolStrategy(size=min(self.actors, blocks)),  # no idle actor
            num_cpus=self.threads,
        )
        seen: set[int] = set()
        try:
            for block in dataset.iter_batches(batch_size=None, batch_format="numpy"):
                now = time.monotonic()
                for position, vector, node, lane in zip(
                    block["position"], block["vector"], block["node"], block["lane"], strict=True
                ):
                    index = int(position)
                    if index in seen:
                        continue  # a block retried after it had come back
                    seen.add(index)
                    self._count(str(node), str(lane), len(token_ids[index]), now)
                    yield index, np.asarray(vector, np.float32), None, str(lane)
                if self.progress is not None:
                    self.progress(len(seen), len(token_ids))
        except ray.exceptions.RayError as error:
            reason = f"the Ray run failed: {_first_line(error)}"
            for index in range(len(token_ids)):
                if index not in seen:
                    self.summary.failed[index] = reason
                    yield index, None, reason, ""
        finally:
            self.summary.embedded = len(seen)

    def _count(self, node: str, lane: str, tokens: int, now: float) -> None:
        rate = self._nodes.get(node)
        if rate is None:
            rate = self._nodes[node] = NodeRate(node, lane, first=now)
        rate.chunks += 1
        rate.tokens += tokens
        rate.last = now

    def close(self) -> None:
        """Leave the cluster if this scheduler joined it."""
        if self._owns:
            import ray

            ray.shutdown()
            self._owns = False

    def __enter__(self) -> RayScheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _quiet(context: Any) -> None:
    """No progress bars or per-dataset log lines from Ray Data: the index has its own."""
    import logging

    context.enable_progress_bars = False
    context.enable_operator_progress_bars = False
    context.enable_auto_log_stats = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def _first_line(error: BaseException) -> str:
    """What went wrong on the actor, in one line: the last ``...Error: ...`` line of the
    exceptions Ray chained (an actor's own exception is inside Ray's), else the outer
    exception's name and first line."""
    messages: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(messages) < 10:
        messages.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    lines = [line.strip() for text in messages for line in text.splitlines()]
    errors = [line for line in lines if re.match(r"[\w.]*(Error|Exception): \S", line)]
    if errors:
        return errors[-1][:500]
    first = lines[0] if lines else ""
    return f"{type(error).__name__}: {first}"[:500]
