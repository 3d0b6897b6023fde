"""Op-table rows: Scatter, sliding-window, sequence-reversal, slice-update and non-zero ops."""

from __future__ import annotations

from oprows.table import OpRecord

RECORDS: list[OpRecord] = []
