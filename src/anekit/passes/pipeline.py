"""The ANE pipeline: anekit's passes in order, each checked, each reporting its changes.

``compile()`` and ``convert()`` run :data:`ANE_PIPELINE` on the traced or imported
program; ``disable`` drops passes and ``enable`` adds optional ones. The program is
validated after every pass (coremltools' ``Program.validate``), and a pass that
breaks it raises :class:`~anekit.errors.PassError` naming the pass.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from coremltools.converters.mil.mil import Builder
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

from anekit.errors import PassError
from anekit.passes.base import AnePass, PassReport

#: The default pipeline, in order. Ordering notes: dedupe first, because the pattern
#: passes recognise a computation by the identity of its values;
#: finite_masks before the attention passes, which copy masks into each piece;
#: prescale_query before attention_split, which would otherwise scale every piece;
#: rank5_to_rank4 and no_tile before to_bc1s, whose transposes they would block;
#: pad_io_width last, because it changes the program's inputs and outputs.
ANE_PIPELINE: tuple[str, ...] = (
    "ane::dedupe",
    "ane::finite_masks",
    "ane::fp16_safe_norm",
    "ane::prescale_query",
    "ane::attention_split",
    "ane::rank5_to_rank4",
    "ane::no_tile",
    "ane::to_bc1s",
    "ane::pad_io_width",
)

#: Passes that only run when asked for.
OPTIONAL_PASSES: tuple[str, ...] = ("ane::gelu_tanh",)


def pass_id(name: str) -> str:
    """``no_tile`` or ``ane::no_tile`` -> ``ane::no_tile``; unknown names raise."""
    full = name if "::" in name else f"ane::{name}"
    if full not in ANE_PIPELINE and full not in OPTIONAL_PASSES:
        known = ", ".join(item.split("::")[1] for item in (*ANE_PIPELINE, *OPTIONAL_PASSES))
        raise PassError(f"unknown pass {name!r}; anekit's passes are {known}")
    return full


def pipeline(disable: Iterable[str] = (), enable: Iterable[str] = ()) -> list[str]:
    """The pass ids that run: the default pipeline minus ``disable`` plus ``enable``."""
    off = {pass_id(name) for name in disable}
    on = {pass_id(name) for name in enable}
    chosen = [name for name in ANE_PIPELINE if name not in off]
    return chosen + [name for name in OPTIONAL_PASSES if name in on and name not in off]


@contextmanager
def _deterministic_names(program: Any) -> Iterator[None]:
    """coremltools names the ops and constants a pass creates from a process-wide
    counter (``Builder.name_count``). Count from the names the program already has
    instead, so that the same program always gets the same new names, none taken."""
    counts: defaultdict[str, int] = defaultdict(int)
    for function in program.functions.values():
        for op in function.operations:
            for name in (op.name, *(var.name for var in op.outputs)):
                base, _, suffix = name.rpartition("_")
                if base and suffix.isdigit():
                    counts[base] = max(counts[base], int(suffix) + 1)
    saved = Builder.name_count
    Builder.name_count = counts
    try:
        yield
    finally:
        Builder.name_count = saved


#: Options a pass takes (class attributes), by pass id.
PASS_OPTIONS: dict[str, tuple[str, ...]] = {
    "ane::prescale_query": ("logit_clamp",),
    "ane::fp16_safe_norm": ("scale_exponent", "dynamic"),
}


def _configured(name: str, options: Mapping[str, Any]) -> Any:
    instance = PASS_REGISTRY[name]
    allowed = PASS_OPTIONS.get(name, ())
    for option, value in options.items():
        if option not in allowed:
            raise PassError(
                f"pass {name} has no option {option!r}"
                + (f"; its options are {', '.join(allowed)}" if allowed else "")
            )
        setattr(instance, option, value)
    return instance


def run_pipeline(
    program: Any,
    *,
    disable: Iterable[str] = (),
    enable: Iterable[str] = (),
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> PassReport:
    """Run anekit's passes on ``program`` in place and report what each changed.

    ``options`` sets pass options by pass name, e.g. ``{"prescale_query":
    {"logit_clamp": 50.0}, "fp16_safe_norm": {"scale_exponent": 4}}``.
    """
    chosen = pipeline(disable, enable)
    settings = {pass_id(name): dict(values) for name, values in (options or {}).items()}
    report = PassReport(skipped=[name for name in ANE_PIPELINE if name not in chosen])
    for name in chosen:
        instance = _configured(name, settings.get(name, {}))
        assert isinstance(instance, AnePass)
        try:
            with _deterministic_names(program):
                instance(program)
            program.validate()
        except PassError:
            raise
        except Exception as error:
            raise PassError(f"pass {name} failed: {error}") from error
        report.results.append(instance.result)
    return report
