"""Helpers shared by the Python generators: fresh test secrets, the checks
every vector must pass, and the writer (same layout as the Node side)."""

import json
import secrets
import string
import sys
from pathlib import Path

ALNUM = string.ascii_letters + string.digits


def random_hex(nbytes):
    return secrets.token_hex(nbytes)


def random_alnum(n):
    return "".join(secrets.choice(ALNUM) for _ in range(n))


def tamper(text):
    """The same change the Rust test makes: the last ASCII letter or digit, so
    a JSON body stays JSON and a form stays a form, but the MAC no longer fits."""
    chars = list(text)
    for i in range(len(chars) - 1, -1, -1):
        if chars[i].isascii() and chars[i].isalnum():
            chars[i] = "1" if chars[i] == "0" else "0"
            return "".join(chars)
    raise ValueError(f"nothing to tamper with in {text!r}")


_failures = []
_checks = 0


def expect(file, what, wanted, fn):
    """Runs one check. An SDK verifier refuses by returning False or raising;
    both count as a refusal. Failures are collected so one run reports all."""
    global _checks
    _checks += 1
    try:
        got = bool(fn())
    except Exception:  # noqa: BLE001 - any raise is the SDK's refusal
        got = False
    if got != wanted:
        _failures.append(
            f"{file}: {what}: expected {'accept' if wanted else 'reject'}, "
            f"got {'accept' if got else 'reject'}"
        )
    return got == wanted


def expect_equal(file, what, actual, wanted):
    global _checks
    _checks += 1
    if actual != wanted:
        _failures.append(f"{file}: {what}: got {actual!r}, expected {wanted!r}")
        return False
    return True


# Field order follows the files the Rust tests were written against.
ORDER = [
    "provider", "sdk", "function", "verified_by", "sdk_verified", "sdk_result",
    "secret", "secrets_all", "verify_token", "timestamp", "method", "url", "params",
    "content_type", "body", "headers", "expect",
]


class Writer:
    def __init__(self, out_dir):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.written = 0

    def write(self, file, vector):
        unknown = set(vector) - set(ORDER)
        if unknown:
            raise KeyError(f"{file}: unknown fields {sorted(unknown)}")
        ordered = {k: vector[k] for k in ORDER if k in vector}
        text = json.dumps(ordered, ensure_ascii=False, indent=2) + "\n"
        (self.out_dir / f"{file}.json").write_text(text, encoding="utf-8")
        self.written += 1


def finish(label, writer):
    """Exits non-zero when any check failed, after listing them all."""
    if _failures:
        for f in _failures:
            print(f"FAIL {f}", file=sys.stderr)
        print(f"{label}: {len(_failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    checked = f", all {_checks} checks passed" if _checks else " (no SDK to check them with)"
    print(f"{label}: {writer.written} vectors written{checked}")
