"""Occurrence ids: the task id of each occurrence, the same whichever beat sends it."""

from __future__ import annotations

import hashlib
import uuid

#: Namespace of occurrence ids (UUID5), fixed forever so ids stay stable across releases.
OCCURRENCE_NAMESPACE = uuid.UUID("6f1c2b5e-8d3a-4e0f-9b7a-2c4d6e8f0a1b")
_NAMESPACE_BYTES = OCCURRENCE_NAMESPACE.bytes


def occurrence_id(prefix: str, name: str, due_ms: int) -> str:
    """The task id of the occurrence of entry ``name`` due at ``due_ms``.

    Every beat derives the same id for the same occurrence, so a re-send after a crash
    carries the id of the first send and can be dropped downstream. It is
    ``str(uuid.uuid5(OCCURRENCE_NAMESPACE, f"{prefix}\\x00{name}\\x00{due_ms}"))``, worked out
    without the UUID object (a beat makes one per send).
    """
    digest = bytearray(
        hashlib.sha1(_NAMESPACE_BYTES + f"{prefix}\x00{name}\x00{due_ms}".encode()).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
