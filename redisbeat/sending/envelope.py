"""A stored message as text, cut where each message's own values go.

Every message of one task and options, to one queue, is the same JSON but for a few values:
its ids, due time, expiry and delivery tag, and its entry's body, argument reprs and name.
An :class:`Envelope` keeps the text between those values, so a message is that text joined
with its own values, each encoded as the JSON encoder encodes it: a few microseconds where
encoding the whole message takes ten. An envelope is kept only when it renders the message
it was cut from, and the same message with awkward text in every slot, exactly as the
encoder does; a value of any other type than text, integer or null is encoded in full.
Headers that a ``before_task_publish`` receiver set (trace context, say) are slots too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

#: Where a message's own values are: (the part of the message, the key), "" for the message.
SLOTS = (
    ("", "body"),
    ("headers", "id"),
    ("headers", "root_id"),
    ("headers", "expires"),
    ("headers", "argsrepr"),
    ("headers", "kwargsrepr"),
    ("headers", "redisbeat_entry"),
    ("headers", "redisbeat_key"),
    ("headers", "redisbeat_due"),
    ("properties", "correlation_id"),
    ("properties", "expiration"),
    ("properties", "delivery_tag"),
)
#: A slot's marker as the encoder writes it (a NUL is always escaped).
_MARKED = re.compile(r'"\\u0000(\d+)\\u0000"')
#: Text that exercises every escape: quotes, backslashes, controls, non-ASCII, astral.
AWKWARD = 'é "q" \\ /\n\t\x01 \u2028 \U0001f600 '

Slot = tuple[str, str]
Encode = Callable[[Any], str]


class Envelope:
    """The text of a message between its slots, and which slot goes between each two."""

    def __init__(self, parts: list[str], slots: list[Slot]) -> None:
        self.parts = parts
        self.slots = slots

    @classmethod
    def cut(
        cls, message: dict[str, Any], encode: Encode, own_headers: tuple[str, ...] = ()
    ) -> Envelope | None:
        """The envelope of ``message`` (as ``encode`` writes it), with ``own_headers`` as slots
        too; None if it cannot be cut."""
        own = [("headers", key) for key in own_headers if ("headers", key) not in SLOTS]
        slots = [slot for slot in (*SLOTS, *own) if slot[1] in _part(message, slot[0])]
        marked = _with(message, slots, lambda i, _: f"\x00{i}\x00")
        pieces = _MARKED.split(encode(marked))
        order = [int(i) for i in pieces[1::2]]
        if sorted(order) != list(range(len(slots))):
            return None
        envelope = cls(pieces[0::2], [slots[i] for i in order])
        awkward = _with(message, slots, _awkward)
        for probe in (message, awkward):
            if envelope.render(probe) != encode(probe):
                return None
        return envelope

    def render(self, message: dict[str, Any]) -> str | None:
        """``message`` encoded; None when a value in a slot is not text, integer or null."""
        parts = self.parts
        out = [parts[0]]
        for (where, key), part in zip(self.slots, parts[1:], strict=True):
            value = message[key] if not where else message[where][key]
            if type(value) is str:
                out.append(encode_basestring_ascii(value))
            elif type(value) is int:
                out.append(int.__repr__(value))
            elif value is None:
                out.append("null")
            else:
                return None
            out.append(part)
        return "".join(out)


def _part(message: dict[str, Any], where: str) -> dict[str, Any]:
    part: dict[str, Any] = message if not where else message[where]
    return part


def _with(
    message: dict[str, Any], slots: list[Slot], value: Callable[[int, Any], Any]
) -> dict[str, Any]:
    """A copy of ``message`` with ``value(i, old)`` in slot ``i``."""
    copy = {**message, "headers": dict(message["headers"])}
    copy["properties"] = dict(message["properties"])
    for i, (where, key) in enumerate(slots):
        part = _part(copy, where)
        part[key] = value(i, part[key])
    return copy


def _awkward(i: int, old: Any) -> Any:
    return -(2**62) - i if type(old) is int else f"{AWKWARD}{i}"
