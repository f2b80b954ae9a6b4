"""hookinbox's idempotency keys from Python: run a function once per key.

    from hookinbox_keys import Keys

    keys = Keys("http://127.0.0.1:8081")          # token: $HOOKINBOX_KEYS_TOKEN

    @keys.idempotent(key="json:/id", lease="30s", ttl="7d")
    def charge(event):
        return payments.charge(event["customer"], event["amount"])

A call claims the key (`POST /api/keys/{key}/claim`). Claimed: the function
runs, a heartbeat extends the lease at half its length while it runs, and
its return value (as JSON) completes the key. Done before: the stored
result is returned and the function does not run. Busy (another worker
holds it): wait for it (honouring Retry-After) or raise `KeyBusy`. If the
lease was lost meanwhile (the worker took longer than its lease and the
heartbeat could not reach hookinbox), completing raises `StaleFence`: the
side effect may have run twice, and that is said loudly.

Standard library only (Python 3.9+). hookinbox unreachable: the call fails
closed (`HookinboxUnavailable`) unless `fail_open=True` was asked for.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar, Union, cast

__all__ = [
    "Keys",
    "Claim",
    "KeyBusy",
    "StaleFence",
    "HookinboxUnavailable",
    "KeysError",
]

F = TypeVar("F", bound=Callable[..., Any])

#: hookinbox's admin API: the token of a `[[keys.client]]`.
TOKEN_ENV = "HOOKINBOX_KEYS_TOKEN"
URL_ENV = "HOOKINBOX_KEYS_URL"
#: hookinbox's `server.admin_socket`: when set, calls go over it, not TCP.
SOCKET_ENV = "HOOKINBOX_KEYS_SOCKET"


class KeysError(Exception):
    """hookinbox answered something a key's call cannot go on from."""


class HookinboxUnavailable(KeysError):
    """hookinbox could not be reached, or answered 5xx (a standby, a full disk)."""


class KeyBusy(KeysError):
    """Another worker holds the key now (`on_busy="raise"`, or `wait_timeout` passed)."""

    def __init__(self, key: str, retry_after: Optional[float]) -> None:
        super().__init__(f"key {key!r} is held by another worker")
        self.key = key
        self.retry_after = retry_after


class StaleFence(KeysError):
    """The lease was lost while the work ran: another worker claimed the key
    (a larger fencing token), and this worker's completion was refused. The
    work's side effect may have happened twice."""

    def __init__(self, key: str, token: int) -> None:
        super().__init__(
            f"key {key!r}: the lease of token {token} was lost and the key "
            "claimed again; this worker's work may have run twice"
        )
        self.key = key
        self.token = token


def _seconds(value: Union[str, float, int]) -> float:
    """`"30s"`, `"5m"`, `"2h"`, `"7d"`, `"500ms"` or a number of seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    text = value.strip()
    for suffix, factor in (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    raise ValueError(f"{value!r} is not a duration: use e.g. '30s', '5m', '7d'")


def _wire(seconds: float) -> str:
    """A duration as hookinbox reads it: whole milliseconds."""
    return f"{max(1, int(round(seconds * 1000)))}ms"


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON: return JSON, a dataclass, or pass json_default")


def _pointer(document: Any, pointer: str) -> Any:
    """The value at RFC 6901 `pointer` in `document`."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer {pointer!r} must start with '/'")
    here = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(here, list):
            here = here[int(token)]
        elif isinstance(here, dict):
            here = here[token]
        else:
            raise KeyError(pointer)
    return here


