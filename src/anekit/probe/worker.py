"""A probe worker: ``python -m anekit.probe.worker OP OUT``, one op in its own process,
so that a compiler crash costs this process, not the probe (:func:`anekit.probe.run`
starts it with coremltools' optional frontends kept out, for a faster start).

It writes the stage it reaches to ``OUT.stage`` and its result to ``OUT`` (JSON).
``ANEKIT_PROBE_FAULT=OP:STAGE:KIND`` (KIND ``crash`` or ``hang``) makes it fail on
purpose when it reaches STAGE, for the probe's own tests.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from anekit.probe.cases import by_op
from anekit.probe.measure import BACKENDS, measure

FAULT_VARIABLE = "ANEKIT_PROBE_FAULT"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m anekit.probe.worker")
    parser.add_argument("op")
    parser.add_argument("out", type=Path)
    parser.add_argument("--backend", choices=BACKENDS, default="coreml")
    parser.add_argument("--compute-units", default="CPU_AND_NE")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    stage_file = args.out.with_name(args.out.name + ".stage")

    def reached(stage: str) -> None:
        stage_file.write_text(stage, encoding="utf-8")
        _fault(args.op, stage)

    # in the probe's own scratch folder, so that a worker that dies leaves nothing behind
    with tempfile.TemporaryDirectory(prefix=f"{args.op}-", dir=args.out.parent) as scratch:
        result = measure(
            by_op()[args.op],
            Path(scratch),
            backend=args.backend,
            compute_units=args.compute_units,
            seed=args.seed,
            progress=reached,
        )
    args.out.write_text(json.dumps(asdict(result)), encoding="utf-8")
    return 0


def _fault(op: str, stage: str) -> None:
    for fault in filter(None, os.environ.get(FAULT_VARIABLE, "").split(",")):
        fault_op, fault_stage, kind = fault.split(":")
        if (fault_op, fault_stage) == (op, stage):
            if kind == "crash":
                os.abort()  # what a compiler crash looks like from outside: SIGABRT
            if kind == "hang":
                time.sleep(3600)


if __name__ == "__main__":
    raise SystemExit(main())
