"""A lane worker: ``python -m anekit.lanes.worker LANE [--model M] [--max-length N]``.

It loads its engine (sending progress frames meanwhile) and says hello: admitted or not
by :func:`admission`, or refused by :func:`refusal_hello` (an engine not on its lane's
device). An admitted worker serves batch frames until told to quit, until its stdin
closes, or until it has been idle for ``ANEKIT_LANE_IDLE`` seconds. Everything it prints
goes to stderr; stdout carries frames only.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from typing import IO, Any

import numpy as np

from anekit.lanes import protocol
from anekit.lanes.engines import LANES, Engine, LaneRefused, make_engine
from anekit.lanes.faults import Faults, from_environment

IDLE_VARIABLE = "ANEKIT_LANE_IDLE"
#: Libraries no lane worker uses, which coremltools imports when they are installed
#: (torch alone: about 1 s and 250 MB per worker). Blocked before anything imports
#: coremltools, which then treats them as absent.
NOT_IN_WORKERS = ("torch", "torchvision", "transformers", "sklearn", "tensorflow")
DEFAULT_IDLE_SECONDS = 300.0


def _idle_seconds() -> float:
    try:
        return float(os.environ.get(IDLE_VARIABLE, DEFAULT_IDLE_SECONDS))
    except ValueError:
        return DEFAULT_IDLE_SECONDS


def _faulty(vectors: np.ndarray, faults: Faults, batch_number: int | None) -> np.ndarray:
    if faults.poison == "nan" or (
        batch_number is not None
        and faults.nan_after is not None
        and batch_number >= faults.nan_after
    ):
        return np.full_like(vectors, np.nan)
    if faults.poison == "zero":
        return np.zeros_like(vectors)
    return vectors


def _truncated(token_ids: list[list[int]], max_length: int) -> list[list[int]]:
    """Token ids as a tokenizer truncating at ``max_length`` gives them: the first
    ``max_length - 1`` ids and the closing special token."""
    return [
        ids if len(ids) <= max_length else ids[: max_length - 1] + ids[-1:] for ids in token_ids
    ]


def admission(
    lane: str, engine: Engine, faults: Faults, model: str | None = None
) -> dict[str, Any]:
    """Embed the known answers; the hello message (admitted or not).

    The fixture's texts are embedded at the fixture's length (256 tokens) whatever
    the lane's ``max_length``. For the fixture's model its stored fp32 vectors are the
    reference; for another model, those its folder holds from ``anekit models fetch``
    (for its weights), else the NumPy fp32 path of that model, computed here.
    """
    from anekit.models import known_answers
    from anekit.models.encoders import open_encoder, unit_rows

    answers = known_answers.load()
    token_ids = _truncated(engine.tokenize(answers.texts), answers.max_length)
    started = time.perf_counter()
    vectors = _faulty(engine.embed(token_ids), faults, None)
    seconds = max(time.perf_counter() - started, 1e-6)
    if engine.model_id == answers.model:
        cosines = answers.cosines(vectors)
    else:  # stored at fetch time (anekit.models.hub), else computed now
        from anekit.models.hub import stored_known_answers

        reference_encoder = open_encoder("numpy", model)
        reference = stored_known_answers(
            reference_encoder.folder, reference_encoder.weights.digest, answers.texts
        )
        if reference is None:
            reference = unit_rows(reference_encoder.embed(token_ids))
        cosines = known_answers.row_cosines(vectors, reference)
    floor = LANES[lane].floor
    below = [
        {"chunk": index, "source": answers.chunks[index].get("source", ""), "cosine": float(c)}
        for index, c in enumerate(cosines)
        if not c >= floor
    ]
    return {
        "lane": lane,
        "model": engine.model_id,
        "admitted": not below,
        "device": engine.device,
        "providers": engine.providers(),
        "dimension": engine.dimension,
        "batch": engine.batch,
        "floor": floor,
        "min_cosine": float(cosines.min()),
        "below_floor": below,
        "rate_tokens_per_s": sum(len(ids) for ids in token_ids) / seconds,
        "chunks_per_s": len(token_ids) / seconds,
        "pid": os.getpid(),
    }


def refusal_hello(lane: str, refusal: LaneRefused) -> dict[str, Any]:
    """The hello of a worker whose engine is not what its lane says (a ``gpu`` lane
    on the CPU): not admitted, with the reason and the device it would have used."""
    return {
        "lane": lane,
        "admitted": False,
        "refused": str(refusal),
        "device": refusal.device,
        "providers": refusal.providers,
        "floor": LANES[lane].floor,
        "below_floor": [],
        "pid": os.getpid(),
    }


def serve(
    lane: str, engine: Engine, faults: Faults, incoming: IO[bytes], outgoing: IO[bytes]
) -> None:
    """Answer batch frames until quit, end of input or idleness."""
    idle = _idle_seconds()
    number = 0
    while True:
        if not select.select([incoming], [], [], idle)[0]:
            return  # idle: the parent starts a new worker when it needs one
        payload = protocol.read_frame(incoming)
        if payload is None or payload[:1] == protocol.QUIT:
            return
        if payload[:1] != protocol.BATCH:
            raise protocol.ProtocolError(f"unexpected {payload[:1]!r} frame")
        batch_id, rows = protocol.decode_batch(payload)
        number += 1
        if faults.die_at == number or (
            faults.kill_on is not None and any(faults.kill_on in row for row in rows)
        ):
            os._exit(137)  # as abrupt as kill -9: no reply, no cleanup
        if faults.hang_ms:
            time.sleep(faults.hang_ms / 1000)
        if faults.malformed_at == number:
            protocol.write_frame(outgoing, protocol.RESULT + b"\x00")
            continue
        try:
            vectors = _faulty(engine.embed(rows), faults, number)
            frame = protocol.result_frame(batch_id, vectors)
        except Exception as error:
            frame = protocol.error_frame(batch_id, f"{type(error).__name__}: {error}")
        protocol.write_frame(outgoing, frame)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An anekit lane worker.")
    parser.add_argument("lane", choices=sorted(LANES))
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    for name in NOT_IN_WORKERS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    # unbuffered: select() must see every byte that has arrived
    incoming = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
    outgoing = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout is for frames only
    faults = from_environment(args.lane)

    def progress(stage: str, **details: Any) -> None:
        frame = protocol.json_frame(protocol.PROGRESS, {"stage": stage, **details})
        protocol.write_frame(outgoing, frame)

    progress("loading", lane=args.lane, pid=os.getpid())
    if faults.load:
        os._exit(3)
    try:
        engine = make_engine(args.lane, args.model, args.max_length, args.threads)
        progress("admission")
        hello = admission(args.lane, engine, faults, args.model)
    except LaneRefused as refusal:
        hello = refusal_hello(args.lane, refusal)
    protocol.write_frame(outgoing, protocol.json_frame(protocol.HELLO, hello))
    if hello["admitted"]:
        serve(args.lane, engine, faults, incoming, outgoing)
    return 0


def run(argv: list[str] | None = None) -> int:
    """:func:`main`, with anekit's own errors as one line on stderr (the parent shows
    its last lines as the lane's reason) and exit status 2."""
    from anekit.errors import AnekitError

    try:
        return main(argv)
    except AnekitError as error:
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run())
