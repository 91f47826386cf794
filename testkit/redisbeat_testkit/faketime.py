"""Debian's libfaketime, for processes whose clock a test moves (``make test`` installs it)."""

from __future__ import annotations

import glob

FAKETIME_GLOBS = (
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def libfaketime() -> str:
    """The path of libfaketime.so.1 (package ``faketime``)."""
    for pattern in FAKETIME_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise RuntimeError("libfaketime is not installed (Debian/Ubuntu: apt-get install faketime)")