class _Unix(http.client.HTTPConnection):
    """An HTTP connection over a Unix domain socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class _Answer:
    def __init__(self, status: int, body: Any, retry_after: Optional[float]) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after


class _Heartbeats:
    """One thread per `Keys` that extends the lease of every claim running
    work, each at half its lease: a thread started per call costs more than
    the call's two requests when many threads call at once (each start waits
    its turn for the GIL). An extend that hangs delays the others' beats
    by at most the client's timeout; it fails for them all then anyway."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._due: Dict["Claim", float] = {}
        self._thread: Optional[threading.Thread] = None
        # When the thread wakes next; with nothing to beat, it looks again
        # after the last claim's interval (a claim added later than that
        # needs no wake-up call: the common case costs no thread switch).
        self._wake_at = 0.0
        self._idle = 1.0

    def add(self, claim: "Claim") -> None:
        if self._pid != os.getpid():
            # A forked child (a pre-forking server) has none of the parent's
            # threads: start afresh.
            self.__init__()  # type: ignore[misc]
        due = time.monotonic() + claim._interval()
        with self._cond:
            self._due[claim] = due
            self._idle = claim._interval()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="hookinbox-keys-heartbeat", daemon=True)
                self._thread.start()
            elif due < self._wake_at:
                self._cond.notify()

    def remove(self, claim: "Claim") -> None:
        """Stops beating for `claim`; returns once no extend of it is in flight."""
        with self._cond:
            self._due.pop(claim, None)
        with claim._beating:
            pass

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [c for c, t in self._due.items() if t <= now]
                if not due:
                    self._wake_at = min(self._due.values(), default=now + self._idle)
                    self._cond.wait(self._wake_at - now)
                    continue
                for c in due:
                    self._due[c] = now + c._interval()
            for c in due:
                with c._beating:
                    if c.state != "claimed" or c not in self._due:
                        continue
                    try:
                        c.extend()
                    except StaleFence:
                        with self._cond:
                            self._due.pop(c, None)
                    except KeysError:
                        pass  # hookinbox unreachable now: try again at the next beat


