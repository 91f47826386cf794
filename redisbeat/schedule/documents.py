"""Entries written by people: the JSON (or YAML) documents that ``import`` reads and ``export``
writes, and what ``add`` builds from its options.

A document is an entry's stored JSON form, less what has a default: a schedule names its
``kind`` and the fields without one. It is read strictly (an unknown field is an error, where
a stored definition ignores it for rolling upgrades), and checked exactly as the API checks,
by the same constructor: every error names the entry and the field.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..errors import CorruptEntry, InvalidEntry
from .codec import KIND_CLASSES
from .entry import ENTRY_FIELDS, Entry

__all__ = ["entry_from_document", "read_document"]


def entry_from_document(data: Any, where: str) -> Entry:
    """The entry a document describes; ``where`` names it while its name is unknown
    (``entry 3 of entries.yaml``)."""
    entry, problems = read_document(data, where)
    if problems:
        raise problems[0]
    assert entry is not None
    return entry


def read_document(data: Any, where: str) -> tuple[Entry | None, list[InvalidEntry]]:
    """The entry a document describes (None when it has a problem) and its problems: each
    unknown field, then the first error in the rest (the constructor stops at its first)."""
    if not isinstance(data, dict):
        return None, [InvalidEntry(where, "entry", f"must be a mapping, got {type(data).__name__}")]
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, [InvalidEntry(where, "name", "is missing or not a non-empty string")]
    problems = [
        InvalidEntry(name, str(key), f"unknown field; expected one of {sorted(ENTRY_FIELDS)}")
        for key in data
        if key not in ENTRY_FIELDS
    ]
    try:
        entry = _entry({k: v for k, v in data.items() if k in ENTRY_FIELDS}, name)
    except InvalidEntry as exc:
        return None, [*problems, exc]
    return (None if problems else entry), problems


def _entry(data: dict[str, Any], name: str) -> Entry:
    document = {**data, "schedule": _with_defaults(name, data.get("schedule"))}
    try:
        text = json.dumps(document, default=_refuse, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidEntry(name, "definition", f"is not JSON: {exc}") from None
    try:
        return Entry.loads(text, name)
    except CorruptEntry as exc:  # a person's input, not a stored definition gone bad
        raise InvalidEntry(exc.name, exc.field, exc.message) from None


def _with_defaults(name: str, schedule: Any) -> Any:
    """The schedule with the fields its kind gives a default (an interval's ``relative``,
    a crontab's ``*``, a zone) filled in where the document leaves them out."""
    if not isinstance(schedule, dict):
        if schedule is None:
            raise InvalidEntry(name, "schedule", "is missing")
        return schedule
    kind = KIND_CLASSES.get(schedule.get("kind"))  # type: ignore[arg-type]
    if kind is None:
        return schedule  # the loader names the kind that is wrong
    defaults = {
        f.name: f.default for f in dataclasses.fields(kind) if f.default is not dataclasses.MISSING
    }
    return {**defaults, **schedule}


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not a JSON type")
