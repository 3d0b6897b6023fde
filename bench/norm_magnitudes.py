"""Which activation sizes each normalization survives in fp16, with and without anekit's
passes: the simulator's ``ane`` numerics against NumPy float64 (a simulation, not an
ANE measurement).

For each form in tests/norm_forms.py and each RMS, 64 rows of 384 Gaussian values
are traced and run; a cell is the minimum row cosine to float64 and the largest
relative error of a row's length, or what went wrong (inf/NaN, all zeros). With
``--minilm`` it also measures all-MiniLM-L6-v2 (torch extra) converted with the
pipeline against torch fp32 on the 32 test chunks.

    .venv/bin/python bench/norm_magnitudes.py [--minilm]
"""

from __future__ import annotations

import datetime
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from benchmachine import machine  # noqa: E402

import anekit  # noqa: E402
from norm_forms import FORMS, row_cosines  # noqa: E402

MAGNITUDES = (1e-3, 1, 13, 104, 300, 3000, 9000)


def _cell(fn: object, reference: object, x: np.ndarray, passes: bool) -> str:
    program = anekit.compile(fn, x, passes=passes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the garbage is what the table reports
        got = np.asarray(program(x, backend="sim", mode="ane"), np.float64)
    with np.errstate(all="ignore"):
        want = (reference or fn)(x.astype(np.float64))  # type: ignore[operator]
    if not np.isfinite(got).all():
        return "inf/NaN"
    zero_rows = int(np.sum(~np.abs(got).any(axis=1)))
    if zero_rows:
        return "all zeros" if zero_rows == len(got) else f"{zero_rows} rows zero"
    lengths = np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    return f"{row_cosines(got, want).min():.5f} / {np.abs(lengths - 1).max():.0e}"


def norm_table() -> None:
    print("| form | passes | " + " | ".join(f"RMS {m:g}" for m in MAGNITUDES) + " |")
    print("|---|---|" + "--:|" * len(MAGNITUDES))
    rng = np.random.default_rng(0)
    base = rng.standard_normal((64, 384))
    for name, (fn, reference) in FORMS.items():
        for passes in (False, True):
            cells = []
            for magnitude in MAGNITUDES:
                x = np.clip(base * magnitude, -65000, 65000).astype(np.float16)
                cells.append(_cell(fn, reference, x, passes))
            label = "on" if passes else "off"
            print(f"| {name} | {label} | " + " | ".join(cells) + " |")


def minilm_fidelity() -> None:
    import minilm
    from anekit.frontends.huggingface import sentence_embedder

    ids, mask = (np.asarray(part) for part in minilm.tokenize(minilm.chunks()))
    program = anekit.convert(sentence_embedder(minilm.hf_model()), (ids[:4], mask[:4]))
    ops = sum(1 for op in program.ops() if op.op_type != "const")
    for mode in ("ane", "fp32"):
        cosines = []
        for start in range(0, len(ids), 4):
            part = slice(start, start + 4)
            want = minilm.torch_embeddings(ids[part], mask[part])
            got = program(ids[part], mask[part].astype(np.float16), backend="sim", mode=mode)
            cosines.append(row_cosines(np.asarray(got, np.float64), want))
        found = np.concatenate(cosines)
        print(
            f"MiniLM ({ops} ops), simulator {mode} mode vs torch fp32, {len(found)} chunks: "
            f"min cosine {found.min():.7f}, mean {found.mean():.7f}"
        )


def main() -> None:
    print(f"{datetime.date.today()}; {machine()}; anekit {anekit.__version__} (simulated)")
    print("cells: min row cosine to float64 / largest relative error of a row's length\n")
    norm_table()
    if "--minilm" in sys.argv[1:]:
        print()
        minilm_fidelity()


if __name__ == "__main__":
    main()