class Keys:
    """A `[[keys.client]]` of one hookinbox: its admin URL (or Unix socket) and token."""

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        socket_path: Optional[str] = None,
        timeout: float = 10.0,
    ) -> None:
        url = url or os.environ.get(URL_ENV) or "http://127.0.0.1:8081"
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        socket_path = socket_path if socket_path is not None else os.environ.get(SOCKET_ENV) or None
        if not token:
            raise KeysError(f"no token: pass token= or set {TOKEN_ENV} (a [[keys.client]] token)")
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") and socket_path is None:
            raise KeysError(f"{url!r} is not an http(s) URL")
        self._parsed = parsed
        self._prefix = parsed.path.rstrip("/")
        self._token = token
        self._socket = socket_path
        self._timeout = timeout
        self._local = threading.local()
        self._heartbeats = _Heartbeats()

    # -- the four calls ------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._socket is not None:
                conn = _Unix(self._socket, self._timeout)
            elif self._parsed.scheme == "https":
                conn = http.client.HTTPSConnection(self._parsed.netloc, timeout=self._timeout)
            else:
                conn = http.client.HTTPConnection(self._parsed.netloc, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def _call(self, method: str, key: str, action: str, body: Optional[Dict[str, Any]]) -> _Answer:
        path = f"{self._prefix}/api/keys/{urllib.parse.quote(key, safe='')}"
        if action:
            path += f"/{action}"
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"authorization": f"Bearer {self._token}"}
        if data is not None:
            headers["content-type"] = "application/json"
        # One retry on a kept-alive connection the server closed meanwhile.
        for attempt in (0, 1):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                res = conn.getresponse()
                raw = res.read()
                break
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                self._local.conn = None
                if attempt == 1:
                    raise HookinboxUnavailable(f"hookinbox cannot be reached: {e}") from e
        retry = res.getheader("retry-after")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if res.status >= 500:
            raise HookinboxUnavailable(f"hookinbox answered {res.status}: {parsed}")
        if res.status in (401, 403):
            raise KeysError(f"hookinbox refused the token ({res.status}): {parsed}")
        return _Answer(res.status, parsed, float(retry) if retry else None)

    def get(self, key: str) -> Optional[Dict[str, Any]]:
        """The key's state (`GET /api/keys/{key}`), or None when it has none."""
        a = self._call("GET", key, "", None)
        if a.status == 404:
            return None
        if a.status != 200:
            raise KeysError(f"get {key!r}: {a.status} {a.body}")
        return cast(Dict[str, Any], a.body)

    def claim(
        self, key: str, *, lease: Union[str, float] = "30s", ttl: Optional[Union[str, float]] = None
    ) -> "Claim":
        """Claims `key` once: a `Claim` that is `claimed` (yours, with a
        fencing token), `done` (with the stored result) or `busy`. As a
        context manager, a claimed key is released if the block raises, and
        completed with `Claim.result` (None if unset) if it does not."""
        body: Dict[str, Any] = {"lease": _wire(_seconds(lease))}
        if ttl is not None:
            body["ttl"] = _wire(_seconds(ttl))
        a = self._call("POST", key, "claim", body)
        if a.status == 201:
            return Claim(self, key, "claimed", token=a.body["token"], lease=_seconds(lease))
        if a.status == 200:
            return Claim(self, key, "done", result=a.body.get("result"))
        if a.status == 409:
            return Claim(self, key, "busy", retry_after=a.retry_after)
        raise KeysError(f"claim {key!r}: {a.status} {a.body}")

    # -- the decorator -------------------------------------------------------

    def idempotent(
        self,
        key: Union[str, Callable[..., str], None] = None,
        *,
        lease: Union[str, float] = "30s",
        ttl: Optional[Union[str, float]] = None,
        on_busy: str = "wait",
        wait_timeout: Union[str, float] = "60s",
        on_error: str = "release",
        fail_open: bool = False,
        fence_arg: Optional[str] = None,
        heartbeat: bool = True,
        json_default: Callable[[Any], Any] = _default,
    ) -> Callable[[F], F]:
        """Runs the decorated function once per key.

        key: a function of the call's arguments, `"json:/pointer"` into the
        first argument (an event: a dict, or JSON bytes/str), or None: the
        function's name and the JSON of its arguments, hashed.
        on_busy: "wait" (claim again after Retry-After until done or
        `wait_timeout`, then KeyBusy) or "raise" (KeyBusy at once).
        on_error: "release" (the next call runs it again) or "keep" (the
        lease runs out first).
        fail_open: run the function anyway when hookinbox cannot be reached
        (no once-only guarantee then): off by default.
        fence_arg: the keyword argument that receives the fencing token, for
        a downstream that checks fences.
        """
        if on_busy not in ("wait", "raise"):
            raise ValueError("on_busy must be 'wait' or 'raise'")
        if on_error not in ("release", "keep"):
            raise ValueError("on_error must be 'release' or 'keep'")
        deadline_s = _seconds(wait_timeout)

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            def run(*args: Any, **kwargs: Any) -> Any:
                k = _key_of(key, fn, args, kwargs)
                started = time.monotonic()
                while True:
                    try:
                        c = self.claim(k, lease=lease, ttl=ttl)
                    except HookinboxUnavailable:
                        if fail_open:
                            return fn(*args, **kwargs)
                        raise
                    if c.state == "done":
                        return c.result
                    if c.state == "busy":
                        waited = time.monotonic() - started
                        if on_busy == "raise" or waited >= deadline_s:
                            raise KeyBusy(k, c.retry_after)
                        pause = c.retry_after if c.retry_after else 0.5
                        # Jitter: a crowd of waiters does not claim in step.
                        pause = min(pause, 5.0) * (0.5 + random.random())
                        time.sleep(min(pause, max(0.0, deadline_s - waited)))
                        continue
                    return c.run(
                        lambda token: fn(*args, **({**kwargs, fence_arg: token} if fence_arg else kwargs)),
                        on_error=on_error,
                        heartbeat=heartbeat,
                        json_default=json_default,
                    )

            return run  # type: ignore[return-value]

        return decorate


