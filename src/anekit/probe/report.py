"""The probe report: per op type, what the probe built, where the op ran and how close
its values came to the simulator's fp32 result; saved as JSON, the file a Mac user
contributes (``anekit ops --from-probe REPORT``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anekit.errors import ProbeError

#: Bumped when a field changes meaning; readers refuse other schemas.
SCHEMA = 1

#: ``ok``: ran and matched; ``mismatch``: ran, values outside the tolerance;
#: ``failed``: a stage raised (``stage`` and ``message`` say which and why);
#: ``crashed``: the worker process died; ``timeout``: it ran past the limit;
#: ``not probed``: no case for the op (``message`` says why).
STATUSES = ("ok", "mismatch", "failed", "crashed", "timeout", "not probed")

#: A report's ``compute_units`` when its programs ran through the direct ANE path.
DIRECT_UNITS = "direct (private ANE framework; experimental)"

#: The stages of one probe, in order (a failure names the one it reached).
STAGES = ("build", "reference", "save", "compile", "plan", "run", "compare")


@dataclass
class OpResult:
    """One op type's probe."""

    op: str
    status: str
    program: str = ""
    #: Where the op ran: ``ane``/``gpu``/``cpu`` from Core ML's compute plan,
    #: ``simulated`` for ``probe --sim``; None when it never got that far.
    device: str | None = None
    #: Every compute op of the compiled program (first output name -> device); Core
    #: ML may rewrite a one-op program into several ops.
    placement: dict[str, str] = field(default_factory=dict)
    rel_error: float | None = None
    tolerance: float | None = None
    stage: str | None = None
    message: str | None = None
    seconds: float = 0.0

    @property
    def on_ane(self) -> bool:
        return self.device == "ane"


@dataclass
class ProbeReport:
    """A probe of every op type on one machine."""

    machine: dict[str, Any]
    compute_units: str
    simulated: bool
    created: str
    results: list[OpResult]
    schema: int = SCHEMA

    def counts(self) -> dict[str, int]:
        """Results per status, in :data:`STATUSES` order (zeros left out)."""
        found = dict.fromkeys(STATUSES, 0)
        for result in self.results:
            found[result.status] += 1
        return {status: count for status, count in found.items() if count}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        return target

    @classmethod
    def from_json(cls, data: Any, where: str = "probe report") -> ProbeReport:
        if not isinstance(data, dict):
            raise ProbeError(f"{where}: expected a JSON object")
        if data.get("schema") != SCHEMA:
            raise ProbeError(
                f"{where}: schema {data.get('schema')!r}; this anekit reads schema {SCHEMA}"
            )
        try:
            results = [OpResult(**item) for item in data["results"]]
            report = cls(
                machine=dict(data["machine"]),
                compute_units=str(data["compute_units"]),
                simulated=bool(data["simulated"]),
                created=str(data["created"]),
                results=results,
            )
        except (KeyError, TypeError) as error:
            raise ProbeError(f"{where}: not a probe report ({error})") from error
        for result in results:
            if result.status not in STATUSES:
                raise ProbeError(
                    f"{where}: {result.op} has status {result.status!r}; "
                    f"expected one of {', '.join(STATUSES)}"
                )
        return report

    @classmethod
    def load(cls, path: str | Path) -> ProbeReport:
        source = Path(path)
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except OSError as error:
            raise ProbeError(f"{source}: cannot read it: {error}") from error
        except ValueError as error:
            raise ProbeError(f"{source}: not JSON: {error}") from error
        return cls.from_json(data, str(source))
