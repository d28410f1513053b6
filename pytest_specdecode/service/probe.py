"""One look at a server: ``/health_generate``, then ``/server_info`` checked against a config.

The same look serves the readiness gate (polled after a restart), the
``--dflash-restart=auto`` check of the live server, a worker joining a server
another worker brought up, and external mode. What it can see:

- connection refused (or reset)  -> ``loading``: weights still loading
- HTTP 503                       -> ``warming up``: listening, warmup not done
- no answer in time              -> ``unresponsive`` (busy, but it answers HTTP)
- other 5xx                      -> ``unhealthy``
- HTTP 200                       -> ``/server_info`` compared with the config:
  ``verified``, or ``verifying`` with the mismatches

Some answers are final, whatever the timeout: 401/403 (API key), 404 (not an
SGLang server), a redirect (never followed: another host's answer is not this
server's) and a listener that accepts TCP connections but answers no HTTP
request at all (another program holds the port). They raise
:class:`ProbeFailed` at once.

One look never takes longer than the budget it is given, headers and bodies
included: every request has a whole deadline, the smaller of its own timeout
and the time left of that budget. A per-read timeout alone does not bound a
request (a server sending its status line one byte every few seconds resets
it on every byte), so the headers are read under :class:`wire.DeadlineGuard`,
which shuts the socket at the deadline, and a body is read by
:func:`wire.read_chunks` within it and under a size cap; the health answer's
body is not read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import requests

from pytest_specdecode.client import wire
from pytest_specdecode.errors import SpecDecodeError

LOADING = "loading"
WARMING_UP = "warming up"
UNRESPONSIVE = "unresponsive"
UNHEALTHY = "unhealthy"
VERIFYING = "verifying"
STALE = "stale"
VERIFIED = "verified"

HEALTH_PATH = "/health_generate"
# Answered by uvicorn at once, without generating: tells "busy" from "not HTTP".
QUICK_PATH = "/model_info"
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
INFO_CAP = 16 << 20
"""Bytes of a ``/server_info`` answer (a real one is a few KiB)."""
MIN_WAIT = 0.05


@runtime_checkable
class VerificationLike(Protocol):
    """What a dialect's ``verify()`` returns: lines for mismatches and unverified values."""

    @property
    def mismatches(self) -> Sequence[str]: ...

    @property
    def unverified(self) -> Sequence[str]: ...


Verify = Callable[[Mapping[str, Any]], "Sequence[str] | VerificationLike"]


class ProbeFailed(SpecDecodeError):
    """An answer no amount of waiting changes; ``reason``: auth, not-sglang, silent."""


@dataclass
class Look:
    """What one look saw. ``info`` is set once ``/server_info`` answered."""

    phase: str
    detail: str
    info: dict[str, Any] | None = None
    mismatches: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.phase == VERIFIED