def _key_of(
    key: Union[str, Callable[..., str], None], fn: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> str:
    if callable(key):
        return str(key(*args, **kwargs))
    if isinstance(key, str):
        if not key.startswith("json:"):
            return key
        if not args:
            raise KeysError(f"key {key!r} reads the first argument, and there is none")
        event = args[0]
        if isinstance(event, (bytes, bytearray)):
            event = json.loads(event)
        elif isinstance(event, str):
            event = json.loads(event)
        value = _pointer(event, key[len("json:"):])
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = json.dumps([fn.__module__, fn.__qualname__, args, kwargs], sort_keys=True, default=_default)
    return f"{fn.__qualname__}:{hashlib.sha256(text.encode()).hexdigest()}"


class Claim:
    """One claim of a key: `state` is "claimed", "done" or "busy"."""

    def __init__(
        self,
        keys: Keys,
        key: str,
        state: str,
        *,
        token: Optional[int] = None,
        lease: float = 0.0,
        result: Any = None,
        retry_after: Optional[float] = None,
    ) -> None:
        self.keys = keys
        self.key = key
        self.state = state
        self.token = token
        self.lease = lease
        self.result = result
        self.retry_after = retry_after
        self._lost = threading.Event()
        # Held while the heartbeat extends this claim.
        self._beating = threading.Lock()

    @property
    def done(self) -> bool:
        return self.state == "done"

    @property
    def claimed(self) -> bool:
        return self.state == "claimed"

    @property
    def lost(self) -> bool:
        """The heartbeat found the lease gone: stop the work if you can."""
        return self._lost.is_set()

    def extend(self, lease: Optional[Union[str, float]] = None) -> None:
        """Holds the key `lease` longer from now (StaleFence if it was lost)."""
        seconds = _seconds(lease) if lease is not None else self.lease
        a = self.keys._call("POST", self.key, "extend", {"token": self.token, "lease": _wire(seconds)})
        if a.status == 409:
            self._lost.set()
            raise StaleFence(self.key, int(self.token or 0))
        if a.status != 200:
            raise KeysError(f"extend {self.key!r}: {a.status} {a.body}")

    def complete(self, result: Any = None, *, json_default: Callable[[Any], Any] = _default) -> None:
        """Stores `result` (as JSON) and marks the key done."""
        value = json.loads(json.dumps(result, default=json_default))
        a = self.keys._call("POST", self.key, "complete", {"token": self.token, "result": value})
        if a.status == 409:
            raise StaleFence(self.key, int(self.token or 0))
        if a.status != 200:
            raise KeysError(f"complete {self.key!r}: {a.status} {a.body}")
        self.state, self.result = "done", value

    def release(self) -> None:
        """Gives the key up: the next claim runs the work again."""
        a = self.keys._call("POST", self.key, "release", {"token": self.token})
        if a.status not in (200, 409, 404):
            raise KeysError(f"release {self.key!r}: {a.status} {a.body}")

    def _interval(self) -> float:
        return max(self.lease / 2, 0.05)

    def run(
        self,
        work: Callable[[Optional[int]], Any],
        *,
        on_error: str = "release",
        heartbeat: bool = True,
        json_default: Callable[[Any], Any] = _default,
    ) -> Any:
        """Runs `work(token)` under this claim, with a heartbeat; completes
        the key with its result, or on an exception releases it (or keeps it,
        `on_error="keep"`) and raises on."""
        if heartbeat:
            self.keys._heartbeats.add(self)
        try:
            result = work(self.token)
        except BaseException:
            if heartbeat:
                self.keys._heartbeats.remove(self)
            if on_error == "release":
                try:
                    self.release()
                except KeysError:
                    pass  # the lease runs out instead
            raise
        if heartbeat:
            self.keys._heartbeats.remove(self)
        self.complete(result, json_default=json_default)
        return self.result

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if self.state != "claimed":
            return
        if error is not None:
            try:
                self.release()
            except KeysError:
                pass
            return
        self.complete(self.result)
