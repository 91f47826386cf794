"""docs/security.md, checked: TLS to Redis, the documented ACL users, hostile data in Redis.

Real redis-server processes (one TLS-only, one loading the documented ACL file) and real
``celery beat -S redisbeat.RedisScheduler`` processes; nothing about Redis is faked.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import secrets
import shutil
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
import trustme
from celery import Celery
from click.testing import CliRunner

from redisbeat import Entry, Interval, ScheduleStore
from redisbeat.cli import main as redisbeat_cli
from redisbeat.config import Config
from redisbeat.errors import EntryNotFound
from redisbeat.refusals import unregistered
from redisbeat.schedule.timing import from_ms
from redisbeat.store.keys import Keys
from redisbeat.store.receipts import Delivery
from redisbeat_testkit.cluster import ClusterRig
from redisbeat_testkit.messages import read_queue
from redisbeat_testkit.ports import free_port, wait_until
from redisbeat_testkit.processes import Beats
from redisbeat_testkit.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent
SECURITY_PAGE = ROOT / "docs" / "security.md"
#: The placeholder password of the documented ACL lines; the tests use a random one.
DOC_PASSWORD = "s3cret"
SECOND = 1000
BeatsFor = Callable[..., Beats]


# -- TLS ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    other_ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1 and localhost, and an unrelated CA."""
    directory = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(
        directory / "ca.pem",
        directory / "other-ca.pem",
        directory / "cert.pem",
        directory / "key.pem",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    trustme.CA().cert_pem.write_to_path(str(files.other_ca))
    server_cert.private_key_pem.write_to_path(str(files.key))
    with files.cert.open("wb") as handle:
        for blob in server_cert.cert_chain_pems:
            handle.write(blob.bytes())
    return files


@pytest.fixture(scope="module")
def tls_redis(tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that speaks TLS only (no plain port), on 127.0.0.1 and 127.0.0.2."""
    port = free_port()
    server = RedisServer(
        tmp_path_factory.mktemp("tls-redis"),
        port=port,
        extra_args=[
            *("--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "127.0.0.2"),
            *("--tls-cert-file", str(tls.cert), "--tls-key-file", str(tls.key)),
            *("--tls-ca-cert-file", str(tls.ca), "--tls-auth-clients", "no"),
        ],
        client_kwargs={"ssl": True, "ssl_ca_certs": str(tls.ca)},
    ).start()
    yield server
    server.stop()


def rediss(server: RedisServer, db: int = 0, host: str = "127.0.0.1", **query: str) -> str:
    params = "&".join(f"{k}={quote(v, safe='/')}" for k, v in query.items())
    return f"rediss://{host}:{server.port}/{db}" + (f"?{params}" if params else "")


def tls_store(server: RedisServer, tls: TlsFiles, prefix: str, db: int = 0) -> ScheduleStore:
    """The test's own view of a schedule on the TLS server (verified with the right CA)."""
    url = rediss(server, db, ssl_ca_certs=str(tls.ca))
    return ScheduleStore.from_config(Config(redis_url=url, key_prefix=prefix))


def app_for(**settings: Any) -> Celery:
    app = Celery("security", broker="memory://", set_as_current=False)
    app.conf.update(settings)
    return app


@pytest.mark.parametrize("how", ["query string", "redisbeat_redis_options", "broker_use_ssl"])
def test_the_store_api_runs_over_tls_with_certificate_and_host_name_verified(
    tls: TlsFiles, tls_redis: RedisServer, prefix: str, how: str
) -> None:
    if how == "query string":
        url = rediss(
            tls_redis, ssl_cert_reqs="required", ssl_ca_certs=str(tls.ca), ssl_check_hostname="true"
        )
        app = app_for(redisbeat_redis_url=url)
    elif how == "redisbeat_redis_options":
        options = {
            "ssl_ca_certs": str(tls.ca),
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
        }
        app = app_for(redisbeat_redis_url=rediss(tls_redis), redisbeat_redis_options=options)
    else:  # the schedule in a TLS broker's Redis: redisbeat reuses broker_use_ssl
        ssl_options = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": str(tls.ca)}
        app = app_for(broker_url=rediss(tls_redis), broker_use_ssl=ssl_options)
    app.conf.redisbeat_key_prefix = prefix
    store = ScheduleStore.from_app(app)
    try:
        store.upsert(Entry("report", "proj.report", Interval(300)))
        store.run_now("report")
        assert store.get("report").schedule == Interval(300)
        assert store.state("report").next_run_at is not None
        # The server has no plain port: the commands above went over TLS. This one shows the
        # connection verified the certificate chain and the host name.
        connection = store.client.connection_pool.get_connection()
        try:
            sock = connection._sock
            assert isinstance(sock, ssl.SSLSocket)
            assert sock.context.verify_mode == ssl.CERT_REQUIRED and sock.context.check_hostname
            assert sock.getpeercert() is not None
        finally:
            store.client.connection_pool.release(connection)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("host", "ca", "reason"),
    [
        ("127.0.0.1", "other_ca", "CERTIFICATE_VERIFY_FAILED"),
        ("127.0.0.2", "ca", "IP address mismatch"),
    ],
    ids=["another CA", "a host the certificate does not name"],
)
def test_a_certificate_that_does_not_verify_fails_at_once_naming_the_server(
    tls: TlsFiles, tls_redis: RedisServer, host: str, ca: str, reason: str
) -> None:
    url = rediss(tls_redis, host=host, ssl_ca_certs=str(getattr(tls, ca)))
    store = ScheduleStore.from_app(app_for(redisbeat_redis_url=url))
    started = time.monotonic()
    try:
        with pytest.raises(redis.ConnectionError) as failure:
            store.now_ms()
    finally:
        store.close()
    assert time.monotonic() - started < 3, "a verification failure must not wait for a timeout"
    message = str(failure.value)
    assert f"{host}:{tls_redis.port}" in message
    assert "CERTIFICATE_VERIFY_FAILED" in message and reason in message


@pytest.mark.parametrize(
    ("how", "said", "fix"),
    [
        ("another CA", "did not pass the TLS certificate check", "give redis-py the CA"),
        (
            "a redis:// URL",
            "closed the connection at its first command, as a port that speaks only TLS does",
            "use a rediss:// URL",
        ),
    ],
)
def test_the_command_line_says_a_tls_mismatch_in_one_line_naming_the_url_with_exit_code_10(
    tls: TlsFiles, tls_redis: RedisServer, how: str, said: str, fix: str
) -> None:
    if how == "another CA":
        url = rediss(tls_redis, ssl_ca_certs=str(tls.other_ca))
    else:
        url = f"redis://:{DOC_PASSWORD}@127.0.0.1:{tls_redis.port}/0"
    result = CliRunner().invoke(redisbeat_cli, ["--url", url, "status"])
    assert result.exit_code == 10, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"Error: Redis at {url.replace(DOC_PASSWORD, '***')} {said} ("), line
    assert fix in line and DOC_PASSWORD not in line


