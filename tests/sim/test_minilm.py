"""The simulator on coremltools' own conversion of all-MiniLM-L6-v2, against torch fp32.

Acceptance: sim ``fp32`` on the fp32-precision conversion matches torch within 1e-5
relative; sim ``ane`` on the fp16 conversion gives embeddings with cosine >= 0.9999
to torch fp32 on 32 real code chunks. Also: the int8-compressed package and a
multifunction package (two sequence lengths) run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import anekit
import minilm
from anekit import sim

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("minilm")
    fp32 = minilm.convert(directory / "fp32.mlpackage", precision="fp32")
    fp16 = minilm.convert(directory / "fp16.mlpackage", precision="fp16")
    return {"fp32": fp32, "fp16": fp16}


@pytest.fixture(scope="module")
def batches() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The 32 chunks in batches of 4: (ids, mask, torch fp32 embeddings)."""
    texts = minilm.chunks()
    assert len(texts) == 32
    result = []
    for start in range(0, len(texts), minilm.BATCH):
        ids, mask = minilm.tokenize(texts[start : start + minilm.BATCH])
        result.append((ids, mask, minilm.torch_embeddings(ids, mask)))
    return result


def embed(program: Any, batches: list[Any], mode: str, function: str | None = None) -> np.ndarray:
    outputs = []
    for ids, mask, _ in batches:
        result = sim.run(program, {"ids": ids, "mask": mask}, mode=mode, function=function)
        assert result.report.first_nonfinite is None, result.report.summary()
        outputs.append(result.outputs["embedding"].astype(np.float32))
    return np.concatenate(outputs)


def reference(batches: list[Any]) -> np.ndarray:
    return np.concatenate([expected for _, _, expected in batches])


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


def test_chunks_exercise_padding_and_truncation(batches: list[Any]) -> None:
    lengths = np.concatenate([mask.sum(1) for _, mask, _ in batches])
    assert lengths.min() < 64
    assert lengths.max() == minilm.MAX_LENGTH  # some chunks are truncated


def test_fp32_mode_matches_torch(packages: dict[str, Path], batches: list[Any]) -> None:
    program = anekit.load(packages["fp32"]).program
    got = embed(program, batches, "fp32")
    want = reference(batches)
    relative = np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)
    assert relative.max() <= 1e-5, relative.max()


def test_ane_mode_embeddings_are_faithful(packages: dict[str, Path], batches: list[Any]) -> None:
    program = anekit.load(packages["fp16"]).program
    similarity = cosines(embed(program, batches, "ane"), reference(batches))
    assert similarity.min() >= 0.9999, similarity.min()


def test_int8_package_runs_with_materialized_weights(
    packages: dict[str, Path], batches: list[Any], tmp_path: Path
) -> None:
    import coremltools as ct
    import coremltools.optimize.coreml as cto

    model = ct.models.MLModel(str(packages["fp16"]), skip_model_load=True)
    config = cto.OptimizationConfig(
        global_config=cto.OpLinearQuantizerConfig(
            mode="linear_symmetric", granularity="per_channel"
        )
    )
    path = tmp_path / "int8.mlpackage"
    cto.linear_quantize_weights(model, config).save(str(path))
    loaded = anekit.load(path)
    assert "constexpr_blockwise_shift_scale" in [op.op_type for op in loaded.ops()]
    similarity = cosines(embed(loaded.program, batches[:2], "ane"), reference(batches[:2]))
    assert similarity.min() >= 0.99, similarity.min()


def test_multifunction_package_runs_each_bucket(batches: list[Any], tmp_path: Path) -> None:
    import coremltools as ct

    short = minilm.convert(tmp_path / "s128.mlpackage", precision="fp16", length=128)
    descriptor = ct.utils.MultiFunctionDescriptor()
    descriptor.add_function(str(short), src_function_name="main", target_function_name="seq128")
    long = minilm.convert(tmp_path / "s256.mlpackage", precision="fp16")
    descriptor.add_function(str(long), src_function_name="main", target_function_name="seq256")
    descriptor.default_function_name = "seq256"
    combined = tmp_path / "buckets.mlpackage"
    ct.utils.save_multifunction(descriptor, str(combined))

    # Four chunks that fit in 128 tokens embed the same in both buckets.
    texts = minilm.chunks()
    all_ids, all_mask = minilm.tokenize(texts)
    short_ones = np.flatnonzero(all_mask.sum(1) <= 128)[:4]
    assert len(short_ones) == 4
    ids, mask = all_ids[short_ones], all_mask[short_ones]
    bucket128 = anekit.load(combined, function="seq128")(ids[:, :128], mask[:, :128], backend="sim")
    bucket256 = anekit.load(combined, function="seq256")(ids, mask, backend="sim")
    similarity = cosines(bucket128.astype(np.float32), bucket256.astype(np.float32))
    assert similarity.min() >= 0.9999, similarity


def test_ops_of_the_conversion_are_all_simulated(packages: dict[str, Path]) -> None:
    used = {op.op_type for op in anekit.load(packages["fp16"]).ops()}
    assert used <= set(sim.supported_ops()), used - set(sim.supported_ops())
    assert {"gather", "linear", "layer_norm", "softmax", "gelu", "matmul"} <= used
