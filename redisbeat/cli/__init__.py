"""``celery -A proj redisbeat <command>``: see and steer a running deployment.

Registered as a Celery subcommand (the ``celery.commands`` entry point), so ``-A proj``, the
app's settings and ``--help`` work as for ``celery beat``. The same commands also run as
``redisbeat -A proj <command>`` or ``redisbeat --url redis://... <command>``. Celery's
command line imports this module for every command, which is how a ``celery worker`` whose
app sets ``redisbeat_track_runs`` finds the worker hook (:mod:`redisbeat.worker`).
"""

from __future__ import annotations

import functools
from typing import Any

import click
from celery.app.utils import find_app

from .. import worker as _worker  # noqa: F401  (connects the worker hook's start-up)
from ..config import Config
from . import delayed, deployment, entries, transfer
from .context import USAGE, Failed, Tool

__all__ = ["celery_command", "main"]

COMMANDS = [
    *entries.COMMANDS,
    *deployment.COMMANDS,
    *transfer.COMMANDS,
    *delayed.COMMANDS,
]
#: A one-off command gives up on an unresponsive Redis after this many seconds.
TIMEOUTS = {"socket_timeout": 10.0, "socket_connect_timeout": 5.0}


@click.group(name="redisbeat")
@click.pass_context
def celery_command(ctx: click.Context) -> None:
    """Operate redisbeat: its entries, beats and delayed tasks, in the app's Redis."""
    app: Any = ctx.obj.app  # Celery's CLIContext

    def config() -> Config:
        return Config.from_app(app)

    _open(ctx, config, lambda: app)


@click.group()
@click.option(
    "-A",
    "--app",
    metavar="MODULE",
    help="The Celery app whose settings name the deployment (as for celery -A).",
)
@click.option("--url", help="The deployment's redisbeat_redis_url, when no app is given.")
@click.option(
    "--prefix", default="redisbeat", show_default=True, help="redisbeat_key_prefix, with --url."
)
@click.pass_context
def main(ctx: click.Context, app: str | None, url: str | None, prefix: str) -> None:
    """Operate a redisbeat deployment: its schedules live in Redis, named by the app's
    settings or by --url and --prefix."""
    if (app is None) == (url is None):
        raise click.UsageError("name the deployment with -A/--app or with --url")

    celery_app = functools.cache(functools.partial(_load_app, app)) if app is not None else None

    def config() -> Config:
        if celery_app is not None:
            return Config.from_app(celery_app())
        return Config(redis_url=url or "", key_prefix=prefix, redis_options=dict(TIMEOUTS))

    _open(ctx, config, celery_app)


def _load_app(name: str) -> Any:
    try:
        return find_app(name)
    except Exception as exc:  # what importing the user's module raised
        raise Failed(f"cannot load the Celery app {name!r}: {exc}", USAGE) from None


def _open(ctx: click.Context, config: Any, app: Any) -> None:
    tool = Tool(config, app)
    ctx.obj = tool
    ctx.call_on_close(tool.close)


for _command in COMMANDS:
    celery_command.add_command(_command)
    main.add_command(_command)
