"""A real browser for the admin tests: Debian's Chromium driven by Playwright.

Needs Debian's Chromium (``make chromium``), or ``CHROMIUM=/path/to/chromium``; Playwright's
own downloaded browsers are never used. The fixtures (``browser``, ``page``) are in
conftest.py; the helpers here are imported by the browser test modules.
"""

from __future__ import annotations

import os
import re
import shutil

from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

CHANGELIST = "/admin/redisbeat_django/periodictask/"
AT_CHANGELIST = re.compile(re.escape(CHANGELIST) + r"(\?.*)?$")
#: Playwright's waits, in milliseconds; every wait polls up to this and never sleeps blindly.
TIMEOUT = 10_000
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def chromium_executable() -> str:
    """``$CHROMIUM``, else ``chromium`` on the PATH, else Debian's /usr/bin/chromium."""
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError(
        "Chromium is not installed: run `make chromium` (Debian: apt-get install chromium) "
        "or set CHROMIUM to a Chromium binary"
    )


def log_in(page: Page) -> None:
    """Log in as a new superuser, landing on the periodic tasks' change list."""
    User.objects.create_superuser("admin", "a@example.com", "pw")
    page.goto(f"/admin/login/?next={CHANGELIST}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    expect(page).to_have_url(AT_CHANGELIST)
