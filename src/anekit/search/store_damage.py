"""What a SQLite error means for the code search store: a damaged file
(:func:`is_damage`, :func:`damaged`), an I/O error, and :func:`damage_checked`, which
reports the first and answers the second by opening the store again."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from anekit.errors import DamagedStoreError

if TYPE_CHECKING:
    from anekit.search.store_connection import StoreConnection

__all__ = ["damage_checked", "damaged", "is_damage", "is_io_error"]

log = logging.getLogger("anekit.search.store")  # the store's log, whichever part writes it

# SQLite's primary result codes for a file that is damaged or not a database at all.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_SQLITE_IOERR = 10
_F = TypeVar("_F", bound=Callable[..., Any])


def is_damage(error: sqlite3.Error) -> bool:
    """Whether SQLite reported ``error`` for a corrupt file (not a lock, an I/O error or a
    mistake in a statement)."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return True
    # Python's sqlite3 raises this for a text value that is not UTF-8, with no SQLite error
    # code: anekit writes text as str, so only a garbled page holds one.
    return "Could not decode to UTF-8" in str(error)


def damaged(path: Path, error: sqlite3.Error) -> DamagedStoreError:
    return DamagedStoreError(
        f"{path}: the index is damaged ({error}): run `anekit index`, which rebuilds it "
        "from the files (their vectors come back from the machine-wide cache)"
    )


def is_io_error(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == _SQLITE_IOERR


def damage_checked(method: _F) -> _F:
    """``method`` with a damaged database reported as :class:`DamagedStoreError`, and an
    I/O error outside a transaction answered by opening the store again and trying once
    more: a connection whose WAL file was deleted, or whose database was replaced, under
    it (nothing is lost: the other writers made a WAL of their own) fails that way."""

    @functools.wraps(method)
    def checked(self: StoreConnection, *args: Any, **kwargs: Any) -> Any:
        if self._broken and not self._opening:  # the last try to open it again failed
            self._reopen()
        try:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.OperationalError as error:
                if not is_io_error(error) or self._in_write or self._in_read or self._opening:
                    raise
                log.info("%s: %s: opening the store again", self.path, error)
                self._reopen()
                return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as error:
            if is_damage(error):
                raise damaged(self.path, error) from error
            raise

    return checked  # type: ignore[return-value]
