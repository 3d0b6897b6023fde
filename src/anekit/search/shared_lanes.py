"""One lane pool for the indexes of several roots (``anekit serve a b``): :class:`SharedLanes`.

Each :class:`~anekit.search.index.Index` given ``shared_lanes=`` borrows the one pool
instead of starting its own (:meth:`SharedLanes.borrow`). The pool is opened by the first
update that embeds, runs one stream at a time (the roots' rounds take turns; a
:class:`~anekit.lanes.Pool` is not shared between threads), is dropped when its workers
have left idle and no stream runs (the next update opens it again), and is closed once,
by whoever made the :class:`SharedLanes` (:meth:`SharedLanes.close`); a borrower's
``close`` leaves it alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from anekit.errors import SearchError

if TYPE_CHECKING:
    from anekit.lanes.pool import Pool, RunSummary
    from anekit.models.encoders import LoadedModel

__all__ = ["SharedLanes"]


class SharedLanes:
    """The lane pool that several indexes share: ``lanes`` (default: this machine's),
    ``ray`` as for :func:`anekit.lanes.open_pool`."""

    def __init__(self, lanes: Sequence[str] | None = None, *, ray: str | None = None) -> None:
        self.lanes = list(lanes) if lanes else None
        self.ray = ray
        #: Pools opened so far (one, unless idle workers let it be dropped in between).
        self.opened = 0
        self._pool: Pool | None = None
        self._model_id: str | None = None
        self._turn = threading.Lock()  # held for a whole stream
        self._state = threading.Lock()  # guards _pool

    def borrow(self, model: LoadedModel) -> Pool:
        """What an index embeds with: the shared pool for ``model`` (opened on its first
        stream); a SearchError when the pool is already for another model."""
        with self._state:
            if self._model_id is None:
                self._model_id = model.model_id
            elif self._model_id != model.model_id:
                raise SearchError(
                    f"the shared lanes embed with {self._model_id}, not {model.model_id}: "
                    "serve the roots of one model from one process"
                )
        return cast("Pool", _Borrowed(self, model))

    @property
    def open(self) -> bool:
        return self._pool is not None

    def close(self) -> None:
        """Stop the pool's workers (the owner, once every borrower is done)."""
        with self._turn, self._state:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def release_idle(self) -> bool:
        """Drop the pool when its workers have left idle and no stream runs; whether no
        pool is held now."""
        if not self._turn.acquire(blocking=False):
            return False  # another root's round is embedding
        try:
            with self._state:
                pool = self._pool
                if pool is None:
                    return True
                if not pool.workers_gone_idle():
                    return False
                self._pool = None
            pool.close()
            return True
        finally:
            self._turn.release()

    def _opened(self, model: LoadedModel) -> Pool:
        with self._state:
            if self._pool is None:
                from anekit.lanes.pool import open_pool

                self._pool = open_pool(self.lanes or [], model=model, ray=self.ray)
                self.opened += 1
            return self._pool

    def _current(self) -> Pool | None:
        return self._pool


class _Borrowed:
    """One index's view of the shared pool: streams take turns; ``close`` is not its to
    do; ``workers_gone_idle`` drops the shared pool when it can."""

    def __init__(self, share: SharedLanes, model: LoadedModel) -> None:
        self._share = share
        self._model = model

    def stream(self, token_ids: Sequence[Sequence[int]]) -> Iterator[Any]:
        with self._share._turn:  # released when the stream ends or is closed
            yield from self._share._opened(self._model).stream(token_ids)

    @property
    def summary(self) -> RunSummary:
        from anekit.lanes.pool import RunSummary

        pool = self._share._current()
        return pool.summary if pool is not None else RunSummary()

    def status(self) -> list[dict[str, Any]]:
        pool = self._share._current()
        return pool.status() if pool is not None else []

    def node_rates(self) -> list[dict[str, Any]]:
        pool = self._share._current()
        return pool.node_rates() if pool is not None else []

    def workers_gone_idle(self) -> bool:
        return self._share.release_idle()

    def close(self) -> None:
        pass  # the owner of the SharedLanes closes the pool