def test_a_rediss_url_naming_a_plain_port_is_tls_trouble_saying_to_use_redis(
    redis_server: RedisServer, prefix: str
) -> None:
    url = f"rediss://127.0.0.1:{redis_server.port}/0"  # nothing answers the handshake there
    options = {"socket_connect_timeout": 0.2, "socket_timeout": 0.5}  # redis-py 5 uses this
    store = ScheduleStore.from_config(Config(url, key_prefix=prefix, redis_options=options))
    try:
        with pytest.raises(redis.TimeoutError) as failure:  # as redis-py raised it
            store.now_ms()
    finally:
        store.close()
    trouble = failure.value.trouble  # type: ignore[attr-defined]
    assert (trouble.kind, trouble.exit_code) == ("tls", 10)
    line = failure.value.describe()  # type: ignore[attr-defined]
    assert line.startswith(f"Redis at {url} did not answer the TLS handshake (")
    assert "for a plain one, use redis://" in line


def test_beats_keep_their_schedule_over_tls_and_send_with_the_url_or_broker_use_ssl(
    tls: TlsFiles, tls_redis: RedisServer, redis_server: RedisServer, beats_for: BeatsFor
) -> None:
    """Beat A: rediss:// store URL with the CA in the query, plain broker. Beat B: no store
    URL, a rediss:// broker with broker_use_ssl, which the store reuses (without it redis-py
    would verify against the system CAs, which do not know this CA, and nothing would go out).
    """
    prefix_a, prefix_b = f"a{secrets.token_hex(5)}", f"b{secrets.token_hex(5)}"
    store_a = tls_store(tls_redis, tls, prefix_a)
    store_b = tls_store(tls_redis, tls, prefix_b, db=1)
    ssl_options = json.dumps({"ssl_cert_reqs": "required", "ssl_ca_certs": str(tls.ca)})
    beats = beats_for(redis_server, prefix_a)
    beat_a = beats.start(1, TEST_STORE_URL=rediss(tls_redis, ssl_ca_certs=str(tls.ca)))[0]
    beat_b = beats.start(
        1,
        TEST_PREFIX=prefix_b,
        TEST_BROKER_URL=rediss(tls_redis, 1),
        TEST_BROKER_USE_SSL=ssl_options,
        TEST_STORE_URL="",
    )[0]
    queue_a = redis.Redis.from_url(redis_server.url(1), decode_responses=True)
    try:
        store_a.upsert(Entry("tick-a", "proj.ping", Interval(1)))
        store_b.upsert(Entry("tick-b", "proj.ping", Interval(1)))
        queue_b = store_b.client  # the TLS broker's database 1, where B's schedule lives too
        sent: Counter[str] = Counter()

        def both_sent_twice() -> bool:
            sent.update(s.entry for s in read_queue(queue_a) + read_queue(queue_b))
            return sent["tick-a"] >= 2 and sent["tick-b"] >= 2

        wait_until(both_sent_twice, 30, "both beats to send over TLS")
        # A send is recorded when its batch is finished, just after it reached the broker.
        wait_until(lambda: store_a.state("tick-a").total_run_count >= 2, 10, "A's runs")
        wait_until(lambda: store_b.state("tick-b").total_run_count >= 2, 10, "B's runs")
        assert f"127.0.0.1:{tls_redis.port} db=1 prefix={prefix_b}" in beat_b.output()
        assert beat_a.process.poll() is None and beat_b.process.poll() is None
    finally:
        queue_a.close()
        store_a.close()
        store_b.close()


