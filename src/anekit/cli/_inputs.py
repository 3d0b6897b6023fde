"""What ``doctor``, ``simulate`` and ``run`` are given: a package (checked before
coremltools is imported) and its inputs (an ``--inputs`` .npz file, or random arrays)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from anekit import errors
from anekit._package_path import checked_package_path

inputs_option = click.option(
    "--inputs",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="An .npz file with one array per input (default: random normal floats, integer ones).",
)
seed_option = click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed for random inputs."
)


def check_package(path: Path) -> None:
    """The checks of :func:`anekit.load` that need no import (a ProgramError)."""
    checked_package_path(path)


def check_inputs(inputs: Path | None) -> None:
    """A ProgramError when the ``--inputs`` file ``inputs`` is given but is not there."""
    if inputs is not None and not inputs.exists():
        raise _no_such_inputs(inputs)


def _no_such_inputs(path: Path) -> errors.ProgramError:
    return errors.ProgramError(f"--inputs {path}: no such file")


def program_inputs(program: Any, inputs: Path | None, seed: int) -> dict[str, Any]:
    """Each input of ``program`` by name: from the .npz file ``inputs``, else random
    normal floats and integer ones."""
    import numpy as np

    if inputs is not None:
        return read_npz(inputs, [str(spec.name) for spec in program.input_specs])
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in program.input_specs:
        if spec.dtype.kind == "f":
            feeds[str(spec.name)] = rng.standard_normal(spec.shape).astype(spec.dtype)
        else:
            feeds[str(spec.name)] = np.ones(spec.shape, spec.dtype)
    return feeds


def read_npz(path: Path, names: list[str]) -> dict[str, Any]:
    """The arrays called ``names`` in the .npz file ``path``; a ProgramError naming the
    file when it is missing, empty, truncated, not an .npz archive or lacks an input."""
    import zipfile

    import numpy as np

    def unreadable(reason: object) -> errors.ProgramError:
        return errors.ProgramError(
            f"--inputs {path}: not a readable .npz file ({reason}); write one with "
            "numpy.savez(path, NAME=array, ...)"
        )

    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise _no_such_inputs(path) from None
    except EOFError:  # NumPy's answer to an empty file
        raise unreadable("the file is empty") from None
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise unreadable(error) from error
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise unreadable("it holds a single .npy array, not named arrays")
    with data:
        missing = [name for name in names if name not in data.files]
        if missing:
            raise errors.ProgramError(
                f"--inputs {path}: has no array for input(s) {', '.join(missing)} "
                f"(it has {', '.join(data.files) or 'none'})"
            )
        try:
            return {name: data[name] for name in names}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise unreadable(error) from error
