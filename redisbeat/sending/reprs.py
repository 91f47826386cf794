"""The ``argsrepr`` and ``kwargsrepr`` headers, as Celery's ``saferepr`` writes them, cheaply.

``saferepr`` streams tokens through generators so that it can cut a long or deep value short;
that costs more than the rest of an entry's first message. For what arguments usually are
(JSON data, shorter than the size limit, no deeper than the level limit) nothing is cut, and
its text is a plain walk's: strings in single quotes with only ``'`` escaped, numbers by
``str``, ``None``, and lists, tuples and dicts joined by ``", "``. :func:`argument_repr` takes
that walk where it gives the same text and leaves anything else to ``saferepr``.
"""

from __future__ import annotations

from typing import Any

from celery.utils.saferepr import saferepr

_NUMBERS = (int, float, bool)


def argument_repr(value: Any, maxsize: int | None, maxlevels: int) -> str:
    """``saferepr(value, maxsize, maxlevels=maxlevels)``."""
    parts: list[str] = []
    try:
        plain = _walk(value, parts, 0, maxlevels)
    except RecursionError:  # a value that holds itself: saferepr marks where
        plain = False
    if plain:
        text = "".join(parts)
        # Nothing is cut while the whole text is shorter than the limit.
        if maxsize is None or len(text) < maxsize:
            return text
    return saferepr(value, maxsize, maxlevels=maxlevels)


def _walk(value: Any, parts: list[str], level: int, maxlevels: int) -> bool:
    """Append ``value``'s text to ``parts``; False where ``saferepr`` may write another."""
    kind = type(value)
    if kind is str:
        parts.append("'" + value.replace("'", "\\'") + "'")
    elif kind in _NUMBERS:
        parts.append(str(value))
    elif value is None:
        parts.append("None")
    elif kind in (list, tuple, dict):
        if maxlevels and level >= maxlevels:
            return False  # saferepr writes "[...]"
        return _walk_container(value, parts, level + 1, maxlevels)
    else:
        return False
    return True


def _walk_container(value: Any, parts: list[str], level: int, maxlevels: int) -> bool:
    kind = type(value)
    parts.append("{" if kind is dict else "[" if kind is list else "(")
    first = True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if not first:
                parts.append(", ")
            first = False
            parts.append("'" + key.replace("'", "\\'") + "': ")
            if not _walk(item, parts, level, maxlevels):
                return False
    else:
        for item in value:
            if not first:
                parts.append(", ")
            first = False
            if not _walk(item, parts, level, maxlevels):
                return False
    parts.append("}" if kind is dict else "]" if kind is list else ",)" if len(value) == 1 else ")")
    return True
