"""What a failed Redis command means to an operator: :class:`RedisTrouble`.

Its kind is worked out from redis-py's exception and from what caused it (a TLS handshake
that failed or timed out, a reply code). :meth:`RedisTrouble.describe` says in one line what
is wrong and what to do, and :attr:`RedisTrouble.exit_code` is the exit status of the command
line, and of a beat that stops on it.
"""

from __future__ import annotations

import re
import ssl
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import redis
from redis.exceptions import AskError, ClusterCrossSlotError, RedisClusterException

from ..errors import RedisBeatError

#: The exit status of the command line (and of a beat stopped by it) for each kind of trouble
#: with one of its own; any other Redis trouble exits with :data:`REDIS_EXIT`.
EXIT_CODES = {"incompatible": 6, "noauth": 7, "auth": 8, "noperm": 9, "tls": 10, "db": 11}
REDIS_EXIT = 3
#: The kinds an operator mends in a setting or in the server's configuration, not by waiting:
#: their line, which names the URL and the fix, is what the command line and the admin show.
MISCONFIGURED = frozenset({"noauth", "auth", "noperm", "tls", "db"})

#: The error code redis-py strips off the reply text, for redis-py versions that do not keep
#: it in ``status_code``.
_CODES: dict[type[BaseException], str] = {
    redis.exceptions.OutOfMemoryError: "OOM",
    redis.exceptions.ReadOnlyError: "READONLY",
    redis.exceptions.NoPermissionError: "NOPERM",
    redis.exceptions.NoScriptError: "NOSCRIPT",
}
#: Reply code -> kind of trouble. Codes are also looked for inside the text, where an older
#: Redis wraps a script's error as ``ERR Error running script ... -OOM ...``.
_KINDS = {"OOM": "oom", "READONLY": "readonly", "NOPERM": "noperm", "WRONGTYPE": "wrongtype"}
_CODE_IN_TEXT = re.compile(r"\b(OOM|READONLY|NOPERM|WRONGTYPE)\b")
#: How Redis 7.0 words an ACL denial inside a script (an ``ERR`` reply): a command, key, channel.
_SCRIPT_ACL_DENIAL = "The user executing the script can't"
#: How Redis refuses a command a cluster node does not take (``SELECT``, pub/sub aside).
_CLUSTER_ONLY = "not allowed in cluster mode"
#: How redis-py's cluster client says a seed node is a plain server.
_NOT_CLUSTER = "Cluster mode is not enabled"
#: The key named by the scripts' own WRONGTYPE error (lua/prelude.lua).
_KEY_IN_TEXT = re.compile(r"^WRONGTYPE redisbeat: key (\S+) ")
#: How redis-py words the error of a pipelined command: the command (its name, then its key,
#: for the commands that can meet a key of the wrong type), then Redis's reply.
_PIPELINED = re.compile(
    r"^Command # \d+ \((\S+) ?(\S*)[^)]*\) of pipeline caused error: (.*)$", re.S
)
#: How Redis says that no password was given: ``NOAUTH``, also to a ``HELLO`` before ``AUTH``
#: (redis-py strips the code where it does not keep it in ``status_code``).
_NO_PASSWORD = (
    "NOAUTH",
    "Authentication required",
    "HELLO must be called with the client already authenticated",
)
#: How Redis refuses the ``SELECT`` of a database it does not have (``databases`` setting).
_NO_DATABASE = ("DB index is out of range", "invalid DB index")
#: The code of replies redis-py strips it off whatever their exception class, by their text.
_CODE_BY_TEXT = {
    **dict.fromkeys(_NO_PASSWORD[1:], "NOAUTH"),
    "invalid username-password pair": "WRONGPASS",
    **dict.fromkeys(_NO_DATABASE, "ERR"),
}


