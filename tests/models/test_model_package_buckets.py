"""The fp16 package against the fp32 reference in every bucket (a file of its own: the
longest simulations, spread over the test workers)."""

from __future__ import annotations

import pytest

from anekit.embedder import Embedder
from anekit.models import BUCKETS
from package_checks import CHUNKS, bucket_cosines


@pytest.mark.parametrize("size", BUCKETS)
def test_fp16_package_matches_fp32_in_every_bucket(fp16: Embedder, size: int) -> None:
    cosines = bucket_cosines(fp16, size)
    assert len(cosines) == CHUNKS
    assert cosines.min() >= 0.9999, (size, cosines.min())
