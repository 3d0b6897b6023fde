"""What a saved PyTorch file holds, told from its zip listing and pickle opcodes without
importing torch or unpickling anything: ``anekit convert`` checks its MODEL with
:func:`saved_format` before it pays for torch, and says how to save a model it takes
when the file was written by ``torch.save`` (a pickled module or weights).
"""

from __future__ import annotations

import pickletools
import zipfile
from pathlib import Path
from typing import IO, Literal

from anekit.errors import ConversionError

SavedFormat = Literal["torchscript", "exported"]

#: How to save what ``anekit convert`` takes, for its messages.
HOW_TO_SAVE = (
    "save TorchScript with torch.jit.trace(model, example_inputs).save('model.pt') (or "
    "torch.jit.script(model).save('model.pt')), or an ExportedProgram with "
    "torch.export.save(torch.export.export(model, example_inputs), 'model.pt2')"
)

# What the legacy (non-zip) torch.save format pickles first: a magic number, then its
# protocol version and system info, then the object.
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_OPCODES_READ = 64  # enough to reach the first object of a pickle


def saved_format(path: Path) -> SavedFormat:
    """How to load ``path``: TorchScript (``torch.jit.save``) or an ExportedProgram
    (``torch.export.save``), told from its contents, else from its suffix (``.pt2``:
    exported). A ConversionError naming the file when it is missing, was written by
    ``torch.save`` (saying what it holds and how to save a model convert takes) or is
    not a PyTorch file at all."""
    if not path.is_file():
        raise ConversionError(f"{path}: no such file")
    guess: SavedFormat = "exported" if path.suffix == ".pt2" else "torchscript"
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return _zip_format(path, archive, guess)
        with path.open("rb") as stream:
            held = _pickled(stream, legacy=True)
    except (OSError, zipfile.BadZipFile) as error:
        raise ConversionError(f"{path}: could not read it: {error}") from error
    if held is None:
        raise ConversionError(
            f"{path}: not a saved PyTorch model (no TorchScript, ExportedProgram or "
            f"torch.save file); anekit convert takes TorchScript or an ExportedProgram: "
            f"{HOW_TO_SAVE}"
        )
    raise _pickled_error(path, held)


def _zip_format(path: Path, archive: zipfile.ZipFile, guess: SavedFormat) -> SavedFormat:
    """The format of a zip archive: TorchScript keeps ``code/`` and ``constants.pkl``, an
    ExportedProgram ``archive_format`` and ``models/``, torch.save only ``data.pkl``."""
    names = archive.namelist()
    inner = {name.partition("/")[2] for name in names}  # below the archive's root folder
    if "constants.pkl" in inner or any(name.startswith("code/") for name in inner):
        return "torchscript"
    if "archive_format" in inner or any(name.startswith("models/") for name in inner):
        return "exported"
    data = next((name for name in names if name.partition("/")[2] == "data.pkl"), None)
    if data is None:
        return guess  # an archive of a kind not told apart here: torch says what is wrong
    with archive.open(data) as stream:
        held = _pickled(stream, legacy=False)
    raise _pickled_error(path, held or "an object")


def _pickled(stream: IO[bytes], *, legacy: bool) -> str | None:
    """What the pickle in ``stream`` holds, from its opcodes (nothing is unpickled): a
    class name, ``a dict``, or None when it is not a pickle (or, with ``legacy``, not
    one the old torch.save format begins with)."""
    try:
        if not legacy:
            return _first_object(stream, whole=False)
        if _first_object(stream, whole=True) != f"int {_LEGACY_MAGIC}":
            return None
        _first_object(stream, whole=True)  # the protocol version
        _first_object(stream, whole=True)  # system information
        return _first_object(stream, whole=False)
    except (ValueError, EOFError, IndexError):  # pickletools' answers to what is no pickle
        return None


def _first_object(stream: IO[bytes], *, whole: bool) -> str:
    """The first thing one pickle in ``stream`` builds: ``int N``, ``a dict``, ``a list``
    or the ``module.Class`` it calls first. With ``whole``, the stream is read up to the
    pickle's STOP (the next pickle follows it); without, only up to what it builds."""
    found = ""
    strings: list[str] = []
    for count, (opcode, argument, _) in enumerate(pickletools.genops(stream)):
        if opcode.name == "STOP":
            break
        if not found:
            found = _built(opcode.name, argument, strings)
        if not whole and (found or count > _OPCODES_READ):
            break
    return found or "an object"


def _built(name: str, argument: object, strings: list[str]) -> str:
    """What opcode ``name`` with ``argument`` builds, or "" (a string it pushes is kept
    in ``strings``: STACK_GLOBAL takes its module and class from the last two)."""
    if name == "GLOBAL":
        return str(argument).replace(" ", ".")
    if name == "STACK_GLOBAL" and len(strings) >= 2:
        return f"{strings[-2]}.{strings[-1]}"
    if "UNICODE" in name or "STRING" in name:
        strings.append(str(argument))
    elif name in ("EMPTY_DICT", "DICT"):
        return "a dict"
    elif name in ("EMPTY_LIST", "LIST", "EMPTY_TUPLE", "TUPLE"):
        return "a list"
    elif name in ("INT", "LONG", "LONG1", "LONG4", "BININT", "BININT1", "BININT2"):
        return f"int {argument}"
    return ""


def _pickled_error(path: Path, held: str) -> ConversionError:
    """Why a ``torch.save`` file cannot be converted, by what it holds (``held``)."""
    if held in ("collections.OrderedDict", "a dict"):
        what = "a state_dict" if held != "a dict" else "a dict: a state_dict or a checkpoint"
        step = "build the model in Python, load the weights with model.load_state_dict(...)"
        return ConversionError(
            f"{path}: saved with torch.save, it holds weights ({what}), not a model anekit "
            f"convert can load; {step}, then {HOW_TO_SAVE}"
        )
    if "." in held and not held.startswith("torch._utils._rebuild"):
        step = "load it with torch.load(path, weights_only=False) where its class imports"
        return ConversionError(
            f"{path}: saved with torch.save, it holds a whole pickled module ({held}), which "
            f"anekit convert does not unpickle (that needs its class and runs its code); "
            f"{step}, then {HOW_TO_SAVE}"
        )
    what = "a tensor" if held.startswith("torch._utils") else held
    return ConversionError(
        f"{path}: saved with torch.save, it holds {what}, not a model; anekit convert takes "
        f"TorchScript or an ExportedProgram: {HOW_TO_SAVE}"
    )