def test_a_beat_with_the_wrong_ca_logs_the_verification_error_and_recovers_when_it_is_fixed(
    tls: TlsFiles,
    tls_redis: RedisServer,
    redis_server: RedisServer,
    beats_for: BeatsFor,
    prefix: str,
    tmp_path: Path,
) -> None:
    ca_file = tmp_path / "ca-in-use.pem"
    shutil.copy(tls.other_ca, ca_file)
    store = tls_store(tls_redis, tls, prefix)
    store.upsert(Entry("tick", "proj.ping", Interval(1)))
    url = rediss(tls_redis, ssl_ca_certs=str(ca_file))
    beat = beats_for(redis_server, prefix, TEST_STORE_URL=url).start(1)[0]
    queue = redis.Redis.from_url(redis_server.url(1), decode_responses=True)
    try:
        wait_until(
            lambda: "CERTIFICATE_VERIFY_FAILED" in beat.output(), 30, "the verification error"
        )
        line = next(x for x in beat.output().splitlines() if "CERTIFICATE_VERIFY_FAILED" in x)
        assert f"127.0.0.1:{tls_redis.port}" in line and "ERROR" in line
        assert beat.process.poll() is None, "the beat must keep retrying, not exit"
        assert not [s for s in read_queue(queue) if s.entry == "tick"]
        shutil.copy(tls.ca, ca_file)  # the operator fixes the CA file; no restart
        wait_until(
            lambda: any(s.entry == "tick" for s in read_queue(queue)),
            30,
            "the beat to connect at a retry and send",
        )
        assert beat.process.poll() is None
    finally:
        queue.close()
        store.close()


# -- ACL ----------------------------------------------------------------------------------------

#: Commands that need no permission: logging in.
NO_PERMISSION_NEEDED = {"auth", "hello"}
#: What the tests themselves run on the ACL server while measuring. (Their INFO, which reads
#: the statistics, is not in the statistics it reads: an INFO counted is the beat's.)
MEASURING = {"config|resetstat"}
#: Optional commands whose refusal is ignored: what redis-py sends on connect, and the
#: CONFIG GET of appendonly and save a beat asks once at its start (docs/security.md: the
#: documented users lack it, since it reads the server's passwords too).
TOLERATED_REFUSALS = {"client|setinfo", "client|maint_notifications", "config|get"}


@dataclass(frozen=True)
class DocumentedUser:
    """One ACL user of docs/security.md, in both documented forms."""

    name: str
    setuser: str  # the rules of the ``ACL SETUSER <name> ...`` line
    aclfile: str  # the whole ``user <name> ...`` line

    def setuser_args(self, password: str) -> list[str]:
        return ["ACL", "SETUSER", self.name, *_with_password(self.setuser, password).split()]

    def aclfile_line(self, password: str) -> str:
        return _with_password(self.aclfile, password)

    @property
    def commands(self) -> set[str]:
        """The commands the user is granted (the documented lines grant no categories)."""
        granted = [r[1:].lower() for r in self.setuser.split() if r.startswith("+")]
        assert not [c for c in granted if c.startswith("@")], "no command categories"
        return set(granted)


def _with_password(rules: str, password: str) -> str:
    assert rules.count(f">{DOC_PASSWORD}") == 1, rules
    return rules.replace(f">{DOC_PASSWORD}", f">{password}")


def documented_users() -> dict[str, DocumentedUser]:
    page = SECURITY_PAGE.read_text(encoding="utf-8")
    text = "\n".join(re.findall(r"^```text\n(.*?)^```", page, re.M | re.S))  # code blocks only
    # The line that makes a user starts with reset; others add to it (a cluster's needs).
    setusers = {
        name: rules
        for name, rules in re.findall(r"^ACL SETUSER (\w+) (.+?) *$", text, re.M)
        if rules.startswith("reset")
    }
    lines = {m[1]: m[0].rstrip() for m in re.finditer(r"^user (\w+) .+$", text, re.M)}
    assert set(setusers) == set(lines) == {"beat", "editor", "worker"}, (setusers, lines)
    return {name: DocumentedUser(name, setusers[name], lines[name]) for name in setusers}


def cluster_additions() -> dict[str, list[str]]:
    """The documented SETUSER lines that only add to a user: what a Redis Cluster needs."""
    page = SECURITY_PAGE.read_text(encoding="utf-8")
    text = "\n".join(re.findall(r"^```text\n(.*?)^```", page, re.M | re.S))
    found = {
        name: rules.split()
        for name, rules in re.findall(r"^ACL SETUSER (\w+) (.+?) *$", text, re.M)
        if not rules.startswith("reset")
    }
    assert set(found) == {"beat", "editor", "worker"}, found
    return found


@dataclass
class AclRedis:
    server: RedisServer
    password: str
    users: dict[str, DocumentedUser]
    #: ``ACL GETUSER`` of every documented user as loaded from the documented users.acl lines.
    from_file: dict[str, Any]
    admin: redis.Redis

    def reset(self) -> None:
        """Every documented user exactly as the ACL SETUSER lines make it; an empty server."""
        for user in self.users.values():
            command(self.admin, *user.setuser_args(self.password))
        self.admin.flushall()
        command(self.admin, "ACL", "LOG", "RESET")

    def url(self, user: str, db: int = 0) -> str:
        return f"redis://{user}:{self.password}@127.0.0.1:{self.server.port}/{db}"

    def start_measuring(self) -> None:
        """Empty the script cache (so SCRIPT LOAD is needed again) and zero the command stats."""
        self.admin.script_flush()
        self.admin.config_resetstat()

    def commands_run(self) -> set[str]:
        """Every command Redis ran since start_measuring(), inside scripts too; none refused."""
        stats = self.admin.info("commandstats")
        assert not refused_beyond_tolerated(stats), stats
        log = command(self.admin, "ACL", "LOG")
        denials = [_field(e, "object") for e in log]
        assert not set(denials) - TOLERATED_REFUSALS, log
        ran = {k.removeprefix("cmdstat_") for k, v in stats.items() if v["calls"]}
        return ran - NO_PERMISSION_NEEDED - MEASURING


