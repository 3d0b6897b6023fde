"""A small parser of textual MIL (``model.mil``), for the emitter's tests: written from the
grammar Core ML's compiled samples and docs/ane-knowledge.md §5.2 show, independently of
anekit.package.mil_text. One statement per line, as Core ML writes them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_STATEMENT = re.compile(r"^(?P<outputs>.+?) = (?P<op>\w+)\((?P<args>.*)\)\[(?P<attrs>.*)\];$")
_FUNCTION = re.compile(r"^func (?P<name>\w+)<(?P<opset>\w+)>\((?P<inputs>.*)\) \{$")
_RETURN = re.compile(r"^\} -> \((?P<outputs>.*)\);$")
_TYPE = re.compile(r"^tensor<(?P<dtype>\w+), \[(?P<shape>[0-9, ]*)\]>$")


@dataclass(frozen=True)
class Type:
    dtype: str
    shape: tuple[int, ...] | None  # None: a scalar written as a bare type name


@dataclass
class Statement:
    outputs: list[tuple[Type, str]]
    op: str
    args: dict[str, str | tuple[str, ...]]
    name: str
    value: Any = None  # a const's value: a list of elements, one element, or ("blob", offset)


@dataclass
class Function:
    name: str
    opset: str
    inputs: list[tuple[Type, str]]
    statements: list[Statement] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass
class Parsed:
    version: str
    build_info: str
    functions: dict[str, Function]


def split_top(text: str, separator: str = ",") -> list[str]:
    """``text`` split at ``separator`` outside brackets and quotes, each part stripped."""
    parts, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(text):
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "([<{":
            depth += 1
        elif not quoted and char in ")]>}":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(separator, index):
            parts.append(text[start:index].strip())
            start = index + len(separator)
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def parse_type(text: str) -> Type:
    match = _TYPE.match(text)
    if match is None:
        return Type(text, None)
    shape = tuple(int(dim) for dim in split_top(match["shape"]))
    return Type(match["dtype"], shape)


def _typed(text: str) -> tuple[Type, str]:
    kind, _, name = text.rpartition(" ")
    return parse_type(kind), name


def element(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        return json.loads(text)
    if "0x" in text:
        return float.fromhex(text)
    return float(text) if "." in text or "e" in text else int(text)


def literal(text: str) -> Any:
    """``T(v)``, ``tensor<T, [...]>([v, ...])`` or ``...(BLOBFILE(path = ..., offset = ...))``:
    the element(s), or ("blob", offset, path)."""
    start = text.index(">(") + 1 if text.startswith("tensor<") else text.index("(")
    inner = text[start + 1 : -1]
    if inner.startswith("BLOBFILE("):
        fields = dict(item.split(" = ", 1) for item in split_top(inner[len("BLOBFILE(") : -1]))
        return ("blob", literal(fields["offset"]), literal(fields["path"]))
    if inner.startswith("["):
        return [element(item) for item in split_top(inner[1:-1])]
    return element(inner)


def parse(text: str) -> Parsed:
    lines = [line.strip() for line in text.strip().splitlines()]
    version = re.fullmatch(r"program\((.+)\)", lines[0])
    assert version is not None, lines[0]
    assert lines[2] == "{" and lines[-1] == "}", (lines[2], lines[-1])
    functions: dict[str, Function] = {}
    current: Function | None = None
    for line in lines[3:-1]:
        if (start := _FUNCTION.match(line)) is not None:
            current = Function(start["name"], start["opset"],
                               [_typed(item) for item in split_top(start["inputs"])])  # fmt: skip
            functions[current.name] = current
        elif (end := _RETURN.match(line)) is not None:
            assert current is not None
            current.outputs = split_top(end["outputs"])
            current = None
        else:
            match = _STATEMENT.match(line)
            assert match is not None and current is not None, line
            attrs = dict(item.split(" = ", 1) for item in split_top(match["attrs"]))
            args: dict[str, str | tuple[str, ...]] = {}
            for item in split_top(match["args"]):
                key, value = item.split(" = ", 1)
                args[key] = tuple(split_top(value[1:-1])) if value.startswith("(") else value
            current.statements.append(
                Statement(
                    [_typed(item) for item in split_top(match["outputs"])],
                    match["op"],
                    args,
                    literal(attrs["name"]),
                    literal(attrs["val"]) if "val" in attrs else None,
                )
            )
    return Parsed(version[1], lines[1], functions)
