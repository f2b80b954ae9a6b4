"""The Python keys helper against a real hookinbox (run by the Rust test
tests/it/key_clients.rs, which starts the server and names a scenario):

    python scenarios.py SCENARIO   (HOOKINBOX_KEYS_URL, HOOKINBOX_KEYS_TOKEN set)

Each scenario asserts what it promises and prints "ok SCENARIO" at the end.
"""

import dataclasses
import os
import sys
import threading
import time

from hookinbox_keys import HookinboxUnavailable, KeyBusy, Keys, StaleFence

keys = Keys()


def concurrent() -> None:
    """20 callers of one decorated function with one key: the body runs
    once, and all 20 get its result (a dataclass, as JSON)."""

    @dataclasses.dataclass
    class Receipt:
        charge: str
        runs: int

    runs = []

    @keys.idempotent(key="json:/id", lease="5s")
    def charge(event):
        runs.append(event["id"])
        time.sleep(0.3)
        return Receipt(charge="ch_1", runs=len(runs))

    results = []
    callers = [threading.Thread(target=lambda: results.append(charge({"id": "evt_concurrent"}))) for _ in range(20)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert runs == ["evt_concurrent"], runs
    assert results == [{"charge": "ch_1", "runs": 1}] * 20, results


def stale() -> None:
    """A worker that outlives its lease without a heartbeat: a second worker
    runs under a larger token; the first one's completion raises StaleFence,
    and the stored result is the second's."""
    tokens = {}

    @keys.idempotent(key="k-stale", lease="1s", heartbeat=False, fence_arg="fence")
    def slow(fence=None):
        tokens["first"] = fence
        time.sleep(2.5)
        return "first"

    @keys.idempotent(key="k-stale", lease="1s", on_busy="raise", fence_arg="fence")
    def fast(fence=None):
        tokens["second"] = fence
        return "second"

    outcome = {}

    def first():
        try:
            outcome["first"] = slow()
        except StaleFence as e:
            outcome["first"] = e

    t = threading.Thread(target=first)
    t.start()
    time.sleep(1.6)
    assert fast() == "second"
    t.join()
    assert isinstance(outcome["first"], StaleFence), outcome
    assert tokens["second"] > tokens["first"], tokens
    assert keys.get("k-stale")["result"] == "second"


def heartbeat() -> None:
    """Work of three leases' length completes under one token."""
    seen = []

    @keys.idempotent(key="k-heartbeat", lease="1s", fence_arg="fence")
    def long(fence=None):
        seen.append(fence)
        time.sleep(3.2)
        return {"fence": fence}

    assert long() == {"fence": seen[0]}
    state = keys.get("k-heartbeat")
    assert state["state"] == "done" and state["claims"] == 1, state


def exception() -> None:
    """An exception releases the key; the next call runs the body again."""
    calls = []

    @keys.idempotent(key="k-exception")
    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the first try fails")
        return "second try"

    try:
        flaky()
        raise AssertionError("the first call should raise")
    except RuntimeError:
        pass
    assert flaky() == "second try"
    assert len(calls) == 2
    # Done: a third call does not run it.
    assert flaky() == "second try" and len(calls) == 2


def busy_raise() -> None:
    """on_busy="raise": KeyBusy while another holds the key."""
    c = keys.claim("k-busy", lease="10s")
    assert c.claimed

    @keys.idempotent(key="k-busy", on_busy="raise")
    def work():
        raise AssertionError("must not run")

    try:
        work()
        raise AssertionError("KeyBusy expected")
    except KeyBusy as e:
        assert e.retry_after is not None
    c.release()


def context() -> None:
    """The explicit form: a claim as a context manager."""
    with keys.claim("k-context") as c:
        assert c.claimed and c.token
        c.result = {"ok": True}
    again = keys.claim("k-context")
    assert again.done and again.result == {"ok": True}, again.state


def before_restart() -> None:
    """Completes k-restart (the Rust test then kills the server with -9)."""

    @keys.idempotent(key="k-restart")
    def once():
        return {"paid": 1}

    assert once() == {"paid": 1}


def after_restart() -> None:
    """After kill -9 and a restart, the done key stays done: no second run."""

    @keys.idempotent(key="k-restart")
    def once():
        raise AssertionError("the body ran again after a restart")

    assert once() == {"paid": 1}


def unreachable() -> None:
    """hookinbox unreachable: fail closed by default, run with fail_open."""
    down = Keys("http://127.0.0.1:9", token="unused", timeout=2)

    @down.idempotent(key="k-down")
    def closed():
        raise AssertionError("must not run")

    try:
        closed()
        raise AssertionError("HookinboxUnavailable expected")
    except HookinboxUnavailable:
        pass

    @down.idempotent(key="k-down", fail_open=True)
    def opened():
        return "ran without a key"

    assert opened() == "ran without a key"


def unix_socket() -> None:
    """The calls go over hookinbox's admin socket, named by
    HOOKINBOX_KEYS_SOCKET (the URL names a port nobody listens on, so
    nothing goes over TCP); `socket_path=` names it the same way."""
    local = Keys("http://127.0.0.1:9")
    assert local._socket == os.environ["HOOKINBOX_KEYS_SOCKET"]

    @local.idempotent(key="k-unix")
    def once():
        return {"over": "unix"}

    assert once() == {"over": "unix"}
    assert once() == {"over": "unix"}
    assert Keys("http://127.0.0.1:9", socket_path=local._socket).get("k-unix")["state"] == "done"


if __name__ == "__main__":
    name = sys.argv[1]
    globals()[name]()
    print(f"ok {name}")