def refused_beyond_tolerated(stats: dict[str, Any]) -> set[str]:
    """The commands of ``INFO commandstats`` that Redis refused, but for those tolerated."""
    refused = {k.removeprefix("cmdstat_") for k, v in stats.items() if v["rejected_calls"]}
    return refused - TOLERATED_REFUSALS


def command(client: redis.Redis, *args: Any) -> Any:
    """A raw Redis command (redis-py leaves execute_command untyped)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def _field(entry: Any, name: str) -> Any:
    if isinstance(entry, dict):
        return entry[name]
    return dict(zip(entry[::2], entry[1::2], strict=True))[name]  # RESP2 form


@pytest.fixture(scope="module")
def acl_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclRedis]:
    """A redis-server that loads the documented users.acl lines at start."""
    directory = tmp_path_factory.mktemp("acl-redis")
    password = secrets.token_hex(12)
    users = documented_users()
    aclfile = directory / "users.acl"
    lines = ["user default on nopass ~* &* +@all"]
    lines += [u.aclfile_line(password) for u in users.values()]
    aclfile.write_text("\n".join(lines) + "\n", encoding="utf-8")
    server = RedisServer(directory, extra_args=["--aclfile", str(aclfile)]).start()
    admin = redis.Redis(port=server.port, decode_responses=True)
    from_file = {name: command(admin, "ACL", "GETUSER", name) for name in users}
    yield AclRedis(server, password, users, from_file, admin)
    admin.close()
    server.stop()


def test_the_documented_setuser_and_users_acl_lines_make_the_same_users(
    acl_redis: AclRedis,
) -> None:
    for name, loaded in acl_redis.from_file.items():
        assert loaded is not None, f"users.acl did not define {name}"
    acl_redis.reset()
    for name, user in acl_redis.users.items():
        assert command(acl_redis.admin, "ACL", "GETUSER", name) == acl_redis.from_file[name]
        # The SETUSER line starts with `reset`, the file line with nothing: neither inherits.
        assert user.setuser.split()[0] == "reset" and " -@all " in user.aclfile


def test_a_beat_sends_every_occurrence_with_exactly_the_documented_beat_acl(
    acl_redis: AclRedis, beats_for: BeatsFor, tmp_path: Path
) -> None:
    """Every documented command is one the beat ran, and the beat needed no other.

    The scenario takes every path a beat has: it syncs beat_schedule (adds one entry,
    removes a stale one), sends, finishes a one-off, drops a schedule member without a
    definition, sets a corrupt definition aside, listens for changes and deregisters.
    """
    acl_redis.reset()
    server = acl_redis.server
    broker = RedisServer(tmp_path / "broker")  # elsewhere, so the stats are the beat's alone
    broker.directory.mkdir()
    broker.start()
    store = ScheduleStore(redis.Redis(port=server.port, decode_responses=True))
    keys = store.keys
    queue = redis.Redis.from_url(broker.url(0), decode_responses=True)
    try:
        store.upsert(Entry("once", "proj.ping", Interval(1), one_off=True))
        store.delay("proj.ping", countdown=1, key="delayed")
        store.upsert(Entry("stale", "proj.ping", Interval(3600), source="config"))
        store.client.hset(keys.entries, "broken", "{not json")
        store.client.zadd(keys.schedule, {"broken": 0, "ghost": 0})
        acl_redis.start_measuring()
        static = {"every-second": {"task": "proj.ping", "schedule": 1}}
        beats = beats_for(
            server,
            "redisbeat",
            TEST_BROKER_URL=broker.url(0),
            TEST_STORE_URL=acl_redis.url("beat"),
            TEST_BEAT_SCHEDULE=json.dumps(static),
            TEST_HISTORY="1",  # a history of one run: pushed, and trimmed past three
            TEST_SUMMARY="1",  # summaries recorded: SET, and XADD + EXPIRE to the stream
            TEST_METRICS_PORT=str(free_port()),  # the deployment's gauges read as well
        )
        beat = beats.start(1)[0]
        sent: Counter[tuple[str, int]] = Counter()

        def done() -> bool:
            sent.update((s.entry or f"key:{s.key}", s.due_ms) for s in read_queue(queue))
            seconds = [due for name, due in sent if name == "every-second"]
            once = {"once", "key:delayed"} <= {name for name, _ in sent}
            return len(seconds) >= 5 and once and "set aside" in beat.output()

        wait_until(done, 30, "the beat to sync, send and set the corrupt entry aside")
        beats.stop_all()  # SIGTERM: the beat deregisters (ZREM) on the way out
        assert beat.process.returncode == 0, beat.output()[-2000:]
        ran = acl_redis.commands_run()
    finally:
        queue.close()
        broker.stop()
    # Every occurrence of the synced entry from its first on, each once: no gap, no repeat.
    dues = sorted(due for name, due in sent if name == "every-second")
    assert dues == list(range(dues[0], dues[-1] + 1, SECOND)), dues
    assert all(n == 1 for n in sent.values()), sent
    assert "NOPERM" not in beat.output()
    documented = acl_redis.users["beat"].commands
    # SELECT is documented for URLs naming a database other than 0; this one names 0.
    assert ran == documented - {"select"}, (
        f"run but not granted: {sorted(ran - documented)}; "
        f"granted but not run: {sorted(documented - ran - {'select'})}"
    )
    assert set(store.quarantined()) == {"broken"}
    assert "stale" not in store and store.get("every-second").source == "config"
    assert store.client.zscore(keys.schedule, "ghost") is None
    assert store.state("once").next_run_at is None and store.beats() == []
    assert store.get_delayed("delayed").state == "sent"
    store.close()


def test_the_documented_worker_acl_records_runs_and_nothing_else(acl_redis: AclRedis) -> None:
    """The worker hook's scripts, on every path: a start, ends that push and trim a history,
    an end that wakes an occurrence waiting for it (overlap="buffer_one"), the duplicate
    check of an entry's and a delayed task's messages, and an end refused because a reshard
    changed the layout since the worker read it."""
    acl_redis.reset()
    admin = acl_redis.admin
    keys = Keys()
    admin.hset(keys.state, "e", json.dumps({"total_run_count": 1}))
    admin.set(keys.delayed_done("k"), json.dumps({"task_id": "t9", "due": 1, "at": 1}), ex=60)
    waiting = {"due": 1, "at": 1, "beat": "", "lease_until": 9_000_000_000_000}
    admin.hset(keys.inflight, "e", json.dumps({**waiting, "deferred": "overlap"}))
    admin.zadd(keys.schedule, {"e": waiting["lease_until"]})
    acl_redis.start_measuring()
    client = redis.Redis(
        port=acl_redis.server.port,
        username="worker",
        password=acl_redis.password,
        decode_responses=True,
    )
    store = ScheduleStore(client)
    store.history_size = 1
    try:
        for i in range(4):
            store.run_started("e", f"t{i}", 1, "w1")
            store.run_ended("e", f"t{i}", 1, "w1", "succeeded")
        for lane, name in (("periodic", "e"), ("delayed", "k")):
            first = Delivery(lane, name, "t9", 0, 1, "tag-a", False, "w1")
            assert store.receive(first, 60_000).run
            store.mark_run(lane, name, "t9", 0, "start", "w1")
            assert not store.receive(replace(first, tag="tag-b"), 60_000).run
        # Runs it could not start: an entry's (one whose state is not written yet: is the
        # entry there?) and a delayed task's, each counted.
        for lane, name in (("periodic", "gone"), ("delayed", "k")):
            refused = Delivery(lane, name, "t8", 0, 1, "", False, "w1")
            store.run_not_started(refused, unregistered("proj.gone"))
        # A reshard began since the worker read the layout: its write is refused, and it
        # reads the layout again and writes where the entry lives (the new count keeps it).
        admin.hset(keys.layout, "moving_to", 2)
        store.run_ended("e", "t5", 1, "w1", "succeeded")
        ran = acl_redis.commands_run()
    finally:
        store.close()
    documented = acl_redis.users["worker"].commands
    assert ran == documented - {"select"}, (
        f"run but not granted: {sorted(ran - documented)}; "
        f"granted but not run: {sorted(documented - ran - {'select'})}"
    )
    assert admin.zscore(keys.schedule, "e") < waiting["lease_until"]  # woken
    assert admin.llen(keys.history("e")) == 2  # trimmed to 2 again by the last end
    assert json.loads(admin.hget(keys.state, "e"))["last_outcome"]["task_id"] == "t5"
    assert json.loads(admin.hget(keys.state, "e"))["duplicates"] == 1
    assert json.loads(admin.get(keys.delayed_done("k")))["duplicates"] == 1
    assert admin.hget(keys.not_started, "unregistered:proj.gone") == "2"


def test_the_documented_editor_acl_runs_every_store_api_call_and_nothing_else(
    acl_redis: AclRedis,
) -> None:
    acl_redis.reset()
    admin = acl_redis.admin
    keys = Keys()
    admin.zadd(keys.beats, {"host-1:4242:abc": int(admin.time()[0]) * 1000})
    record = {"definition": "{", "error": "is not valid JSON", "at": 0, "by": "host-1:4242:abc"}
    admin.hset(keys.quarantine, "broken", json.dumps(record))
    acl_redis.start_measuring()
    app = app_for(
        redisbeat_redis_url=f"redis://127.0.0.1:{acl_redis.server.port}/0",
        redisbeat_redis_options={"username": "editor", "password": acl_redis.password},
    )
    store = ScheduleStore.from_app(app)
    try:
        assert store.upsert(Entry("a", "proj.ping", Interval(60)))
        assert (
            store.upsert_many(
                [Entry("b", "proj.ping", Interval(60)), Entry("c", "t", Interval(60))]
            )
            == 2
        )
        assert store.upsert_owned([Entry("d", "proj.ping", Interval(60), source="django")])
        report = store.sync_source(
            "django", [Entry("e", "proj.ping", Interval(60), source="django")]
        )
        assert report.added == ["e"] and report.removed == ["d"]
        assert store.get("a").task == "proj.ping" and "a" in store and len(store) == 4
        assert {e.name for e in store} == {"a", "b", "c", "e"} and store.names("api") == {
            "a",
            "b",
            "c",
        }
        assert store.state("a").next_run_at is not None and len(store.states(["a", "b"])) == 2
        assert store.history("a") == [] and store.running(["a"], store.now_ms()) == {}
        assert [b.id for b in store.beats()] == ["host-1:4242:abc"]
        assert set(store.quarantined()) == {"broken"} and store.now_ms() > 0
        assert store.disable("a") and store.enable("a")
        # What the command line reads besides.
        assert {row.name for row in store.walk()} == {"a", "b", "c", "e"}
        assert store.counts().entries == 4
        assert set(store.definitions(["a", "x"])) == {"a"} and len(store.next_runs("a", 2)) == 2
        assert store.beat_activity(["host-1:4242:abc"]) == {}
        assert store.activity_since(0) == []
        store.run_now("b")
        assert store.remove("c") and store.remove("e", source="django")
        assert store.delay("proj.ping", countdown=60, key="k", owner="o") == "k"
        assert len(store.delay_many([{"task": "proj.ping", "countdown": 60, "owner": "o"}])) == 1
        assert store.reschedule("k", countdown=30) is not None and store.cancel("k")
        assert len(store.pending("o")) == 1 and len(store.upcoming()) == 1
        assert store.count_pending() == 1 and store.count_pending("o") == 1
        assert store.cancel_owner("o") == 1
        assert store.get_delayed("k") is None
        ran = acl_redis.commands_run()
        documented = acl_redis.users["editor"].commands
        assert ran == documented - {"select"}, (
            f"run but not granted: {sorted(ran - documented)}; "
            f"granted but not run: {sorted(documented - ran - {'select'})}"
        )
        # Nothing outside the key pattern, and no command that is not granted.
        with pytest.raises(redis.exceptions.NoPermissionError, match="keys"):
            store.client.hget("other-app:data", "x")
        with pytest.raises(redis.exceptions.NoPermissionError, match="'set' command"):
            store.client.set(keys.entries + "-x", "1")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("broken", "reply"),
    [
        (["-evalsha"], "this user has no permissions to run the 'evalsha' command"),
        (
            ["resetkeys", "~redisbeat:*"],
            "this user has no permissions to access one of the keys used as arguments",
        ),
    ],
    ids=["without EVALSHA", "key pattern without the braces"],
)
def test_a_beat_whose_user_lacks_a_permission_logs_noperm_and_sends_once_it_is_granted(
    acl_redis: AclRedis, beats_for: BeatsFor, broken: list[str], reply: str
) -> None:
    acl_redis.reset()
    admin = acl_redis.admin
    command(admin, "ACL", "SETUSER", "beat", *broken)
    store = ScheduleStore(redis.Redis(port=acl_redis.server.port, decode_responses=True))
    store.upsert(Entry("tick", "proj.ping", Interval(1)))
    queue = redis.Redis(port=acl_redis.server.port, db=1, decode_responses=True)
    beats = beats_for(
        acl_redis.server,
        "redisbeat",
        TEST_BROKER_URL=acl_redis.server.url(1),  # the broker logs in as the default user
        TEST_STORE_URL=acl_redis.url("beat"),
    )
    beat = beats.start(1)[0]
    try:
        wait_until(lambda: "NOPERM" in beat.output(), 30, "the beat to log Redis's NOPERM reply")
        line = next(x for x in beat.output().splitlines() if "NOPERM" in x)
        assert reply in line, line
        assert beat.process.poll() is None, "the beat must keep retrying, not exit"
        assert queue.llen("celery") == 0
        command(admin, *acl_redis.users["beat"].setuser_args(acl_redis.password))
        wait_until(lambda: queue.llen("celery") > 0, 30, "the beat to send once granted")
        assert beat.process.poll() is None
    finally:
        queue.close()
        store.close()


def test_a_beat_serving_metrics_without_the_gauges_permissions_still_sends(
    acl_redis: AclRedis, beats_for: BeatsFor
) -> None:
    # The gauges are for watching: a beat whose user cannot read them says so once, and
    # sends on.
    acl_redis.reset()
    command(acl_redis.admin, "ACL", "SETUSER", "beat", "-zcard", "-zcount", "-hgetall")
    store = ScheduleStore(redis.Redis(port=acl_redis.server.port, decode_responses=True))
    store.upsert(Entry("tick", "proj.ping", Interval(1)))
    queue = redis.Redis(port=acl_redis.server.port, db=1, decode_responses=True)
    beat = beats_for(
        acl_redis.server,
        "redisbeat",
        TEST_BROKER_URL=acl_redis.server.url(1),
        TEST_STORE_URL=acl_redis.url("beat"),
        TEST_METRICS_PORT=str(free_port()),
        TEST_HEARTBEAT="0.5",  # the gauges read at every heartbeat, so several times here
    ).start(1)[0]
    said = "could not read the deployment's gauges for the metrics (sending goes on"
    try:
        wait_until(lambda: said in beat.output(), 30, "the beat to say it cannot read them")
        sent = queue.llen("celery")
        wait_until(lambda: queue.llen("celery") >= sent + 3, 30, "the beat to send on")
        assert beat.output().count(said) == 1 and beat.process.poll() is None
        line = next(x for x in beat.output().splitlines() if said in x)
        assert "'zcard'" in line and "needs +zcard +zcount +hgetall" in line, line
    finally:
        queue.close()
        store.close()


def test_the_command_line_says_a_missing_permission_naming_the_user_with_exit_code_9(
    acl_redis: AclRedis,
) -> None:
    acl_redis.reset()
    result = CliRunner().invoke(redisbeat_cli, ["--url", acl_redis.url("beat"), "list"])
    assert result.exit_code == 9, result.output
    [line] = result.output.strip().splitlines()
    where = f"redis://beat:***@127.0.0.1:{acl_redis.server.port}/0"
    assert line.startswith(
        f"Error: Redis at {where} denied a command: the ACL user lacks a permission (NOPERM "
    ), line
    assert "this user has no permissions to run the '" in line and "ACL SETUSER" in line
    assert acl_redis.password not in line


# -- hostile data -------------------------------------------------------------------------------


class TouchOnUnpickle:
    """The classic pickle exploit: unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def pop_messages(client: redis.Redis) -> list[dict[str, Any]]:
    """Every message on the ``celery`` queue as the broker holds it: envelope and JSON body."""
    out = []
    while (raw := client.rpop("celery")) is not None:
        assert isinstance(raw, str)
        message = json.loads(raw)
        assert message["content-type"] == "application/json", message["content-type"]
        assert message["properties"]["body_encoding"] == "base64"
        message["decoded_body"] = json.loads(base64.b64decode(message["body"]))
        out.append(message)
    return out


