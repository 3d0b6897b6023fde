"""How the scheduler cuts rows into batches (no worker is started here)."""

from __future__ import annotations

import numpy as np

from anekit.lanes import Scheduler
from anekit.lanes.scheduler import GROUP, _Work


def _batches(token_ids: list[list[int]], buckets: tuple[int, ...], rate: float) -> list[list[int]]:
    work = _Work(token_ids, buckets)
    taken: list[list[int]] = []
    last = None
    while True:
        work.fill(GROUP * 8)
        rows = work.take(rate, GROUP, last)
        if not rows:
            return taken
        last = work.bucket(rows[-1])
        taken.append(rows)


def test_a_batch_holds_rows_of_similar_length() -> None:
    """Rows are sorted into buckets of 32 tokens, not the package's 128, 192, 256: a
    batch's rows then differ by less than 32 tokens, so the engine pads little (with
    64-token or wider buckets this fails)."""
    scheduler = Scheduler(["numpy"])
    assert scheduler.buckets[-1] == 256  # the model's maximum length
    lengths = np.random.default_rng(0).integers(3, 257, 600)
    token_ids = [[101] * int(length) for length in lengths]
    taken = _batches(token_ids, scheduler.buckets, rate=20_000.0)
    assert sorted(row for rows in taken for row in rows) == list(range(600))
    for rows in taken:
        spread = max(lengths[rows]) - min(lengths[rows])
        assert spread < 32, (rows, lengths[rows])


def test_batches_are_whole_groups_but_for_the_last_of_a_bucket() -> None:
    scheduler = Scheduler(["numpy"])
    lengths = np.random.default_rng(1).integers(3, 257, 600)
    taken = _batches([[101] * int(n) for n in lengths], scheduler.buckets, rate=20_000.0)
    partial = [rows for rows in taken if len(rows) % GROUP]
    assert len(partial) <= len(scheduler.buckets)
