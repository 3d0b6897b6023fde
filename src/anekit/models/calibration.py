"""Calibration texts for the int8 models' activation scales
(:func:`anekit.package.activation_scales.prepare`).

Pieces of CPython's standard library (PSF-2.0): from each of 120 modules taken in a
seeded order, 5, 15 or 30 lines from a seeded place, and one to three words of those
lines (short inputs have activations of their own). Shipped as package data, so that every
machine builds the same int8 model from the same texts; none of them is in the
known-answer fixture or the fidelity tests. Regenerate (with the Python that wrote
the file, recorded in it):

    .venv/bin/python -m anekit.models.calibration --write
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sysconfig
from pathlib import Path
from typing import Any

from anekit.models import shipped

RESOURCE = "data/calibration.json"
SEED = 0
MODULES = 120
#: Modules shorter than this are passed over.
MIN_LINES = 40
SPANS = (5, 15, 30)
WORDS = (1, 2, 3)


def load() -> list[str]:
    """The calibration texts shipped with anekit."""
    data = shipped.read_json(RESOURCE)
    return [piece["text"] for piece in data["pieces"]]


def generate(library: Path) -> dict[str, Any]:
    """The pieces of the standard library at ``library`` (module doc)."""
    chooser = random.Random(SEED)
    modules = sorted(library.glob("*.py"))
    chooser.shuffle(modules)
    pieces = []
    for module in modules[:MODULES]:
        lines = module.read_text("utf-8", errors="replace").splitlines()
        if len(lines) < MIN_LINES:
            continue
        start = chooser.randrange(0, len(lines) - 30)
        source = f"Lib/{module.name}:{start + 1}"
        pieces.append(
            {"source": source, "text": "\n".join(lines[start : start + chooser.choice(SPANS)])}
        )
        words = " ".join(lines[start : start + 3]).split()
        if words:
            pieces.append({"source": source, "text": " ".join(words[: chooser.choice(WORDS)])})
    return {
        "license": "PSF-2.0 (CPython's standard library)",
        "python": platform.python_version(),
        "pieces": pieces,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the package data file")
    args = parser.parse_args(argv)
    content = json.dumps(generate(Path(sysconfig.get_paths()["stdlib"])), indent=1) + "\n"
    if args.write:
        target = shipped.write_text(RESOURCE, content)
        print(f"wrote {target}")
    else:
        print(content, end="")


if __name__ == "__main__":
    main()