def definition(name: str, /, **changes: Any) -> str:
    """A stored definition: a valid entry's JSON with ``changes`` (even ``name``) applied."""
    data = Entry(name, "proj.ping", Interval(3600)).to_json()
    data.update(changes)
    return json.dumps(data)


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def test_hostile_definitions_are_never_executed_only_quarantined_or_sent_as_plain_messages(
    redis_server: RedisServer, beats_for: BeatsFor, prefix: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    # The payload is live: unpickling it (here, on purpose, with another marker) runs a command.
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(TouchOnUnpickle(control)))
    assert control.exists()
    exploit = pickle.dumps(TouchOnUnpickle(marker), protocol=pickle.HIGHEST_PROTOCOL)
    b64 = base64.b64encode(exploit).decode()
    jsonpickle = {"py/object": "posix.system", "py/newargs": [f"touch {marker}"]}
    invalid: dict[str | bytes, str | bytes] = {
        "pickled": exploit,  # raw bytes, not UTF-8
        "pickled-text": pickle.dumps(TouchOnUnpickle(marker), protocol=0),  # ASCII, not JSON
        "pickled-schedule": definition(
            "pickled-schedule", schedule={"kind": "pickle", "data": b64}
        ),
        "jsonpickle": json.dumps(jsonpickle),  # not an entry at all
        "huge-task": definition("huge-task", task="t" * 100_000),
        "n" * 100_000: definition("long-name", name="n" * 100_000),
        "deep": "[" * 100_000 + "]" * 100_000,
        b"\xff\xfe-binary-name": definition("binary-name"),
    }
    valid = {
        "os-system": definition("os-system", task="os.system", args=[f"touch {marker}"]),
        "carrier": definition("carrier", args=[b64], kwargs=jsonpickle),
        "huge-args": definition("huge-args", args=["x" * 1_000_000]),
        "deep-args": definition("deep-args", args=[nested(50)]),
    }
    raw = redis.Redis.from_url(redis_server.url(0))  # bytes in, bytes out
    keys = Keys(prefix)
    for key, value in [*invalid.items(), *valid.items()]:
        raw.hset(keys.entries, key, value)
        command(raw, "ZADD", keys.schedule, 0, key)  # due at once
    raw.close()
    # The production client (from_config) reads whatever bytes are stored.
    store = ScheduleStore.from_config(Config(redis_url=redis_server.url(0), key_prefix=prefix))
    beats = beats_for(redis_server, prefix)
    beat = beats.start(1)[0]
    # The hostile entries are due at once; a good one starts once the beat is up.
    wait_until(store.beats, 30, "the beat to register", 0.1)
    start = store.now_ms() + SECOND
    store.upsert(Entry("good", "proj.ping", Interval(1), start_at=from_ms(start)))
    queue = redis.Redis.from_url(redis_server.url(1), decode_responses=True)
    messages: dict[tuple[str, int], list[dict[str, Any]]] = {}
    window = {("good", start + i * SECOND) for i in range(3)}
    quarantined_names = {
        n.decode(errors="surrogateescape") if isinstance(n, bytes) else n for n in invalid
    }

    def done() -> bool:
        for message in pop_messages(queue):
            headers = message["headers"]
            occurrence = (headers["redisbeat_entry"], int(headers["redisbeat_due"]))
            messages.setdefault(occurrence, []).append(message)
        sent_names = {name for name, _ in messages}
        return (
            window <= set(messages)
            and set(valid) <= sent_names
            and set(store.quarantined()) == quarantined_names
        )

    try:
        wait_until(done, 40, "the hostile entries to be handled and the good one to fire", 0.2)
        assert beat.process.poll() is None
    finally:
        beats.stop_all()
        queue.close()
    assert beat.process.returncode == 0 and "beat raised exception" not in beat.output()
    assert not marker.exists(), "something read from Redis was executed"
    # Invalid definitions: set aside, with the field at fault named.
    errors = {name: q.error for name, q in store.quarantined().items()}
    assert "is not UTF-8 text" in errors["pickled"]
    assert "is not valid JSON" in errors["pickled-text"]
    assert "field 'schedule.kind'" in errors["pickled-schedule"]
    assert "field 'name'" in errors["jsonpickle"]
    assert "field 'task'" in errors["huge-task"]
    assert "field 'name'" in errors["n" * 100_000]
    assert "nested" in errors["deep"] or "recursion" in errors["deep"]
    assert "field 'name'" in errors["\udcff\udcfe-binary-name"]
    for name in quarantined_names:
        with pytest.raises(EntryNotFound):
            store.get(name)
        # A name read back from Redis is taken by every call, whatever its bytes (hiredis
        # packs commands, and encodes text strictly: the store hands it the bytes).
        assert name not in store
        assert store.states([name])[0].quarantined is not None
        with pytest.raises(EntryNotFound):
            store.run_now(name)
    assert store.remove("\udcff\udcfe-binary-name")
    assert "\udcff\udcfe-binary-name" not in store.quarantined()
    # Valid but hostile ones: one plain JSON message each, carrying the data as data.
    by_name = {name: found for (name, _), found in messages.items() if name in valid}
    assert all(len(found) == 1 for found in by_name.values()), by_name.keys()
    os_system = by_name["os-system"][0]
    assert os_system["headers"]["task"] == "os.system"
    assert os_system["decoded_body"][:2] == [[f"touch {marker}"], {}]
    assert by_name["carrier"][0]["decoded_body"][:2] == [[b64], jsonpickle]
    assert by_name["huge-args"][0]["decoded_body"][0] == ["x" * 1_000_000]
    assert by_name["deep-args"][0]["decoded_body"][0] == [nested(50)]
    # The good entry kept firing: every occurrence in the window, once.
    assert all(len(messages[occurrence]) == 1 for occurrence in window)
    store.close()