class ServerProbe:
    """Looks at the server at ``base_url`` for the config ``verify`` checks.

    ``request_timeout`` bounds every request; until the server has answered
    any HTTP request, health waits only ``silent_timeout`` before a quick
    ``/model_info`` request tells a busy server from a silent listener.
    A ``requests.Session`` (its own, or one given) gets the adapter whose
    connections show their socket to the deadline guard.
    """

    def __init__(
        self,
        base_url: str,
        *,
        verify: Verify,
        label: str,
        api_key: str | None = None,
        session: requests.Session | None = None,
        request_timeout: float = 10.0,
        silent_timeout: float = 3.0,
    ) -> None:
        self.url = base_url.rstrip("/")
        self.verify = verify
        self.label = label
        self.api_key_sent = bool(api_key)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._own_session = session is None
        self.session = requests.Session() if session is None else session
        if isinstance(self.session, requests.Session):
            guarded = wire.GuardedAdapter()
            self.session.mount("http://", guarded)
            self.session.mount("https://", guarded)
        self.request_timeout = request_timeout
        self.silent_timeout = silent_timeout
        self.answered = False
        self._info_path: str | None = None
        self._end = time.monotonic() + request_timeout

    def close(self) -> None:
        if self._own_session:
            self.session.close()

    def look(self, budget: float | None = None) -> Look:
        """Health, then ``/server_info`` + verify if healthy; all of it within ``budget`` s."""
        limit = self.request_timeout if budget is None else max(MIN_WAIT, budget)
        self._end = time.monotonic() + limit
        health = self._health(limit)
        if health is not None:
            return health
        info = self._server_info(self._left(self.request_timeout))
        if isinstance(info, Look):
            return info
        result = self.verify(info)
        if isinstance(result, VerificationLike):
            mismatches, unverified = list(result.mismatches), list(result.unverified)
        else:
            mismatches, unverified = list(result), []
        if mismatches:
            return Look(VERIFYING, mismatches[0], info, mismatches, unverified)
        return Look(VERIFIED, "/server_info matches", info, [], unverified)

    def _left(self, timeout: float) -> float:
        """``timeout``, cut to what is left of this look's budget."""
        return max(MIN_WAIT, min(timeout, self._end - time.monotonic()))

    def _get(self, path: str, timeout: float) -> requests.Response:
        """GET with the body left unread (``stream``); a redirect is final.

        The headers come within ``timeout`` (cut to the look's budget) as a
        whole, or the request is a :class:`requests.exceptions.ReadTimeout`.
        """
        timeout = self._left(timeout)
        guard = wire.DeadlineGuard(timeout)
        try:
            with guard:
                resp = self.session.get(
                    self.url + path,
                    timeout=timeout,
                    headers=self.headers,
                    stream=True,
                    allow_redirects=False,
                )
        except requests.exceptions.RequestException:
            if guard.fired:
                raise _too_slow(path, timeout) from None
            raise
        if guard.fired:
            # A socket shut mid-header can read as the end of the headers: never an answer.
            resp.close()
            raise _too_slow(path, timeout)
        status = int(resp.status_code)
        if 300 <= status < 400:
            location = (getattr(resp, "headers", None) or {}).get("Location") or ""
            resp.close()
            where = wire.scrub_location(location) if location else "nowhere (no Location)"
            raise ProbeFailed(
                f"server at {self.url} answered HTTP {status} on {path} redirecting to {where} "
                f"for config {self.label!r}: redirects are never followed; point the plugin "
                "at the server itself",
                reason="redirect",
                config=self.label,
            )
        return resp

    def _json(self, resp: requests.Response, timeout: float) -> Any:
        """The body as JSON, read within ``timeout`` and under ``INFO_CAP``."""
        left = self._left(timeout)
        chunks = wire.read_chunks(
            resp.raw, deadline=time.monotonic() + left, stall=left, cap=INFO_CAP
        )
        coding = (getattr(resp, "headers", None) or {}).get("Content-Encoding")
        return json.loads(wire.decoded(wire.read_body(chunks), coding, cap=INFO_CAP))

    def _health(self, limit: float) -> Look | None:
        """None when healthy (HTTP 200); else what the server is doing."""
        first_contact = not self.answered
        timeout = min(self.request_timeout, limit)
        if first_contact:
            timeout = min(timeout, self.silent_timeout)
        try:
            resp = self._get(HEALTH_PATH, timeout)
        except requests.exceptions.ConnectTimeout:
            return Look(LOADING, "connect timed out")
        except requests.exceptions.Timeout:
            if first_contact and timeout >= self.silent_timeout:
                self._check_not_silent()
            return Look(UNRESPONSIVE, f"no answer within {timeout:.1f} s")
        except requests.exceptions.ConnectionError as exc:
            return Look(LOADING, connection_detail(exc))
        status = int(resp.status_code)
        resp.close()
        self.answered = True
        if status == 200:
            return None
        if status == 503:
            return Look(WARMING_UP, "HTTP 503")
        if status in (401, 403):
            raise self._auth(status, HEALTH_PATH)
        if status == 404:
            raise ProbeFailed(
                f"server at {self.url} answered HTTP 404 on {HEALTH_PATH} for config "
                f"{self.label!r}: it is not an SGLang server; check the host and port",
                reason="not-sglang",
                config=self.label,
            )
        return Look(UNHEALTHY, f"HTTP {status}")

    def _check_not_silent(self) -> None:
        full = self._left(self.silent_timeout) >= self.silent_timeout
        try:
            self._get(QUICK_PATH, self.silent_timeout).close()
        except ProbeFailed:
            return  # it answered HTTP (a redirect): not a silent listener
        except requests.exceptions.ConnectTimeout:
            return
        except requests.exceptions.Timeout:
            if not full:
                return  # cut short by the budget: cannot tell
            port = urlsplit(self.url).port
            raise ProbeFailed(
                f"{self.url} accepts TCP connections but answered no HTTP request within "
                f"{self.silent_timeout:g} s (GET {HEALTH_PATH}, GET {QUICK_PATH}) for config "
                f"{self.label!r}: another program holds the port; find it with "
                f"`ss -ltnp 'sport = :{port}'` on that host",
                reason="silent",
                config=self.label,
            ) from None
        except requests.exceptions.RequestException:
            return
        self.answered = True

    def _auth(self, status: int, path: str) -> ProbeFailed:
        what = "refused the API key it was given" if self.api_key_sent else "needs an API key"
        return ProbeFailed(
            f"server at {self.url} {what} (HTTP {status} on {path}) for config "
            f"{self.label!r}: give the server's --api-key to the plugin "
            "(--dflash-api-key or DFLASH_API_KEY)",
            reason="auth",
            config=self.label,
        )

    def _server_info(self, timeout: float) -> dict[str, Any] | Look:
        paths = (self._info_path,) if self._info_path else SERVER_INFO_PATHS
        for path in paths:
            assert path is not None
            try:
                resp = self._get(path, timeout)
            except requests.exceptions.RequestException as exc:
                return Look(VERIFYING, f"GET {path} failed: {type(exc).__name__}")
            try:
                status = int(resp.status_code)
                if status == 404 and path != SERVER_INFO_PATHS[-1]:
                    continue
                if status in (401, 403):
                    raise self._auth(status, path)
                if status != 200:
                    return Look(VERIFYING, f"GET {path}: HTTP {status}")
                try:
                    data = self._json(resp, timeout)
                except ValueError:
                    return Look(VERIFYING, f"GET {path}: not JSON")
                except wire.BoundExceeded as exc:
                    return Look(VERIFYING, f"GET {path}: {exc}")
                except requests.exceptions.RequestException as exc:
                    return Look(VERIFYING, f"GET {path} failed: {type(exc).__name__}")
            finally:
                resp.close()
            if not isinstance(data, dict):
                return Look(VERIFYING, f"GET {path}: not a JSON object")
            self._info_path = path
            return data
        return Look(VERIFYING, f"GET {SERVER_INFO_PATHS[-1]}: HTTP 404")