@dataclass(frozen=True)
class RedisTrouble:
    """A failed Redis command, sorted by what an operator has to do about it.

    ``kind`` is one of ``unavailable`` (no connection, or no answer in time), ``tls`` (the
    TLS handshake failed: a certificate that does not verify, a ``rediss://`` URL naming a
    plain port or a ``redis://`` URL a TLS one), ``noauth`` (the server wants a password and
    none was given), ``auth`` (the login was rejected: a wrong user or password), ``db``
    (the URL names a database the server does not have), ``oom`` (maxmemory reached),
    ``readonly`` (a read-only replica), ``noperm`` (an ACL denial), ``wrongtype`` (a key
    holds the wrong type), ``cluster`` (a Redis Cluster node reached by a ``redis://`` URL),
    ``not-cluster`` (a plain server named by a ``redis-cluster://`` URL), ``incompatible``
    (:class:`~.errors.StoreIncompatible`: the reply is its message) and ``refused`` (any other
    error reply). ``reply`` is Redis's own error text, verbatim, or the connection error;
    ``key`` is the key a WRONGTYPE is about, when redisbeat's scripts could name it.
    """

    kind: str
    reply: str
    key: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> RedisTrouble:
        known = exc.__dict__.get("trouble")
        if isinstance(known, RedisTrouble):
            return known
        if isinstance(exc, redis.exceptions.AuthenticationError):
            text = _reply_text(exc)
            return cls("noauth" if any(s in text for s in _NO_PASSWORD) else "auth", text)
        if isinstance(exc, (AskError, ClusterCrossSlotError)) or _CLUSTER_ONLY in str(exc):
            return cls("cluster", _reply_text(exc))
        if isinstance(exc, RedisClusterException):
            if _NOT_CLUSTER in str(exc):
                return cls("not-cluster", f"{type(exc).__name__}: {exc}")
            if isinstance(exc.__cause__, (redis.RedisError, OSError)):
                return cls.of(exc.__cause__)  # no seed node would answer: this is why
        if not isinstance(exc, redis.exceptions.ResponseError):
            if isinstance(exc, RedisBeatError) and exc.args:
                return cls("unavailable", str(exc))
            tls = _tls_failure(exc)
            return cls("tls", tls) if tls else cls("unavailable", f"{type(exc).__name__}: {exc}")
        text = _reply_text(exc)
        if any(s in text for s in _NO_DATABASE):
            return cls("db", text)
        kind = _KINDS.get(text.split(" ", 1)[0])
        if kind is None:
            found = _CODE_IN_TEXT.search(text)
            kind = _KINDS[found[1]] if found else None
        if kind is None:
            kind = "noperm" if _SCRIPT_ACL_DENIAL in text else "refused"
        named = _KEY_IN_TEXT.match(text)
        pipelined = _PIPELINED.match(str(exc)) if kind == "wrongtype" else None
        key = named[1] if named else (pipelined[2] or None) if pipelined else None
        return cls(kind, text, key)

    @property
    def exit_code(self) -> int:
        """The exit status of the command line (and of a beat stopped by this trouble)."""
        return EXIT_CODES.get(self.kind, REDIS_EXIT)

    @property
    def misconfigured(self) -> bool:
        """Whether it is mended in a setting or the server's configuration, not by waiting."""
        return self.kind in MISCONFIGURED

    def describe(self, where: str) -> str:
        """One log line: what is wrong with the Redis at ``where`` and what to do."""
        if self.kind == "incompatible":
            return self.reply
        what = _tls_line(self.reply) if self.kind == "tls" else _LINES.get(self.kind)
        if self.kind == "wrongtype" and self.key and self.key not in self.reply:
            return f"Redis at {where} {_WRONG_KEY.format(key=self.key, reply=self.reply)}"
        return f"Redis at {where} {(what or _REFUSED).format(reply=self.reply)}"

    @property
    def was(self) -> str:
        """What the trouble was, for the line that says it is over."""
        return {
            "unavailable": "unavailable",
            "tls": "refusing the TLS connection",
            "noauth": "asking for a password",
            "auth": "rejecting the login",
            "db": "without the database the URL names",
            "oom": "out of memory",
            "readonly": "a read-only replica",
            "noperm": "denying a command",
            "wrongtype": f"holding {self.key or 'a key'} with the wrong type",
            "cluster": "a cluster node reached by a redis:// URL",
            "not-cluster": "not a cluster",
        }.get(self.kind, "refusing a command")