def test_a_beat_on_a_redis_cluster_needs_the_documented_acl_and_its_cluster_lines_only(
    tmp_path: Path, beats_for: BeatsFor
) -> None:
    broker = RedisServer(tmp_path / "broker")
    broker.directory.mkdir()
    broker.start()
    queue = redis.Redis.from_url(broker.url(0), decode_responses=True)
    try:
        beat_on_cluster_with_documented_acl(tmp_path, beats_for, broker, queue)
    finally:
        queue.close()
        broker.stop()


def beat_on_cluster_with_documented_acl(
    tmp_path: Path, beats_for: BeatsFor, broker: RedisServer, queue: redis.Redis
) -> None:
    with ClusterRig(parent=tmp_path) as rig:
        url, nodes = documented_cluster_user(rig, "beat")
        admin = ScheduleStore.from_app(app_for(redisbeat_redis_url=rig.url))
        admin.upsert(Entry("every-second", "proj.ping", Interval(1)))
        admin.close()
        for node in nodes:
            node.config_resetstat()
            command(node, "ACL", "LOG", "RESET")
        beats = beats_for(broker, "redisbeat", TEST_BROKER_URL=broker.url(0), TEST_STORE_URL=url)
        beat = beats.start(1)[0]
        sent: list[Any] = []
        wait_until(lambda: len(sent.__iadd__(read_queue(queue))) >= 3, 30, "three sends")
        beats.stop_all()
        assert beat.process.returncode == 0, beat.output()[-2000:]
        for node in nodes:
            stats = node.info("commandstats")
            assert not refused_beyond_tolerated(stats), stats
        assert_no_denials(nodes)


