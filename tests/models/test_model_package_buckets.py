"""The fp16 package against the fp32 reference in every bucket (a file of its own: the
longest simulations, spread over the test workers). CI checks the shortest and the
longest bucket; the ones between run the same code at sizes between and are marked slow
(``make test-slow`` runs them)."""

from __future__ import annotations

import pytest

from anekit.embedder import Embedder
from anekit.models import BUCKETS
from package_checks import CHUNKS, bucket_cosines


@pytest.mark.parametrize(
    "size",
    [size if size in (BUCKETS[0], BUCKETS[-1]) else pytest.param(size, marks=pytest.mark.slow)
     for size in BUCKETS],
)  # fmt: skip
def test_fp16_package_matches_fp32_in_every_bucket(fp16: Embedder, size: int) -> None:
    cosines = bucket_cosines(fp16, size)
    assert len(cosines) == CHUNKS
    assert cosines.min() >= 0.9999, (size, cosines.min())
