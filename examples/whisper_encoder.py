"""Whisper's encoder on the ANE: build it from a local Hugging Face folder, report where
its ops are expected to run and its simulated fp16 fidelity, save a fixed-shape package
(30 s of audio: 3000 mel frames in, 1500 states out) and, on a Mac, run it through Core
ML and print the run report.

    python examples/whisper_encoder.py path/to/whisper-tiny [--audio a.npy] [--out e.mlpackage]

``--audio``: 16 kHz mono samples as a ``.npy`` file (default: a second of a 440 Hz tone
in noise). Nothing is downloaded; any Whisper checkpoint folder with ``config.json`` and
``model.safetensors`` works. The Core ML run is unverified on hardware in anekit's CI.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np

import anekit
from anekit.analysis import analyze
from anekit.models import whisper


def main(argv: list[str] | None = None) -> dict[str, float | int | str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--audio", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("whisper-encoder.mlpackage"))
    args = parser.parse_args(argv)

    config = whisper.read_config(args.folder)
    weights = whisper.read_weights(args.folder)
    if args.audio is not None:
        audio = np.load(args.audio)
    else:
        times = np.arange(16_000) / 16_000
        noise = 0.05 * np.random.default_rng(0).standard_normal(times.size)
        audio = 0.3 * np.sin(2 * np.pi * 440 * times) + noise
    mel = whisper.log_mel(audio, config.mel_bins)  # (mel_bins, 3000)
    features = mel[None, :, None, :]  # (1, mel_bins, 1, 3000): the ANE layout

    program = anekit.compile(
        whisper.make_encoder(config, weights, np.float16), features.astype(np.float16)
    )
    function = analyze(program).functions[0]
    on_ane, total = function.on_ane("a14"), len(function.compute_ops())
    print(f"placement: {function.summary('a14')}")
    for op in function.compute_ops():
        if op.device["a14"] != "ane":
            print(f"  not on the ANE: {op.op_type} {op.name}: {op.reason('a14')}")

    reference = whisper.make_encoder(config, weights)(features.astype(np.float32))
    simulated = np.asarray(program(features.astype(np.float16), backend="sim"), np.float64)
    cosines = _cosines(simulated, np.asarray(reference, np.float64))
    print(
        f"simulated fp16 vs fp32: min cosine per position {cosines.min():.6f} (not a device figure)"
    )

    path = program.save(args.out)
    print(f"package: {path}")
    result: dict[str, float | int | str] = {
        "on_ane": on_ane,
        "compute_ops": total,
        "min_cosine": float(cosines.min()),
        "package": str(path),
    }
    if platform.system() == "Darwin":
        states = np.asarray(program(features.astype(np.float16), backend="coreml"), np.float64)
        device = _cosines(states, np.asarray(reference, np.float64)).min()
        print(f"Core ML: {program.last_run.describe() if program.last_run else 'no report'}")
        print(f"Core ML vs fp32: min cosine per position {device:.6f}")
        result["core_ml_min_cosine"] = float(device)
    else:
        print("Core ML: skipped (needs macOS)")
    return result


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per position of (B, C, 1, S) states."""
    dots = (a * b).sum(axis=1)
    return np.asarray(dots / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))


if __name__ == "__main__":
    main()
