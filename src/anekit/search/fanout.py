"""One query over the stores of several roots, the hits merged by score: :func:`fan_out`.

Each root is searched in its own store as one search would be (``anekit search --all``,
the MCP ``search`` tool's ``roots``), its best ``k`` kept, and the lists merged by fused
score, highest first (ties: the roots' order, then each root's rank), each hit naming its
root (:class:`RootHit`). The scores compare across stores because every store ranks with
the same fusion (reciprocal rank over each store's own candidate lists, the same priors
and bonuses): a hit's score says how high its own store put it, with the same evidence
counted the same way. A root that cannot be searched (its folder gone, no index, a damaged
store, vectors of another embedding model) is listed in :attr:`FanOut.skipped` with the
reason; only when no root could be searched is it an error, naming each.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anekit.errors import DamagedStoreError, SearchError

if TYPE_CHECKING:
    from anekit.search.index import Index, SearchHit

__all__ = ["MISSING_FOLDER", "NO_INDEX", "FanOut", "RootHit", "fan_out", "merge"]

MISSING_FOLDER = "missing folder"
NO_INDEX = "no index"


@dataclass(frozen=True)
class RootHit:
    """A hit and the root whose store holds it."""

    root: Path
    hit: SearchHit

    def as_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), **self.hit.as_dict()}


@dataclass
class FanOut:
    """The merged hits, the roots searched, and those skipped with why."""

    hits: list[RootHit]
    searched: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def skipped_dicts(self) -> list[dict[str, str]]:
        return [{"root": str(root), "reason": why} for root, why in self.skipped]


def merge(results: Sequence[tuple[Path, Sequence[SearchHit]]], k: int) -> list[RootHit]:
    """The ``k`` best of every root's hits by score, highest first; equal scores keep the
    roots' order, then each root's own order."""
    tagged = [RootHit(root, hit) for root, hits in results for hit in hits]
    return sorted(tagged, key=lambda item: -item.hit.score)[:k]  # sorted() is stable


def fan_out(
    roots: Sequence[Path],
    open_index: Callable[[Path], Index],
    query: str,
    *,
    k: int = 10,
    mode: str = "hybrid",
    paths: Sequence[str] = (),
    exts: Sequence[str] = (),
    langs: Sequence[str] = (),
    model_id: str | None = None,
) -> FanOut:
    """Search each of ``roots`` (with the index ``open_index`` gives for it) and merge.
    ``model_id``: the model the query is embedded with; a store of another is skipped in
    the modes that embed the query. A SearchError naming each root when none could be
    searched."""
    results: list[tuple[Path, Sequence[SearchHit]]] = []
    skipped: list[tuple[Path, str]] = []
    for root in roots:
        try:
            if not os.path.isdir(root):
                raise _Unsearchable(MISSING_FOLDER)
            index = open_index(root)
            _check(index, mode, model_id)
            hits = index.search(query, k=k, mode=mode, paths=paths, exts=exts, langs=langs)
        except _Unsearchable as why:
            skipped.append((root, str(why)))
        except DamagedStoreError as error:
            skipped.append((root, f"damaged store: {error.__cause__ or error}"))
        except sqlite3.DatabaseError as error:
            skipped.append((root, f"damaged store: {error}"))
        except (SearchError, OSError) as error:
            skipped.append((root, str(error)))
        else:
            results.append((root, hits))
    if not results and skipped:
        named = "; ".join(f"{root}: {why}" for root, why in skipped)
        raise SearchError(f"no root could be searched: {named}")
    return FanOut(merge(results, k), [root for root, _ in results], skipped)


class _Unsearchable(Exception):
    """Why a root is skipped (the message)."""


def _check(index: Index, mode: str, model_id: str | None) -> None:
    """:class:`_Unsearchable` when ``index`` has no store, an empty one, or one whose
    vectors another model made (in a mode that embeds the query)."""
    if not os.path.isdir(index.root):
        raise _Unsearchable(MISSING_FOLDER)
    if not (index.directory / "store.db").is_file():
        raise _Unsearchable(NO_INDEX)
    identity = index.store.identity
    if identity is None:
        raise _Unsearchable(f"{NO_INDEX} (empty)")
    if mode != "keyword" and model_id is not None and identity.model != model_id:
        raise _Unsearchable(f"a different embedding model ({identity.model}, not {model_id})")
