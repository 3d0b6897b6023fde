"""Op-table rows: Recurrent ops: rnn, gru and lstm over a (T, B, I) sequence."""

from __future__ import annotations

from oprows.table import OpRecord

RECORDS: list[OpRecord] = []