def _too_slow(path: str, timeout: float) -> requests.exceptions.ReadTimeout:
    # The guard shut the socket: the server answers too slowly, it did not go away.
    return requests.exceptions.ReadTimeout(f"GET {path}: no whole answer within {timeout:.1f} s")


def probe_live(probe: ServerProbe, budget: float | None = None) -> Look:
    """One verdict on a server that should already be up (auto mode, joining workers).

    A server that is merely busy (health slow, ``/model_info`` answered) gets a
    second look with the full request timeout; both within ``budget`` seconds
    (the ready timeout) when given.
    """
    end = None if budget is None else time.monotonic() + budget
    look = probe.look(budget)
    if look.phase == UNRESPONSIVE:
        if end is None:
            return probe.look()
        left = end - time.monotonic()
        if left > MIN_WAIT:
            look = probe.look(left)
    return look


def connection_detail(exc: BaseException) -> str:
    """``connection refused`` / ``connection reset`` / ``cannot connect`` from a requests error."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    text = str(exc)
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, ConnectionResetError):
            return "connection reset"
        stack.extend(
            [cur.__cause__, cur.__context__, *[a for a in cur.args if isinstance(a, BaseException)]]
        )
        reason = getattr(cur, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)
    if "refused" in text.lower():
        return "connection refused"
    return "cannot connect"
