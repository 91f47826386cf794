"""The ``redisbeat`` command: what an operator does to a running deployment.

redisbeat -A proj reshard 8
redisbeat --url redis-cluster://10.0.0.1:7000 --prefix redisbeat reshard 8
"""

from __future__ import annotations

from collections.abc import Callable

import click
from celery.app.utils import find_app

from .config import MAX_SHARDS, Config
from .errors import RedisBeatError
from .store import ScheduleStore
from .store.reshard import Reshard

Opener = Callable[[], ScheduleStore]


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

    def open_store() -> ScheduleStore:
        try:
            if app is not None:
                return ScheduleStore.from_app(find_app(app))
            return ScheduleStore.from_config(Config(redis_url=url or "", key_prefix=prefix))
        except RedisBeatError as exc:
            raise click.ClickException(str(exc)) from exc

    ctx.obj = open_store


@main.command()
@click.argument("shards", type=click.IntRange(1, MAX_SHARDS))
@click.option(
    "--claims-timeout",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds entries that beats keep claimed may hold up the end of the move.",
)
@click.pass_obj
def reshard(open_store: Opener, shards: int, claims_timeout: float) -> None:
    """Split the deployment's entries into SHARDS shards, while beats and editors run.

    No occurrence is lost or sent twice. Run it again after an interruption: it finishes
    the move it began. Then set redisbeat_shards = SHARDS everywhere (processes follow the
    count recorded in Redis, and say so while their setting differs).
    """
    store = open_store()
    try:
        Reshard(store, say=click.echo).run(shards, claims_timeout=claims_timeout)
    except RedisBeatError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        store.close()


@main.command()
@click.argument("owner")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.pass_obj
def pending(open_store: Opener, owner: str, limit: int) -> None:
    """List OWNER's pending delayed tasks in due order: due time, state, key, task."""
    store = open_store()
    try:
        for task in store.pending(owner, limit):
            due = task.eta.isoformat(timespec="milliseconds")
            click.echo(f"{due}  {task.state:<8} {task.key}  {task.task}")
    except RedisBeatError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        store.close()


@main.command()
@click.argument("keys", nargs=-1, required=True)
@click.option("--owner", is_flag=True, help="KEYS are owners: cancel all their pending tasks.")
@click.pass_obj
def cancel(open_store: Opener, keys: tuple[str, ...], owner: bool) -> None:
    """Cancel delayed tasks by key (or every pending task of the owners named). A task a
    beat is sending already is sent, and reported as too late."""
    store = open_store()
    try:
        for key in keys:
            if owner:
                click.echo(f"{key}: {store.cancel_owner(key)} cancelled")
            elif store.cancel(key):
                click.echo(f"{key}: cancelled")
            else:
                task = store.get_delayed(key)
                click.echo(f"{key}: not cancelled ({task.state if task else 'no such task'})")
    except RedisBeatError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        store.close()
