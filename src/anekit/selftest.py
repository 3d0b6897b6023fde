"""``anekit selftest``: one report a user runs and pastes into an issue.

Sections: the platform and chip, versions, every lane's known-answer admission, the
embedding package's placement per bucket (Core ML's compute plan on a Mac; the op
table's expectation everywhere), a short ``anekit bench``, and the compile cache's
location and state. Each section is ``ok``, ``skipped`` (with why: what does not apply
here) or ``failed`` (with the error); one section failing never stops the others. It
never needs the network: a default model that is not installed is a skipped section.
"""

from __future__ import annotations

import platform
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anekit import bench, config


@dataclass
class Section:
    """One part of the report."""

    name: str
    status: str = "ok"  # ok, skipped, failed
    why: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "why": self.why,
            "seconds": self.seconds,
            **self.data,
        }


class Skipped(Exception):
    """A section that does not apply here; its message says why."""


def _platform() -> dict[str, Any]:
    return {"machine": bench.machine(), "platform": platform.platform()}


def _lanes() -> dict[str, Any]:
    from anekit.lanes import LANES, Scheduler, unavailable_reason

    _need_model()
    skipped = {name: unavailable_reason(name) for name in LANES}
    # The sim lane stands in for the ANE off macOS; `anekit lanes --lane sim` starts it.
    skipped["sim"] = "stands in for the ANE off macOS; start it with anekit lanes --lane sim"
    # The direct lane is experimental (a private API): only started when named.
    skipped["direct"] = skipped["direct"] or (
        "experimental (the private ANE framework); start it with anekit lanes --lane direct"
    )
    names = [name for name, why in skipped.items() if why is None]
    lanes: list[dict[str, Any]] = [
        {"lane": name, "state": "skipped", "reason": why}
        for name, why in skipped.items()
        if why is not None
    ]
    with Scheduler(names) as scheduler:
        scheduler.start()
        status = scheduler.status()
    keys = ("lane", "state", "device", "min_cosine", "rate_tokens_per_s", "reason")
    return {"lanes": [{key: item.get(key) for key in keys} for item in status] + lanes}


def _need_model() -> None:
    from anekit.models.registry import default_folder

    if default_folder() is None:
        raise Skipped("the default model is not installed here (anekit models fetch)")


def _placement(progress: Callable[[str], None] | None) -> dict[str, Any]:
    from anekit.analysis import analyze
    from anekit.models.encoders import SimEncoder, open_encoder

    _need_model()
    encoder = open_encoder("sim", progress=progress)
    assert isinstance(encoder, SimEncoder)
    path = encoder.package.path
    report = analyze(path, families=["a14"])
    buckets: dict[str, Any] = {
        function.name: {
            "expected_on_ane": function.on_ane("a14"),
            "compute_ops": len(function.compute_ops()),
        }
        for function in sorted(report.functions, key=lambda item: (len(item.name), item.name))
    }
    from anekit.analysis import compute_plan

    plan = "Core ML's compute plan exists only on macOS"
    if platform.system() == "Darwin" and not compute_plan.available():
        plan = "Core ML's compute plan needs macOS 14.4 or later"
    if compute_plan.available():
        plans = compute_plan.actual_devices(path, "CPU_AND_NE")
        for name, devices in plans.items():
            buckets.setdefault(name, {})["compute_plan"] = dict(Counter(devices.values()))
        plan = "CPU_AND_NE"
    return {"package": str(path), "family": "a14", "compute_plan": plan, "buckets": buckets}


def _bench() -> dict[str, Any]:
    result = bench.run(size="small", repeat=3, passes=3, warmup=1, model=False)
    return {"bench": result.to_json(), "table": bench.markdown(result)}


def _cache() -> dict[str, Any]:
    from anekit.models.package import packages_dir

    folder = packages_dir()

    def size(path: Path) -> int:
        return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())

    packages = sorted(folder.glob("*.mlpackage")) if folder.is_dir() else []
    compiled = folder / "compiled"
    return {
        "home": str(config.home()),
        "packages_dir": str(folder),
        "packages": [{"name": item.name, "bytes": size(item)} for item in packages],
        "compiled_models": len(list(compiled.glob("*.mlmodelc"))) if compiled.is_dir() else 0,
    }


def run(progress: Callable[[str], None] | None = None) -> list[Section]:
    """Every section, in order; a failing one is recorded and the rest go on."""
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("platform", _platform),
        ("lanes", _lanes),
        ("placement", lambda: _placement(progress)),
        ("bench", _bench),
        ("cache", _cache),
    ]
    sections = []
    for name, step in steps:
        if progress is not None:
            progress(f"selftest: {name}")
        section = Section(name)
        started = time.perf_counter()
        try:
            section.data = step()
        except Skipped as skipped:
            section.status, section.why = "skipped", str(skipped)
        except Exception as error:  # reported, and the next section still runs
            section.status, section.why = "failed", f"{type(error).__name__}: {error}"
        section.seconds = time.perf_counter() - started
        sections.append(section)
    return sections


def markdown(sections: list[Section]) -> str:
    """The report as Markdown, to paste into an issue."""
    lines = ["## anekit selftest", ""]
    for section in sections:
        head = f"### {section.name}: {section.status}"
        lines += [head + (f" ({section.why})" if section.why else ""), ""]
        data = section.data
        if section.name == "platform" and data:
            lines += [f"- {key}: {value}" for key, value in data["machine"].items()]
            lines.append(f"- platform: {data['platform']}")
        elif section.name == "lanes" and data:
            lines += ["| lane | state | device | min cosine | why |", "|---|---|---|---|---|"]
            for lane in data["lanes"]:
                cosine = lane.get("min_cosine")
                lines.append(
                    f"| {lane['lane']} | {lane['state']} | {lane.get('device') or ''} | "
                    f"{'' if cosine is None else f'{cosine:.6f}'} | {lane.get('reason') or ''} |"
                )
        elif section.name == "placement" and data:
            lines.append(f"package {data['package']}; compute plan: {data['compute_plan']}")
            lines += ["", "| bucket | expected on the ANE (a14) | compute plan |", "|---|---|---|"]
            for name, bucket in data["buckets"].items():
                expected = f"{bucket.get('expected_on_ane')} of {bucket.get('compute_ops')}"
                plan = bucket.get("compute_plan")
                lines.append(f"| {name} | {expected} | {plan if plan else 'n/a'} |")
        elif section.name == "bench" and data:
            lines += data["table"].splitlines()[2:]  # the header repeats the platform
        elif section.name == "cache" and data:
            lines += [
                f"- home: {data['home']}",
                f"- packages: {data['packages_dir']} ({len(data['packages'])} packages)",
                *(f"  - {item['name']}: {item['bytes']} bytes" for item in data["packages"]),
                f"- compiled Core ML models: {data['compiled_models']}",
            ]
        lines.append("")
    return "\n".join(lines)
