"""What ``import`` reads: a file's entry documents, each with where it begins, and every
problem they have, found in one pass so that one run reports them all.

A problem names the entry (its position in the file, and its line) and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import click

from ..errors import InvalidEntry
from ..schedule.documents import read_document
from ..schedule.entry import Entry
from .context import Failed

_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one entry of the file."""

    index: int  # its position in the file, from 1
    line: int | None  # the line it begins on, where the format tells
    entry: str  # its name ("" where it has none)
    field: str
    message: str

    def __str__(self) -> str:
        at = f"line {self.line}, entry {self.index}" if self.line else f"entry {self.index}"
        named = f"entry {self.entry!r}: " if self.entry else ""
        return f"{at}: {named}field {self.field!r}: {self.message}"


@dataclass
class Read:
    """The file's valid entries, where each stands, and the problems of the others."""

    entries: list[Entry]
    #: Entry name -> (position, line) of its document.
    places: dict[str, tuple[int, int | None]]
    problems: list[Problem]

    def add(self, errors: list[InvalidEntry]) -> None:
        """Problems found later (task names, owners), placed where their entries stand."""
        for error in errors:
            index, line = self.places[error.name]
            self.problems.append(Problem(index, line, error.name, error.field, error.message))
        self.problems.sort(key=lambda p: p.index)


def read_file(path: str, fmt: str, yaml: Any) -> Read:
    """Every entry of the file and every problem of its documents (an unknown field, a
    wrong value, a name twice); a file that is not a list of documents fails at once."""
    documents, lines = _load(path, fmt, yaml)
    read = Read([], {}, [])
    for index, document in enumerate(documents, 1):
        line = lines[index - 1] if index <= len(lines) else None
        entry, errors = read_document(document, "")
        for error in errors:
            read.problems.append(Problem(index, line, error.name, error.field, error.message))
        name = document.get("name") if isinstance(document, dict) else None
        if not isinstance(name, str) or not name.strip():
            continue
        if name in read.places:
            first, first_line = read.places[name]
            was = f"line {first_line}, entry {first}" if first_line else f"entry {first}"
            read.problems.append(Problem(index, line, name, "name", f"appears twice ({was})"))
            continue
        read.places[name] = (index, line)
        if entry is not None:
            read.entries.append(entry)
    return read


def _load(path: str, fmt: str, yaml: Any) -> tuple[list[Any], list[int]]:
    """The file's documents, and the line each begins on."""
    with click.open_file(path, encoding="utf-8") as source:
        text = source.read()
    try:
        data, lines = _yaml_items(yaml, text) if yaml else _json_items(text)
    except Exception as exc:  # json's and yaml's own parse errors
        raise Failed(f"{path}: not valid {fmt.upper()}: {exc}") from None
    if not isinstance(data, list):
        raise Failed(f"{path}: expected a list of entries, got {type(data).__name__}")
    return data, lines


def _json_items(text: str) -> tuple[Any, list[int]]:
    """A JSON list read item by item (json's own decoder), to know each one's line."""
    at = _skip(text, 0)
    if not text.startswith("[", at):
        return json.loads(text), []  # not a list: the caller says what it is
    decoder = json.JSONDecoder()
    items: list[Any] = []
    lines: list[int] = []
    line, counted = 1, 0
    at = _skip(text, at + 1)
    closed = text.startswith("]", at)
    while not closed:
        line, counted = line + text.count("\n", counted, at), at
        item, at = decoder.raw_decode(text, at)
        items.append(item)
        lines.append(line)
        at = _skip(text, at)
        closed = text.startswith("]", at)
        if not closed:
            if not text.startswith(",", at):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
            at = _skip(text, at + 1)
    end = _skip(text, at + 1)
    if end < len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return items, lines


def _skip(text: str, at: int) -> int:
    """Past the JSON white space from ``at``."""
    space = _SPACE.match(text, at)
    return space.end() if space else at


def _yaml_items(yaml: Any, text: str) -> tuple[Any, list[int]]:
    """A YAML document, and the line of each item of its top-level list."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    if not isinstance(node, yaml.SequenceNode):
        return data, []
    return data, [child.start_mark.line + 1 for child in node.value]
