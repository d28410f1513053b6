"""The load generator: streaming ``/generate`` requests on one asyncio event loop.

One thread per request (and the GIL shared between them) made the client the
limit at high concurrency; an event loop on aiohttp (what SGLang's and vLLM's
bench clients use) keeps one connection per in-flight request at a small cost
per byte. A request is stamped when its body is handed to the socket (a trace
hook, not when its coroutine starts), each read with the first reading of the
loop's turn that handles it (:class:`~pytest_specdecode.eventloop.TurnClock`), the
SSE lines are split incrementally (:class:`~pytest_specdecode.client.wire.SSESplitter`,
the one splitter of both paths) and events are decoded with orjson (a
cumulative stream's events for their ``meta_info`` alone, but the last).
Every request has the bounds of :mod:`pytest_specdecode.client.limits`: a whole
deadline from the tokens asked, a stall limit between reads, size caps;
redirects are never followed.

The result of each request is the same :class:`~pytest_specdecode.client.sglang.GenerateResult`
the ``requests`` client builds, so every figure and check downstream applies
unchanged. Only the request's compact figures are kept: the last event's
``meta_info``, the text, chunk times and token counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import aiohttp
import orjson

from pytest_specdecode.client.limits import DEFAULT_LIMITS, MAX_RESPONSE, MAX_SSE_LINE, Limits
from pytest_specdecode.client.sglang import (
    GenerateResult,
    ServerError,
    _error_text,
    _generate_result,
    error_message,
    int_ids,
    is_int,
)
from pytest_specdecode.client.wire import BoundExceeded, SSESplitter
from pytest_specdecode.eventloop import TurnClock, never_sleeping, run_fresh

T = TypeVar("T")
_ERROR_BODY = 64 << 10  # bytes of an error reply read for its message


@dataclass(frozen=True)
class Target:
    """Where requests go and how they are bounded. ``headers`` may hold the API key:
    it is sent, never printed (``repr`` leaves it out)."""

    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    limits: Limits = DEFAULT_LIMITS
    max_line: int = MAX_SSE_LINE
    wait: str = "auto"
    """``--dflash-client-wait``: ``poll``, ``sleep`` or ``auto`` (by the address)."""

    @property
    def polls(self) -> bool:
        """Whether the loop polls through a round instead of sleeping between reads."""
        return self.wait == "poll" or (self.wait == "auto" and not self.on_this_machine)

    @property
    def on_this_machine(self) -> bool:
        """Whether the server answers on a loopback address (it shares this machine's
        cores with the client)."""
        host = urlsplit(self.base_url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:  # a name: another machine as far as the client can tell
            return False


@dataclass
class Request:
    """One request to send: its body and where its outcome goes."""

    body: bytes
    max_tokens: int
    result: GenerateResult | None = None
    error: str | None = None
    read: _Read | None = field(default=None, repr=False)  # read, not yet finished


_META = b'"meta_info":'
_META_AT = len(_META)


def _meta_count(payload: bytes) -> int | None:
    """``meta_info.completion_tokens`` of an event, decoding only its ``meta_info``.

    SGLang (and the simulator) put ``meta_info`` last, after the cumulative
    text and ids: this decodes the object after the last ``"meta_info":`` up to
    the event's closing brace. None whenever that is not plainly the case (no
    such key, not an object, an ``"error"`` anywhere, a count that is not an
    integer): the caller then decodes the whole event and its checks apply
    (:func:`~pytest_specdecode.client.sglang.error_message` sees every error shape there).
    """
    # rfind, not `in`: the same answer (any occurrence), and CPython's reverse search
    # is about four times faster over a cumulative event's kilobytes of text.
    if not payload.endswith(b"}") or payload.rfind(b'"error"') >= 0:
        return None
    at = payload.rfind(_META)
    if at < 0:
        return None
    try:
        meta = orjson.loads(memoryview(payload)[at + _META_AT : -1])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(meta, dict):
        return None
    count = meta.get("completion_tokens")
    return count if is_int(count) else None


def _refused(message: str, status: int | None = None) -> ServerError:
    """The error of a ``/generate`` reply that is not a result (``status``: its HTTP one)."""
    return ServerError("POST", "/generate", status, message)


@dataclass(slots=True)
class _Stream:
    """Folds a ``/generate`` stream's events into a GenerateResult, event by event
    (the same rules as the ``requests`` client: cumulative or incremental text,
    token counts from ``meta_info.completion_tokens``).

    Once two events decoded whole show a cumulative stream (SGLang's default:
    each event repeats all the text and ids so far), later events are read for
    their ``meta_info`` alone and only the last one is decoded whole, when the
    stream ends: decoding every cumulative event is quadratic in the answer's
    length and was most of the client's time at high concurrency. An
    incremental stream (small deltas) is decoded event by event.
    """

    send: float
    text: str = ""
    ids: list[list[Any]] | None = None
    last: dict[str, Any] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    seen: int = 0
    decoded: int = 0  # events decoded whole
    cumulative: bool = False
    pending: bytes | None = None  # the last event, its meta_info alone read

    def event(self, arrival: float, payload: bytes) -> None:
        count = _meta_count(payload) if self.cumulative else None
        if count is None:
            count = self._decode(payload)
            self.pending = None
        else:
            self.pending = payload
        if count > self.seen:
            self.times.append(arrival)
            self.tokens.append(count - self.seen)
            self.seen = count

    def _decode(self, payload: bytes) -> int:
        """Decode a whole event into the text, ids and ``last``; its token count."""
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _refused(f"undecodable event {payload[:200]!r}") from None
        if not isinstance(event, dict):
            raise _refused(f"event is not an object: {event!r:.200}")
        if (message := error_message(event)) is not None:
            raise _refused(message)
        self.last = event
        meta = event.get("meta_info")
        count = meta.get("completion_tokens", self.seen) if isinstance(meta, dict) else self.seen
        if not is_int(count):
            raise _refused(f"completion_tokens is not an integer: {count!r:.50}")
        chunk_text = event.get("text", "")
        chunk_text = chunk_text if isinstance(chunk_text, str) else str(chunk_text)
        # SGLang streams cumulative text by default, deltas with --incremental-streaming-output.
        continues = chunk_text.startswith(self.text)
        self.text = chunk_text if continues else self.text + chunk_text
        chunk_ids = event.get("output_ids")
        whole_ids = True
        if isinstance(chunk_ids, list):
            # Cumulative ids replace what came before, deltas add to it. The lists are
            # kept as sent and checked once at the end.
            whole_ids = len(chunk_ids) == count
            if whole_ids or self.ids is None:
                self.ids = [chunk_ids]
            else:
                self.ids.append(chunk_ids)
        self.decoded += 1
        # The first event reads the same either way; the second tells them apart.
        self.cumulative = self.decoded >= 2 and continues and whole_ids
        return count

    def result(self, end: float) -> GenerateResult:
        if self.pending is not None:
            # A cumulative stream's last event holds all of its text and ids.
            self.text, self.ids = "", None
            self._decode(self.pending)
            self.pending = None
        if not self.last:
            raise _refused("stream ended without any event", 200)
        result = _generate_result(self.last, self.send)
        result.text = self.text
        result.output_ids = (
            None if self.ids is None else int_ids([i for chunk in self.ids for i in chunk])
        )
        result.end_time = end
        result.chunk_times = self.times
        result.chunk_tokens = self.tokens
        return result


async def stream_one(
    session: aiohttp.ClientSession,
    target: Target,
    request: Request,
    clock: Callable[[], float],
    arrived: Callable[[], float],
) -> None:
    """Send ``request`` and read its stream to the end, or fill in its one-line
    error; :func:`finish` makes its result. The send is stamped with ``clock``,
    each read with ``arrived``."""
    url = target.base_url + "/generate"
    limits = target.limits
    deadline = limits.deadline(request.max_tokens)
    timeout = aiohttp.ClientTimeout(total=deadline, sock_read=limits.stall)
    sent = _Sent(clock)
    try:
        async with session.post(
            url,
            trace_request_ctx=sent,
            data=request.body,
            headers={"Content-Type": "application/json"},
            allow_redirects=False,
            timeout=timeout,
        ) as resp:
            if 300 <= resp.status < 400:
                where = resp.headers.get("Location", "(no Location header)")
                raise _refused(
                    f"redirect to {where[:200]!r} refused (redirects are never followed)",
                    resp.status,
                )
            if resp.status >= 400:
                body = await resp.content.read(_ERROR_BODY)
                raise _refused(_error_text(body.decode("utf-8", "replace")), resp.status)
            send = sent.at
            stream = _Stream(send)
            splitter = SSESplitter(max_line=target.max_line, max_total=MAX_RESPONSE)
            content = resp.content
            end = send
            done = False
            while True:
                data = await content.readany()
                now = arrived()
                if not data:
                    break
                for payload in splitter.feed(data):
                    if payload == b"[DONE]":
                        done = True
                    elif not done:
                        stream.event(now, payload)
                        end = now
                # After [DONE] the body's end (the last chunk) is still read, within the
                # same bounds, so the connection can carry the next request.
            if not done:
                for payload in splitter.close():
                    if payload != b"[DONE]":
                        stream.event(end, payload)
            request.read = _Read(stream, end)
    except ServerError as exc:
        request.error = str(exc)
    except BoundExceeded as exc:  # the same words as the requests client's LimitError
        request.error = f"POST {url} {exc}; refused"
    except aiohttp.ServerTimeoutError:
        # sock_read: the stall limit between two reads (a subclass of TimeoutError,
        # so it is caught before the whole deadline below).
        request.error = (
            f"POST {url} sent nothing for {limits.stall:g} s (stall limit); is the server hung?"
        )
    except asyncio.TimeoutError:
        request.error = (
            f"POST {url} did not finish within its whole deadline of {deadline:g} s "
            f"for {request.max_tokens} tokens; is the server hung or streaming forever?"
        )
    except aiohttp.ClientConnectorError as exc:
        request.error = (
            f"POST {url} failed ({type(exc).__name__}: {exc.os_error.strerror or exc}); "
            f"is the server running at {target.base_url!r}?"
        )
    except aiohttp.ClientError as exc:
        request.error = f"POST {url} failed ({type(exc).__name__}: {str(exc)[:200]})"


@dataclass(frozen=True)
class _Read:
    """A stream read to its end, its result not yet built: what :func:`finish` needs."""

    stream: _Stream
    end: float


def finish(request: Request) -> None:
    """Build the result of a request :func:`stream_one` read to its end, or its error.

    Kept out of the reading: a cumulative stream's last event is decoded whole
    here (kilobytes of text and ids), and at 256 streams ending in one engine
    step that work, done as each stream ends, held the reads of the streams after
    it. Whatever the reply holds, a failure to make a result of it is the
    request's recorded error, never an exception out of the round.
    """
    read, request.read = request.read, None
    if read is None:
        return
    try:
        result = read.stream.result(read.end)
    except ServerError as exc:
        request.error = str(exc)
        return
    except Exception as exc:  # a backstop: what the reply's checks did not foresee
        request.error = (
            f"POST /generate sent a reply that is not a result "
            f"({type(exc).__name__}: {str(exc)[:200]}); refused"
        )
        return
    request.result = result
    if result.completion_tokens <= 0:
        request.error = (
            f"POST /generate returned 0 completion tokens (finish_reason "
            f"{result.finish_reason!r}); the server produced nothing"
        )


class _Sent:
    """When a request went out: when its body was handed to the socket.

    A request is sent when its bytes go out, not when its coroutine starts: on
    Python 3.11 aiohttp writes the body from a task of its own, after every
    request of the round has been set up, so a stamp before ``post`` counts the
    client's own queue (tens of ms for 256 at once) as the server's latency and
    in every TTFT. :func:`_on_chunk_sent` runs just before the body's write; one
    body is one chunk, and only the first stamp counts. ``at`` starts as the time
    the request was made, for a request that never wrote a body.
    """

    __slots__ = ("at", "clock", "marked")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.at = clock()
        self.marked = False

    def mark(self) -> None:
        if not self.marked:
            self.at = self.clock()
            self.marked = True


async def _on_chunk_sent(
    _session: aiohttp.ClientSession,
    context: SimpleNamespace,
    _params: aiohttp.TraceRequestChunkSentParams,
) -> None:
    sent = context.trace_request_ctx
    if isinstance(sent, _Sent):
        sent.mark()


def new_session(target: Target) -> aiohttp.ClientSession:
    """A connection pool for ``target``: no cookies, no decompression, the send-time
    hook. Unlimited here: each way of driving a round bounds its requests in flight,
    and so the connections."""
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_on_chunk_sent)
    return aiohttp.ClientSession(
        trace_configs=[trace],
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=None),
        headers=dict(target.headers),
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


Sleep = Callable[[float], Awaitable[None]]


async def drive(
    target: Target,
    requests: Sequence[Request],
    *,
    clock: Callable[[], float],
    arrivals: Sequence[float] | None = None,
    in_flight: int = 0,
    sleep: Sleep = asyncio.sleep,
) -> tuple[float, float | None]:
    """Send every request on a pool of their own (:func:`new_session`); return the
    start time and the CPU seconds the loop's thread spent: the client's own cost
    against a server on this machine, where the loop blocks on its sockets between
    reads; None when the loop polled (for one on another machine): its CPU time is then
    its waiting, not its work.

    Without ``arrivals`` and with ``in_flight`` 0 every request goes at once (a
    synchronized round). With ``in_flight`` N, N workers each send the next
    request as soon as their last one ends (a continuous closed loop, SGLang's
    ``--max-concurrency``). With ``arrivals`` request i is released
    ``arrivals[i]`` seconds after the start and, with ``in_flight``, waits while
    that many are in flight. Results are made (:func:`finish`) when every
    request has ended, so that work is not in any request's timings.
    """
    # A read's stamp is its turn's (see TurnClock): at 256 streams the events of one
    # engine step come in together and are folded one after another, and a stamp
    # per fold would carry the folding of all the streams before it.
    arrived = TurnClock(clock)
    try:
        async with contextlib.AsyncExitStack() as stack:
            session = await stack.enter_async_context(new_session(target))

            async def send(req: Request) -> None:
                await stream_one(session, target, req, clock, arrived)

            # A loop kept polling saves the 0.2-2 ms of a wake-up per read but takes a
            # whole core: a server on this machine (SGLang on CPU, the simulator) then
            # serves several times slower. So the loop sleeps in the kernel until a
            # socket is readable, and polls only for a server on another machine (unless
            # --dflash-client-wait says otherwise).
            polled = target.polls
            if polled:
                stack.enter_context(never_sleeping())
            # The CPU time of the round's span alone (the same span as its wall time), not
            # the pool's making and closing.
            cpu = time.thread_time()
            start = clock()
            if arrivals is not None:
                gate = asyncio.Semaphore(in_flight) if in_flight > 0 else None

                async def arrive(req: Request, offset: float) -> None:
                    delay = start + offset - clock()
                    if delay > 0:
                        await sleep(delay)  # the arrival time itself: this is the load
                    async with gate or contextlib.nullcontext():
                        await send(req)

                arrive_all = (arrive(r, a) for r, a in zip(requests, arrivals, strict=True))
                await asyncio.gather(*arrive_all)
            elif in_flight > 0:
                queue = iter(requests)

                async def worker() -> None:
                    for req in queue:  # one shared iterator: each request goes once
                        await send(req)

                await asyncio.gather(*(worker() for _ in range(min(in_flight, len(requests)))))
            else:
                await asyncio.gather(*map(send, requests))
            return start, None if polled else time.thread_time() - cpu
    finally:
        # After the round, interrupted or not: every stream read to its end is kept.
        for req in requests:
            finish(req)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code (``benchmark.pedantic``'s target).

    A fresh event loop per call (:func:`~pytest_specdecode.eventloop.run_fresh`: uvloop's
    where installed); in a thread of its own when this thread already runs a loop (an
    async test framework), since a loop cannot be nested.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_fresh(coro)
    done: Future[T] = Future()

    def runner() -> None:
        try:
            done.set_result(run_fresh(coro))
        except BaseException as exc:  # handed back to the caller's thread
            done.set_exception(exc)

    threading.Thread(target=runner, name="specdecode-load-loop", daemon=True).start()
    return done.result()


def body_bytes(text: str, max_tokens: int, *, temperature: float, ignore_eos: bool) -> bytes:
    """The JSON body of one streaming ``/generate`` request."""
    return orjson.dumps(
        {
            "text": text,
            "sampling_params": {
                "max_new_tokens": max_tokens,
                "temperature": temperature,
                "ignore_eos": ignore_eos,
            },
            "stream": True,
        }
    )