def documented_cluster_user(rig: ClusterRig, user: str) -> tuple[str, list[redis.Redis]]:
    """Make the documented ``user``, with its cluster lines, on every master: the cluster
    URL that logs in as it, and a client of each master."""
    users, extra = documented_users(), cluster_additions()
    password = secrets.token_hex(12)
    nodes = [rig.node_client(port) for port in rig.masters()]
    for node in nodes:
        command(node, *users[user].setuser_args(password))
        command(node, "ACL", "SETUSER", user, *extra[user])
    return rig.url.replace("redis-cluster://", f"redis-cluster://{user}:{password}@"), nodes


def assert_no_denials(nodes: list[redis.Redis]) -> None:
    for node in nodes:
        denials = {_field(e, "object") for e in command(node, "ACL", "LOG")}
        assert not denials - TOLERATED_REFUSALS, denials


def test_the_documented_cluster_acl_reads_and_writes_while_a_slot_is_half_moved(
    tmp_path: Path,
) -> None:
    """While the schedule's slot moves, a key that has left is answered with ASK, and the
    client asks the new owner with ASKING first: the documented cluster lines grant it."""
    with ClusterRig(parent=tmp_path) as rig:
        url, nodes = documented_cluster_user(rig, "editor")
        admin = ScheduleStore.from_app(app_for(redisbeat_redis_url=rig.url))
        entry = Entry("moving", "proj.ping", Interval(60))
        admin.upsert(entry)
        admin.close()
        editor = ScheduleStore.from_app(app_for(redisbeat_redis_url=url))
        try:
            slot = redis.cluster.key_slot(editor.keys.schedule.encode())
            target = next(p for p in rig.masters() if p != rig.node_for_key(editor.keys.schedule))
            rig.begin_migration(slot, target)
            while rig.migrate_keys(slot, target):
                pass  # every key is on the target; the slot is still the old owner's
            for node in nodes:
                command(node, "ACL", "LOG", "RESET")
            assert editor.get("moving") == entry  # ASK, then ASKING on the target
            assert editor.state("moving") is not None
            rig.end_migration(slot, target)
            editor.disable("moving")
            assert editor.get("moving").enabled is False
        finally:
            editor.close()
        assert_no_denials(nodes)