#: What each kind says after "Redis at <where> "; ``{reply}`` is Redis's reply.
_LINES = {
    "unavailable": "is unavailable ({reply})",
    "noauth": (
        "requires a password and none was given ({reply}); put it in the URL "
        "(redis://:PASSWORD@host:port/db, or redis://USER:PASSWORD@host:port/db for an ACL "
        "user) or in redisbeat_redis_options"
    ),
    "auth": (
        "rejected the login ({reply}); the user name or password is wrong, or the user is "
        "disabled: check them in the URL or in redisbeat_redis_options"
    ),
    "db": (
        "has no such database ({reply}); the database in the URL (/N) must be below the "
        "server's 'databases' setting (16 by default: 0 to 15), and a Redis Cluster has "
        "database 0 only"
    ),
    "oom": (
        "is out of memory (maxmemory reached) and refuses writes ({reply}); "
        "free memory or raise maxmemory"
    ),
    "readonly": (
        "is a read-only replica ({reply}); point redisbeat at the primary, or promote this server"
    ),
    "noperm": (
        "denied a command: the ACL user lacks a permission ({reply}); grant it to the user "
        "with ACL SETUSER: see docs/security.md#acl"
    ),
    "wrongtype": (
        "holds a key of the wrong type ({reply}); an operator must delete or repair the key"
    ),
    "cluster": (
        "is a Redis Cluster node ({reply}); set redisbeat_redis_url to "
        "redis-cluster://host:port[,host:port...] (rediss-cluster:// for TLS)"
    ),
    "not-cluster": (
        "is not a Redis Cluster ({reply}); a redis-cluster:// URL needs cluster-enabled "
        "servers: use redis:// (or rediss://) for one server"
    ),
}
_REFUSED = "refused a command ({reply})"
#: The WRONGTYPE line where the reply does not name the key but the command did.
_WRONG_KEY = "holds {key} with the wrong type ({reply}); an operator must delete or repair the key"


def _tls_line(reply: str) -> str:
    """What a failed TLS connection says, by how it failed."""
    if "CERTIFICATE" in reply.upper():
        return (
            "did not pass the TLS certificate check ({reply}); give redis-py the CA that "
            "signed the server's certificate (ssl_ca_certs) and a host name the certificate "
            "names: see docs/security.md#tls"
        )
    if "handshake" in reply:
        return (
            "did not answer the TLS handshake ({reply}); a rediss:// URL needs a port that "
            "speaks TLS: for a plain one, use redis://"
        )
    if "SSL" not in reply:
        return (
            "closed the connection at its first command, as a port that speaks only TLS does "
            "({reply}); use a rediss:// URL (see docs/security.md#tls)"
        )
    return (
        "refused the TLS connection ({reply}); check that the port speaks TLS and the TLS "
        "options: see docs/security.md#tls"
    )


def _tls_failure(exc: BaseException) -> str | None:
    """The reply for a connection error that is a TLS one, None for another: the handshake
    failed or timed out (a ``rediss://`` URL naming a plain port: nothing answers it), or
    the server closed a new plain connection at its first command (a ``redis://`` URL naming
    a TLS-only port)."""
    text = f"{type(exc).__name__}: {exc}"
    for cause in _chain(exc):
        said = str(cause)
        if (
            isinstance(cause, ssl.SSLError)
            or "[SSL" in said
            or (isinstance(cause, TimeoutError) and "handshake" in said)
        ):
            return text if said in text else f"{text} ({said})"
    closed = isinstance(exc.__context__, ConnectionResetError) or "closed by server" in str(exc)
    if closed and isinstance(exc, redis.ConnectionError) and _while_connecting(exc):
        return text
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what caused it, a few links deep."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def _while_connecting(exc: BaseException) -> bool:
    """Whether redis-py raised it while setting up a new connection (its ``on_connect``)."""
    return any(
        frame.f_code.co_name.startswith("on_connect")
        for frame, _ in traceback.walk_tb(exc.__traceback__)
    )


def _reply_text(exc: BaseException) -> str:
    """Redis's error reply as Redis sent it, code first (redis-py strips some codes off, and
    words a pipelined command's error as its own sentence around it)."""
    text = str(exc)
    pipelined = _PIPELINED.match(text)
    if pipelined is not None:
        text = pipelined[3]
    code = getattr(exc, "status_code", None) or _CODES.get(type(exc))
    if code is None:
        code = next((c for k, c in _CODES.items() if isinstance(exc, k)), None)
    if code is None:
        code = next((c for t, c in _CODE_BY_TEXT.items() if text.startswith(t)), None)
    if code and not text.startswith(f"{code} "):
        return f"{code} {text}"
    return text
