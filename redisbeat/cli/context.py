"""What every command shares: the store it opens once, how it prints (rich tables for people,
JSON for scripts) and how an error ends it (one line, and an exit code scripts can test).

Exit codes:

====  ==========================================================================
0     done
1     refused: bad input (the message names the entry and the field), a conflict
2     usage: an unknown command or option, a missing argument
3     Redis: unreachable, or it answered with an error not listed below
4     not found: no entry, quarantined definition or delayed task of that name
5     unhealthy: ``status`` found no beat alive
6     incompatible: a server (or store) redisbeat cannot work with (``Incompatible``)
7     no password: Redis requires one and none was given (``NOAUTH``)
8     login refused: a wrong user or password, or a disabled user (``WRONGPASS``)
9     permission: the ACL user lacks a permission (``NOPERM``)
10    TLS: the handshake failed (a certificate, or TLS on one side only)
11    no such database: the URL names a database the server does not have
====  ==========================================================================

7 to 11 are :data:`redisbeat.store.trouble.EXIT_CODES`: a beat stopped by 7, 8 or 11 exits
with the same status.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any, ParamSpec, TypeVar
from zoneinfo import ZoneInfo

import click
from rich.console import Console
from rich.table import Table

from ..config import Config
from ..errors import EntryNotFound, Incompatible, OwnershipError, RedisBeatError
from ..store import ScheduleStore
from ..store.errors import RedisTrouble, StoreError, StoreUnavailable
from ..store.formats import check_format

P = ParamSpec("P")
R = TypeVar("R")

OK, REFUSED, USAGE, REDIS, NOT_FOUND, UNHEALTHY = 0, 1, 2, 3, 4, 5


class Failed(click.ClickException):
    """A one-line error with the exit code that says what kind."""

    def __init__(self, message: str, exit_code: int = REFUSED) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click's default, per instance


#: The width of output that goes to no terminal: wide enough for any row.
PIPED_WIDTH = 10_000


class Tool:
    """The ``ctx.obj`` of every command: opens the deployment's store at first use."""

    def __init__(self, config: Callable[[], Config], app: Callable[[], Any] | None) -> None:
        self._config = config
        self._settings: Config | None = None
        self._app = app
        self._store: ScheduleStore | None = None
        self.out = Console(highlight=False, soft_wrap=False)
        if not self.out.is_terminal and "COLUMNS" not in os.environ:
            # Piped or redirected (grep, a file, a CI log): each row on one line, where rich
            # would fold the cells at 80 columns.
            self.out.width = PIPED_WIDTH
        self.err = Console(stderr=True, highlight=False)

    @property
    def config(self) -> Config:
        """The deployment's settings, read once."""
        if self._settings is None:
            self._settings = self._config()
        return self._settings

    @property
    def store(self) -> ScheduleStore:
        if self._store is None:
            store = ScheduleStore.from_config(self.config)
            self._store = store
            check_format(store)  # before a command reads what it might misread
        return self._store

    @property
    def app(self) -> Any | None:
        """The Celery app (None with ``--url``: no app, so no task names to check against)."""
        return self._app() if self._app is not None else None

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def when(self, at: datetime | None) -> str:
        """A time in the app's zone, for a line of output ("none": no time)."""
        return cell_text(at.astimezone(ZoneInfo(self.store.timezone))) if at else "none"

    def say(self, text: str) -> None:
        self.out.print(text, markup=False)

    def table(self, columns: Iterable[str], rows: Iterable[Iterable[Any]], title: str = "") -> None:
        table = Table(*columns, title=title or None, title_justify="left")
        for column in table.columns:
            column.overflow = "fold"
        for row in rows:
            table.add_row(*(cell_text(c) for c in row))
        self.out.print(table)

    def json(self, value: Any) -> None:
        click.echo(dumps(value))


def guarded(command: Callable[P, R]) -> Callable[P, R]:
    """Every error a command meets as one line on stderr and its exit code, no traceback."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except StoreError as exc:
            tool = next((a for a in args if isinstance(a, Tool)), None)
            raise Failed(*store_failure(exc, tool)) from None
        except Incompatible as exc:
            raise Failed(str(exc), exc.exit_code) from None
        except EntryNotFound as exc:
            raise Failed(_not_found(exc, args), NOT_FOUND) from None
        except OwnershipError as exc:
            raise Failed(
                f"entry {exc.name!r} is owned by source {exc.owner!r}: --force takes it over"
            ) from None
        except RedisBeatError as exc:
            raise Failed(str(exc), REFUSED) from None
        except OSError as exc:  # a FILE argument (Redis's own socket errors are StoreErrors)
            where = f"{exc.filename}: " if exc.filename else ""
            raise Failed(f"cannot open {where}{exc.strerror or exc}", USAGE) from None

    return run


def _not_found(exc: EntryNotFound, args: tuple[Any, ...]) -> str:
    """No such entry, and where it went when it was set aside (a corrupt definition, a
    bad beat_schedule item, too many failed sends)."""
    tool = next((a for a in args if isinstance(a, Tool)), None)
    try:
        aside = tool is not None and exc.name in tool.store.quarantined()
    except RedisBeatError:
        aside = False
    if aside:
        return f"{exc}: it was set aside; 'quarantine show {exc.name}' says why and what to do"
    return str(exc)


def store_failure(exc: StoreError, tool: Tool | None = None) -> tuple[str, int]:
    """The line and exit code of a store error: trouble mended in a setting or the server's
    configuration (a password, TLS, an ACL, the database) names the URL, the fix and has an
    exit code of its own; an outage or another error reply is exit code 3. Keys of the
    wrong type are named with the type each holds, when ``tool`` can look."""
    trouble = exc.trouble
    if trouble.misconfigured or isinstance(exc, Incompatible):
        return exc.describe(), trouble.exit_code
    if isinstance(exc, StoreUnavailable):
        at = f" at {exc.where}" if exc.where else ""
        return (
            f"cannot reach Redis{at} ({exc}); check the host and port, and that the server "
            "is running and accepts connections from this host"
        ), REDIS
    if trouble.kind == "wrongtype" and tool is not None:
        return _wrong_types(exc, tool), REDIS
    return exc.describe(), REDIS


def _wrong_types(exc: StoreError, tool: Tool) -> str:
    """The line for a key of the wrong type, naming those of the deployment."""
    try:
        wrong = tool.store.wrong_types()
    except RedisBeatError:
        wrong = []
    if not wrong:
        return exc.describe()
    keys = "; ".join(
        f"{key} is a {found} where redisbeat keeps a {want}" for key, found, want in wrong
    )
    return RedisTrouble("wrongtype", keys).describe(exc.where or "the URL configured")


pass_tool = click.make_pass_decorator(Tool)

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of a table."
)


def plain(value: Any) -> Any:
    """A value as JSON holds it: records as objects, times in ISO 8601."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in asdict(value).items()}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(plain(value), ensure_ascii=False, default=str)


def cell_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    return str(value)
