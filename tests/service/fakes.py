"""Typed fakes for the service layer: a clock, an HTTP session, a server and its controller.

``FakeServer`` plays an SGLang server in memory: a controller's ``apply()``
(re)starts it with the flags of the launch, it refuses connections while
"loading", answers 503 while "warming up", then 200 and a ``/server_info``
built from those flags. Time is the ``FakeClock``; a request that times out
advances it by its timeout, as a real one would take. So the gate, the probe
and the manager run their real state machines in milliseconds.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from pytest_specdecode.config.settings import Settings
from pytest_specdecode.output.progress import Progress
from pytest_specdecode.service.base import (
    UNKNOWN_LISTENER,
    LaunchSpec,
    ListenerCheck,
    ProcessIdentity,
)
from pytest_specdecode.service.manager import ServiceManager

URL = "http://127.0.0.1:30000"
GOOD_INFO = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.sleeps.append(seconds)
        self.now += seconds


class FakeRaw:
    """The body of a :class:`FakeResponse` as urllib3 hands it out (``read1``)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def read1(self, size: int = -1) -> bytes:
        return self._data.read1(size)


class FakeResponse:
    def __init__(
        self, status: int, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> None:
        self.status_code = status
        self._body = body
        self.closed = False
        self.headers = dict(headers or {})
        self.raw = FakeRaw(b"" if body is None else json.dumps(body).encode())

    def json(self) -> Any:
        if self._body is None:
            raise ValueError("no JSON")
        return self._body

    def close(self) -> None:
        self.closed = True


def refused() -> Exception:
    return requests.exceptions.ConnectionError(ConnectionRefusedError(111, "Connection refused"))


def read_timeout() -> Exception:
    return requests.exceptions.ReadTimeout("read timed out")


# A behaviour maps (path, seconds since start) to a response or an exception to raise.
Behaviour = Callable[[str, float], "FakeResponse | Exception"]


class FakeSession:
    """``requests.Session.get`` against a behaviour; records (path, t, headers)."""

    def __init__(self, clock: FakeClock, behaviour: Behaviour) -> None:
        self.clock = clock
        self.start = clock.now
        self.behaviour = behaviour
        self.calls: list[tuple[str, float, dict[str, str]]] = []

    def get(
        self, url: str, *, timeout: float, headers: Mapping[str, str], **kwargs: Any
    ) -> FakeResponse:
        assert 0 < timeout <= 30.0
        assert kwargs == {"stream": True, "allow_redirects": False}, kwargs
        path = urlsplit(url).path
        self.calls.append((path, self.clock.now - self.start, dict(headers)))
        outcome = self.behaviour(path, self.clock.now - self.start)
        if isinstance(outcome, requests.exceptions.Timeout):
            self.clock.now += timeout  # a timeout takes its time
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def close(self) -> None:
        pass


def startup(load: float = 1.0, warm: float = 1.0, info: dict[str, Any] | None = None) -> Behaviour:
    """A server that refuses for ``load`` s, answers 503 for ``warm`` s, then 200."""

    def behaviour(path: str, t: float) -> FakeResponse | Exception:
        if t < load:
            return refused()
        if path == "/health_generate":
            return FakeResponse(503 if t < load + warm else 200)
        return FakeResponse(200, info if info is not None else GOOD_INFO)

    return behaviour


def verify_draft_tokens(expected: int) -> Callable[[Mapping[str, Any]], list[str]]:
    def verify(info: Mapping[str, Any]) -> list[str]:
        got = info.get("speculative_num_draft_tokens")
        if got != expected:
            return [f"speculative_num_draft_tokens: expected {expected!r}, server has {got!r}"]
        return []

    return verify


def info_from_argv(argv: tuple[str, ...]) -> dict[str, Any]:
    """``/server_info`` as SGLang would report it for a command line (DFLASH: topk 1)."""
    info: dict[str, Any] = {"launch_command": " ".join(argv), "speculative_eagle_topk": 1}
    for flag, value in itertools.pairwise(argv):
        if flag.startswith("--speculative-"):
            name = flag[2:].replace("-", "_")
            info[name] = int(value) if value.isdigit() else value
    return info


@dataclass
class FakeServer:
    """An in-memory server process: started by ``start()``, killed by ``die()``."""

    clock: FakeClock
    load: float = 1.0
    warm: float = 0.5
    info: dict[str, Any] | None = None
    started_at: float | None = None
    starts: list[dict[str, Any]] = field(default_factory=list)
    status: int | None = None  # fixed answer to every request (e.g. 401), if set

    def start(self, launch: LaunchSpec) -> None:
        self.info = info_from_argv(launch.argv)
        self.started_at = self.clock.now
        self.starts.append(self.info)

    def die(self) -> None:
        self.started_at = None

    def running(self, info: dict[str, Any]) -> None:
        """Someone else's server, up and ready since long ago."""
        self.info = info
        self.started_at = self.clock.now - 1e6

    def behaviour(self, path: str, t: float) -> FakeResponse | Exception:
        if self.status is not None:
            return FakeResponse(self.status)
        if self.started_at is None or self.info is None:
            return refused()
        up = self.clock.now - self.started_at
        if up < self.load:
            return refused()
        if path == "/health_generate":
            return FakeResponse(503 if up < self.load + self.warm else 200)
        if path == "/server_info":
            return FakeResponse(200, dict(self.info))
        return FakeResponse(200, {})


@dataclass
class FakeController:
    kind: str = "fake"
    may_answer_stale: bool = False
    fail_at: float | None = None
    clock: FakeClock | None = None
    start: float = 100.0
    log_lines: list[str] = field(default_factory=lambda: [f"log line {i}" for i in range(50)])
    failure_calls: int = 0
    server: FakeServer | None = None
    listener: ListenerCheck = UNKNOWN_LISTENER
    launches: list[LaunchSpec] = field(default_factory=list)
    exit_status: str | None = None
    pid: int = 42
    noop: bool = False  # script mode with a script that changes nothing
    stopped: int = 0
    _identity: ProcessIdentity | None = None

    def apply(self, launch: LaunchSpec) -> ProcessIdentity:
        self.launches.append(launch)
        self.pid += 1
        self.exit_status = None
        if self.server is not None and not self.noop:
            self.server.start(launch)
        self._identity = ProcessIdentity(kind=self.kind, pid=self.pid)
        return self._identity

    def alive(self) -> bool:
        return self.failure() is None

    def failure(self) -> str | None:
        self.failure_calls += 1
        if self.exit_status is not None:
            return self.exit_status
        if self.fail_at is not None:
            assert self.clock is not None
            if self.clock.now - self.start >= self.fail_at:
                return "exited with status 3"
        return None

    def die(self, status: str = "killed by signal SIGKILL") -> None:
        self.exit_status = status
        if self.server is not None:
            self.server.die()

    def logs(self, tail: int = 30) -> str:
        return "\n".join(self.log_lines[-tail:])

    def log_location(self) -> str | None:
        return "/tmp/fake.log"

    def identity(self) -> ProcessIdentity | None:
        return self._identity or ProcessIdentity(kind=self.kind, pid=42)

    def check_listener(self) -> ListenerCheck:
        return self.listener

    def stop(self) -> None:
        self.stopped += 1

    def restore(self) -> None:
        pass


def fake_manager(
    settings: Settings,
    controller: FakeController,
    session: FakeSession,
    clock: FakeClock,
    **kwargs: Any,
) -> ServiceManager:
    """A ServiceManager on the fakes: its controller, HTTP session, clock and sleep."""
    return ServiceManager(
        settings,
        progress=Progress(None, isatty=False),
        controller_factory=lambda *args: controller,
        port=30000,
        http=session,  # type: ignore[arg-type]
        clock=clock,
        sleep=clock.sleep,
        **kwargs,
    )
