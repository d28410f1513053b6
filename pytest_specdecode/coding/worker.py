"""The sandbox worker and the wire format it shares with the parent.

This file is stdlib-only on purpose: the parent passes its *source* to
``python -I -S -c`` inside the sandbox, where neither this package nor
site-packages is visible. The parent imports it as a normal module to use the
same :func:`encode` / :func:`decode`.

Protocol (one JSON object per line; the worker keeps private duplicates of the
pipes and points fds 0, 1 and 2 at /dev/null before any candidate code runs):

1. parent -> worker: ``{"uid", "gid", "limits", "preimport", "preamble", "code", "entry"}``;
   worker applies the rlimits, drops to ``uid``/``gid`` when given, runs the
   code and answers ``{"ok": true}`` or ``{"ok": false, "error": "..."}``.
2. parent -> worker: ``{"id": n, "args": <encoded tuple>}`` any number of times;
   worker answers ``{"id": n, "ok": true, "value": <encoded>}`` or
   ``{"id": n, "ok": false, "exc": "TypeName: message"}`` in order.

Nothing the worker says is trusted: the candidate runs in the same process
and may rewrite any of it. The parent only accepts well-formed values for the
ids it asked for and compares them with its own reference results.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

TAG = "$"
# Ints beyond 64 bits travel as hex: JSON decimal ints longer than 4300 digits
# are refused by Python's int/str conversion limit.
_BIG = 1 << 64
MAX_DEPTH = 100
# The collections the wire format carries, by their tag.
_COLLECTIONS: dict[str, type[Any]] = {
    "list": list,
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
}


def encode(value: Any, depth: int = 0) -> Any:
    """Turn a plain Python value into tagged JSON-compatible data."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    d = depth + 1
    if value is None or isinstance(value, (bool, str, float)):
        return value if type(value) in (bool, str, float) or value is None else _plain(value)
    if isinstance(value, int):
        value = int(value)
        return value if -_BIG < value < _BIG else {TAG: "int", "v": hex(value)}
    kind = next((k for k, t in _COLLECTIONS.items() if isinstance(value, t)), None)
    if kind is not None:
        return {TAG: kind, "v": [encode(item, d) for item in value]}
    if isinstance(value, dict):
        return {TAG: "dict", "v": [[encode(k, d), encode(v, d)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)):
        return {TAG: "bytes", "v": bytes(value).hex()}
    if isinstance(value, complex):
        return {TAG: "complex", "v": [value.real, value.imag]}
    return {TAG: "opaque", "type": type(value).__name__, "v": _safe_repr(value)}


def _plain(value: Any) -> Any:
    # Subclasses of str/float/bool are reduced to the base type.
    for base in (bool, str, float):
        if isinstance(value, base):
            return base(value)
    return value


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)[:200]
    except BaseException:
        return "<unrepresentable>"


class Opaque:
    """A value the wire format cannot carry; equal only to the same type and repr."""

    __slots__ = ("repr", "type")

    def __init__(self, type_name: str, text: str) -> None:
        self.type = type_name
        self.repr = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.type, self.repr) == (other.type, other.repr)

    def __hash__(self) -> int:
        return hash((self.type, self.repr))

    def __repr__(self) -> str:
        return f"<{self.type} {self.repr}>"


def decode(data: Any, depth: int = 0) -> Any:
    """Inverse of :func:`encode`; raises ValueError on anything malformed."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is not dict or not isinstance(data.get(TAG), str):
        raise ValueError(f"malformed value {type(data).__name__}")
    kind, raw, d = data[TAG], data.get("v"), depth + 1
    if kind in _COLLECTIONS:
        if type(raw) is not list:
            raise ValueError(f"malformed {kind}")
        return _COLLECTIONS[kind]([decode(item, d) for item in raw])
    if kind == "dict":
        if type(raw) is not list or not all(type(p) is list and len(p) == 2 for p in raw):
            raise ValueError("malformed dict")
        return {decode(k, d): decode(v, d) for k, v in raw}
    if kind == "int" and type(raw) is str:
        return int(raw, 16)
    if kind == "bytes" and type(raw) is str:
        return bytes.fromhex(raw)
    if kind == "complex" and type(raw) is list and len(raw) == 2:
        return complex(float(raw[0]), float(raw[1]))
    if kind == "opaque" and type(raw) is str and type(data.get("type")) is str:
        return Opaque(data["type"][:100], raw[:200])
    raise ValueError(f"malformed value tagged {kind[:20]!r}")


def describe(exc: BaseException) -> str:
    """``TypeName: message`` on one line, robust to hostile ``__str__``."""
    try:
        text = str(exc)
    except BaseException:
        text = "<unprintable>"
    name = type(exc).__name__
    line = f"{name}: {text}" if text else name
    return " ".join(line.split())[:300]


def _apply_limits(limits: dict[str, int]) -> None:
    import resource

    for name, value in limits.items():
        res = getattr(resource, "RLIMIT_" + name.upper(), None)
        if res is None:
            continue
        # CPU: SIGXCPU at the soft limit, SIGKILL one second later.
        hard = value + 1 if name == "cpu" else value
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(res, (value, hard))


def _become_the_answer(setup: dict[str, Any]) -> None:
    """Limits, then the answer's uid and working directory, before any of its code runs."""
    _apply_limits(setup["limits"])
    for module in setup["preimport"]:
        with contextlib.suppress(BaseException):
            __import__(module)
    if setup["uid"] is not None:
        os.setgroups([])
        os.setgid(setup["gid"])
        os.setuid(setup["uid"])
    workdir = setup.get("workdir")
    if workdir:
        # The warm sandbox's answers each get a fresh directory of their own (0700).
        os.mkdir(workdir, 0o700)
        os.chdir(workdir)
        os.environ["HOME"] = os.environ["TMPDIR"] = workdir


def main() -> None:
    """Run the protocol on fds 0 (requests) and 1 (answers)."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)

    def send(obj: dict[str, Any]) -> None:
        proto_out.write(json.dumps(obj).encode() + b"\n")
        proto_out.flush()

    setup = json.loads(proto_in.readline())
    try:
        _become_the_answer(setup)
    except BaseException as exc:  # the sandbox's failure, not the answer's: said as such
        send({"ok": False, "setup": describe(exc)})
        return
    namespace: dict[str, Any] = {"__name__": "__candidate__"}
    try:
        exec(compile(setup["preamble"], "<preamble>", "exec"), namespace)
        exec(compile(setup["code"], "<candidate>", "exec"), namespace)
        func = namespace.get(setup["entry"])
        if not callable(func):
            send({"ok": False, "error": f"the code does not define a function {setup['entry']!r}"})
            return
    except BaseException as exc:
        send({"ok": False, "error": describe(exc)})
        return
    send({"ok": True})
    for line in proto_in:
        request = json.loads(line)
        try:
            result = func(*decode(request["args"]))
        except BaseException as exc:
            send({"id": request["id"], "ok": False, "exc": describe(exc)})
            continue
        try:
            send({"id": request["id"], "ok": True, "value": encode(result)})
        except BaseException as exc:
            send(
                {"id": request["id"], "ok": False, "exc": "unserializable result: " + describe(exc)}
            )


if __name__ == "__main__":
    main()
