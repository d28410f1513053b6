"""SGLang HTTP client: native ``/generate`` and the OpenAI endpoints, with timings.

Streaming responses are read straight off the socket (``read1``) and split into
SSE events by hand: ``iter_lines`` on small reads costs more CPU than the
simulator spends producing tokens, and a blocking ``read(n)`` would delay the
arrival timestamps. Token counts always come from the server
(``meta_info.completion_tokens`` or ``usage``), never from chunk counts, since
with speculative decoding one chunk carries several tokens (docs/metrics.md).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

import requests

from pytest_specdecode.client import wire
from pytest_specdecode.client.limits import DEFAULT_LIMITS, MAX_RESPONSE, MAX_SSE_LINE, Limits
from pytest_specdecode.errors import SpecDecodeError

DEFAULT_TIMEOUT: tuple[float, float] = (10.0, 600.0)
"""Connect and read timeouts in seconds; the read timeout applies per socket read
(it is lowered to the request's stall limit and the time left before its whole deadline)."""

ERROR_BODY = 64 << 10
"""Bytes of an error answer's body read for its message."""


@dataclass(frozen=True)
class StreamChunk:
    """One streamed ``/generate`` event as it arrived."""

    send_time: float
    arrival: float
    new_tokens: int
    completion_tokens: int
    event: dict[str, Any]


class SGLangError(SpecDecodeError):
    """Any failure talking to the server; the message is one line for users."""


class ServerError(SGLangError):
    """The server answered with an error status or an error event in a stream."""

    def __init__(self, method: str, path: str, status: int | None, message: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        where = f"{method} {path}"
        if status is None:
            super().__init__(f"{where} streamed an error: {message}")
        else:
            super().__init__(f"{where} returned {status}: {message}")


class ConnectError(SGLangError):
    """The request never got an answer: refused, reset or timed out."""


class LimitError(SGLangError):
    """A reply passed a bound of :mod:`pytest_specdecode.client.limits` (``kind``: deadline,
    stall, line, response) or redirected elsewhere (``kind`` ``redirect``)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class GenerateResult:
    """One finished request with the client's own timings.

    Times are ``time.perf_counter()`` values; durations are in seconds.
    ``chunk_times[i]`` is when the i-th chunk carrying new tokens arrived and
    ``chunk_tokens[i]`` how many tokens it carried (from the server's
    cumulative counts). Without streaming there is one chunk: the response.
    """

    text: str
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str | None
    send_time: float
    end_time: float
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    output_ids: list[int] | None = None
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    server_e2e_latency: float | None = None
    meta_info: dict[str, Any] = field(default_factory=dict)
    # Per output token, its top (logprob, token id) pairs, best first: asked with
    # ``top_logprobs=K``; None when not asked or the server sent none.
    top_logprobs: list[list[tuple[float, int]]] | None = None

    @property
    def e2e_latency(self) -> float:
        """Client-measured seconds from sending the request to its last byte."""
        return self.end_time - self.send_time

    @property
    def ttft(self) -> float | None:
        """Seconds from sending to the first chunk that carried tokens."""
        return self.chunk_times[0] - self.send_time if self.chunk_times else None


@dataclass
class ChatResult(GenerateResult):
    """A ``/v1/chat/completions`` or ``/v1/completions`` result; ``usage`` as sent."""

    usage: dict[str, Any] = field(default_factory=dict)


MESSAGE_CAP = 500
"""Characters of a server's error message kept (one line)."""


def _one_line(text: str) -> str:
    return " ".join(text.split())[:MESSAGE_CAP]


def _message_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("message", "detail", "msg"):
            if (found := _message_of(value.get(key))) is not None:
                return found
        return None
    if isinstance(value, list):  # FastAPI's validation errors: [{"msg": ...}, ...]
        messages = [m for m in map(_message_of, value) if m]
        return "; ".join(messages) if messages else None
    return None


def error_message(data: object) -> str | None:
    """The server's message when ``data`` (a decoded reply or event) is an error object,
    one line of at most :data:`MESSAGE_CAP` characters; None when it is none.

    Every shape a server sends, with any status and streamed or not: SGLang's
    native ``{"error": {"message": ...}}`` and ``{"error": "..."}``, OpenAI's
    ``{"object": "error", "message": ..., "type": ..., "code": ...}`` (SGLang's
    ``ErrorResponse``), FastAPI's ``{"detail": ...}``. ``detail`` counts only in an
    object that is no result (no ``meta_info``, no ``choices``): a result may carry a
    field of that name, and the load generator's fast path reads such events for their
    ``meta_info`` alone (it decodes whole every event that says ``"error"``).
    """
    if not isinstance(data, dict):
        return None
    if data.get("error") is not None:
        found = _message_of(data["error"])
    elif data.get("object") == "error":
        found = _message_of(data)
    elif data.get("detail") is not None and "meta_info" not in data and "choices" not in data:
        found = _message_of(data["detail"])
    else:
        return None
    if not found or not found.strip():
        found = json.dumps(data, separators=(",", ":"), default=str)
    return _one_line(found)


def _error_text(body: str) -> str:
    """The server's own message out of an error answer's body (any shape, or its text)."""
    text = body.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return _one_line(text) or "(empty body)"
    found = error_message(data)
    if found is None and isinstance(data, dict):
        found = _message_of(data.get("message"))
    return _one_line(found or text) or "(empty body)"


def _refuse_error(data: object, path: str, status: int | None) -> None:
    """A ServerError with the server's message when ``data`` is an error object."""
    if (message := error_message(data)) is not None:
        raise ServerError("POST", path, status, message)


def prometheus_value(text: str, name: str) -> float | None:
    """Sum of the samples of metric ``name`` (any labels) in Prometheus text."""
    total: float | None = None
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest[:1] not in ("{", " "):
            continue  # a longer metric name sharing the prefix
        try:
            value = float(rest.rsplit("}", 1)[-1].split()[0])
        except (IndexError, ValueError):
            continue
        total = value if total is None else total + value
    return total


class SGLangClient:
    """A client for one SGLang server (or the simulator) at ``base_url``.

    Opens its ``requests.Session`` lazily; ``close()`` is idempotent and only
    closes a session the client created itself.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.perf_counter,
        limits: Limits = DEFAULT_LIMITS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.limits = limits
        self._clock = clock
        self._monotonic = monotonic
        self._session = session
        self._owns_session = session is None
        self._last_deadline = limits.deadline(None)

    # -- plumbing -------------------------------------------------------------

    @property
    def session(self) -> requests.Session:
        """The HTTP session, created on first use."""
        if self._session is None:
            self._session = requests.Session()
            self._session.max_redirects = 0  # never followed: see _request
            guarded = wire.GuardedAdapter()
            self._session.mount("http://", guarded)
            self._session.mount("https://", guarded)
            self._owns_session = True
        return self._session

    def clone(self) -> SGLangClient:
        """A new client for the same server with its own session (one per thread)."""
        return SGLangClient(
            self.base_url,
            api_key=self.api_key,
            timeout=self.timeout,
            clock=self._clock,
            limits=self.limits,
            monotonic=self._monotonic,
        )

    def close(self) -> None:
        """Close the session if this client created it. Safe to call twice."""
        if self._session is not None and self._owns_session:
            self._session.close()
        self._session = None

    def __enter__(self) -> SGLangClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SGLangClient({self.base_url!r})"

    def _headers(self) -> dict[str, str]:
        if self.api_key:
            return {"Authorization": f"Bearer {self.api_key}"}
        return {}

    def _timeouts(self, deadline: float) -> tuple[float, float]:
        """(connect, read) for ``requests``: no wait past the stall limit or the deadline."""
        connect, read = self.timeout if isinstance(self.timeout, tuple) else (self.timeout,) * 2
        left = max(0.001, deadline - self._monotonic())
        return min(connect, left), min(read, self.limits.stall, left)

    def _deadline(self, max_new_tokens: int | None) -> float:
        """When a request of ``max_new_tokens`` must have finished (its whole deadline,
        noted for the messages that name it)."""
        self._last_deadline = self.limits.deadline(max_new_tokens)
        return self._monotonic() + self._last_deadline

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        deadline: float,
        stream: bool = False,
    ) -> requests.Response:
        """Send a request; the answer's headers are read, its body is left to the caller.

        Redirects are never followed (another host's figures are not this
        server's): a 3xx is an error naming where it pointed. A whole body may come
        compressed (:func:`~pytest_specdecode.client.wire.decoded` undoes it: SGLang's
        ``/metrics`` is gzipped when the request accepts gzip); a ``stream`` asks for
        none, its events are read as they come.
        """
        url = self.base_url + path
        timeout = self._timeouts(deadline)
        guard = wire.DeadlineGuard(deadline - self._monotonic())
        accept = "identity" if stream else wire.ACCEPTED_ENCODINGS
        try:
            with guard:
                resp = self.session.request(
                    method,
                    url,
                    json=json_body,
                    headers={**self._headers(), "Accept-Encoding": accept},
                    timeout=timeout,
                    stream=True,
                    allow_redirects=False,
                )
        except requests.TooManyRedirects as exc:
            # The session follows none (max_redirects 0): requests says so for any 3xx.
            if exc.response is None:
                raise ConnectError(f"{method} {url} redirected; never followed") from exc
            resp = exc.response
        except requests.RequestException as exc:
            if guard.fired:
                raise self._headers_too_slow(method, url) from None
            if isinstance(exc, requests.Timeout):
                raise ConnectError(
                    f"{method} {url} timed out after {timeout[1]:g} s; "
                    "is the server overloaded or hung?"
                ) from exc
            raise ConnectError(
                f"{method} {url} failed ({type(exc).__name__}); "
                f"is the server running at {self.base_url!r}?"
            ) from exc
        if guard.fired:
            # A socket the guard shut mid-header can read as the end of the headers (a
            # "200" of what came so far): never an answer.
            resp.close()
            raise self._headers_too_slow(method, url)
        if 300 <= resp.status_code < 400:
            location = resp.headers.get("Location") or ""
            resp.close()
            where = wire.scrub_location(location) if location else "nowhere (no Location)"
            raise LimitError(
                f"{method} {url} answered {resp.status_code} redirecting to {where}; "
                "redirects are never followed: point the plugin at the server itself",
                "redirect",
            )
        if resp.status_code >= 400:
            try:
                body = self._read(resp, method, path, deadline, cap=ERROR_BODY, truncate=True)
            except SGLangError:
                body = b""
            finally:
                resp.close()
            raise ServerError(
                method, path, resp.status_code, _error_text(body.decode("utf-8", "replace"))
            )
        coding = resp.headers.get("Content-Encoding") or "identity"
        if stream and coding.strip().lower() != "identity":
            resp.close()
            raise LimitError(
                f"{method} {url} streamed its answer with Content-Encoding {coding[:40]!r} "
                "though the request asked for identity; refused",
                wire.ENCODING,
            )
        return resp

    def _chunks(
        self, resp: requests.Response, method: str, path: str, deadline: float, cap: int
    ) -> Iterator[tuple[float, bytes]]:
        """The body's reads within the request's bounds; a bound passed is a LimitError."""
        chunks = wire.read_chunks(
            resp.raw,
            deadline=deadline,
            stall=self.limits.stall,
            cap=cap,
            monotonic=self._monotonic,
            clock=self._clock,
        )
        try:
            yield from chunks
        except wire.BoundExceeded as exc:
            raise self._limit_error(exc, method, path) from None
        except Exception as exc:
            # requests', urllib3's and http.client's errors: the connection failed.
            lost = isinstance(exc, requests.RequestException)
            if not lost and not type(exc).__module__.startswith(("urllib3", "http")):
                raise
            raise ConnectError(
                f"{method} {self.base_url + path} failed reading the answer ({type(exc).__name__})"
            ) from exc

    def _limit_error(self, exc: wire.BoundExceeded, method: str, path: str) -> LimitError:
        what = str(exc)
        if exc.kind == wire.DEADLINE:
            what = f"{what} ({self._last_deadline:g} s)"
        return LimitError(f"{method} {self.base_url + path} {what}; refused", exc.kind)

    def _read(
        self,
        resp: requests.Response,
        method: str,
        path: str,
        deadline: float,
        *,
        cap: int = MAX_RESPONSE,
        truncate: bool = False,
    ) -> bytes:
        """The whole body under ``cap`` (``truncate``: the first ``cap`` bytes, no error)."""
        body = bytearray()
        try:
            for _, data in self._chunks(resp, method, path, deadline, MAX_RESPONSE):
                body += data
                if len(body) > cap:
                    if truncate:
                        return bytes(body[:cap])
                    raise LimitError(
                        f"{method} {self.base_url + path} sent more than {cap} bytes "
                        "(response cap); refused",
                        wire.RESPONSE,
                    )
        finally:
            resp.close()
        try:
            return wire.decoded(bytes(body), resp.headers.get("Content-Encoding"), cap=cap)
        except wire.BoundExceeded as exc:
            if truncate:  # an error reply's text: what came is better than none
                return bytes(body[:cap])
            raise self._limit_error(exc, method, path) from None

    def _call(self, method: str, path: str, body: Any = None, tokens: int | None = None) -> bytes:
        """One whole request (connect, headers, body) within its deadline: the body."""
        deadline = self._deadline(tokens)
        resp = self._request(method, path, json_body=body, deadline=deadline)
        return self._read(resp, method, path, deadline)

    def _json(self, method: str, path: str, body: Any = None, tokens: int | None = None) -> Any:
        raw = self._call(method, path, body, tokens)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ServerError(method, path, 200, f"not JSON: {raw[:200]!r}") from exc

    # -- info endpoints -------------------------------------------------------

    def _headers_too_slow(self, method: str, url: str) -> LimitError:
        return LimitError(
            f"{method} {url} did not finish within its whole deadline "
            f"({self._last_deadline:g} s) while its headers came; refused",
            wire.DEADLINE,
        )

    def _info(self, path: str, old_path: str) -> Any:
        """``GET path``, or ``old_path`` (its old name) where the server does not know it."""
        try:
            return self._json("GET", path)
        except ServerError as exc:
            if exc.status != 404:
                raise
        return self._json("GET", old_path)

    def server_info(self) -> dict[str, Any]:
        """Resolved server args and state (``/server_info``, else ``/get_server_info``)."""
        data = self._info("/server_info", "/get_server_info")
        if not isinstance(data, dict):
            raise ServerError("GET", "/server_info", 200, f"expected an object, got {data!r:.200}")
        return data

    def model_info(self) -> dict[str, Any]:
        """``/model_info`` (old name ``/get_model_info``)."""
        data = self._info("/model_info", "/get_model_info")
        return dict(data) if isinstance(data, dict) else {"value": data}

    def flush_cache(self) -> None:
        """Clear the server's prefix cache so earlier requests cannot flatter a run."""
        try:
            self._call("POST", "/flush_cache")
        except ServerError as exc:
            if exc.status != 405:
                raise
            self._call("GET", "/flush_cache")

    def metrics_text(self) -> str:
        """The Prometheus text of ``/metrics`` (needs ``--enable-metrics``)."""
        return self._call("GET", "/metrics").decode("utf-8", "replace")

    def metric_value(self, name: str) -> float | None:
        """Sum of Prometheus sample ``name`` over its label sets; ``None`` if absent."""
        return prometheus_value(self.metrics_text(), name)

    def count_tokens(self, text: str) -> int:
        """The server's token count for ``text`` as a ``/generate`` prompt.

        Uses a zero-token ``/generate`` (``meta_info.prompt_tokens``), falling
        back to one generated token where the server refuses zero.
        """
        try:
            return self.generate(text, max_new_tokens=0).prompt_tokens
        except ServerError as exc:
            if exc.status != 400:
                raise
        return self.generate(text, max_new_tokens=1).prompt_tokens

    # -- generation -----------------------------------------------------------

    def _generate_body(
        self,
        text: str | None,
        input_ids: Sequence[int] | None,
        max_new_tokens: int,
        temperature: float,
        ignore_eos: bool,
        stream: bool,
        sampling_params: Mapping[str, Any] | None,
        top_logprobs: int = 0,
    ) -> dict[str, Any]:
        if (text is None) == (input_ids is None):
            raise ValueError("generate() needs exactly one of text= or input_ids=")
        params: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "ignore_eos": ignore_eos,
        }
        params.update(sampling_params or {})
        body: dict[str, Any] = {"sampling_params": params, "stream": stream}
        if top_logprobs > 0:  # SGLang's fields; -1: the output's positions only
            body.update(return_logprob=True, top_logprobs_num=top_logprobs, logprob_start_len=-1)
        if text is not None:
            body["text"] = text
        else:
            body["input_ids"] = list(input_ids or ())
        return body

    def generate(
        self,
        text: str | None = None,
        *,
        input_ids: Sequence[int] | None = None,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        ignore_eos: bool = False,
        stream: bool = False,
        sampling_params: Mapping[str, Any] | None = None,
        top_logprobs: int = 0,
    ) -> GenerateResult:
        """Native ``/generate``; with ``stream=True`` the result has per-chunk timings;
        ``top_logprobs=K`` (not streamed) asks for each output token's top K logprobs."""
        if top_logprobs and (stream or not 0 < top_logprobs <= MAX_TOP_LOGPROBS):
            raise ValueError(f"top_logprobs must be 1..{MAX_TOP_LOGPROBS}, not streamed")
        body = self._generate_body(
            text,
            input_ids,
            max_new_tokens,
            temperature,
            ignore_eos,
            stream,
            sampling_params,
            top_logprobs,
        )
        if stream:
            with closing(self._stream("/generate", body, max_new_tokens)) as events:
                return _assemble_generate_stream(events)
        send = self._clock()
        data = self._json("POST", "/generate", body, max_new_tokens)
        end = self._clock()
        if isinstance(data, list):  # a batch answer to a single prompt: take the first
            data = data[0]
        result = _one_chunk(_generate_result(data, send), end)
        if top_logprobs:
            result.top_logprobs = parse_top_logprobs(
                result.meta_info.get("output_top_logprobs"), result.completion_tokens, top_logprobs
            )
        return result

    def stream_generate(
        self,
        text: str | None = None,
        *,
        input_ids: Sequence[int] | None = None,
        max_new_tokens: int = 128,
        temperature: float = 0.0,
        ignore_eos: bool = False,
        sampling_params: Mapping[str, Any] | None = None,
    ) -> Iterator[StreamChunk]:
        """Stream ``/generate`` event by event, each with its arrival time.

        Closing the iterator early closes the connection.
        """
        body = self._generate_body(
            text, input_ids, max_new_tokens, temperature, ignore_eos, True, sampling_params
        )
        with closing(self._stream("/generate", body, max_new_tokens)) as events:
            send, _ = next(events)
            seen = 0
            for arrival, event in events:
                meta = event.get("meta_info") or {}
                count = int(meta.get("completion_tokens", seen))
                yield StreamChunk(send, arrival, count - seen, count, event)
                seen = max(seen, count)

    def _stream(
        self, path: str, body: Mapping[str, Any], tokens: int | None
    ) -> Generator[tuple[float, dict[str, Any]], None, None]:
        """Yield ``(arrival time, event)``; the first item is ``(send time, {})``.

        The whole stream (connect to the last byte) is within the request's
        deadline; one line within ``MAX_SSE_LINE``, all of them within ``MAX_RESPONSE``.
        """
        send = self._clock()
        deadline = self._deadline(tokens)
        resp = self._request("POST", path, json_body=body, deadline=deadline, stream=True)
        try:
            yield send, {}
            chunks = self._chunks(resp, "POST", path, deadline, MAX_RESPONSE)
            for arrival, payload in wire.sse_data(chunks, line_cap=MAX_SSE_LINE):
                if payload == b"[DONE]":
                    break
                try:
                    event = json.loads(payload)
                except ValueError as exc:
                    raise ServerError(
                        "POST", path, None, f"undecodable event {payload[:200]!r}"
                    ) from exc
                _refuse_error(event, path, None)
                if not isinstance(event, dict):
                    raise ServerError("POST", path, None, f"event is not an object: {event!r:.200}")
                yield arrival, event
        except wire.BoundExceeded as exc:  # a line past its cap (_chunks converts the rest)
            raise self._limit_error(exc, "POST", path) from None
        finally:
            resp.close()

    # -- OpenAI endpoints -----------------------------------------------------

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int = 128,
        temperature: float = 0.0,
        stream: bool = False,
        model: str = "default",
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """``/v1/chat/completions``; token counts from ``usage``."""
        body: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        body.update(extra or {})
        return self._openai("/v1/chat/completions", body, stream, chat=True)

    def completions(
        self,
        prompt: str,
        *,
        max_tokens: int = 128,
        temperature: float = 0.0,
        stream: bool = False,
        model: str = "default",
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """``/v1/completions``; token counts from ``usage``."""
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        body.update(extra or {})
        return self._openai("/v1/completions", body, stream, chat=False)

    def _openai(self, path: str, body: dict[str, Any], stream: bool, *, chat: bool) -> ChatResult:
        tokens = _int_or_none(body.get("max_tokens"))
        if not stream:
            send = self._clock()
            data = self._json("POST", path, body, tokens)
            end = self._clock()
            return _one_chunk(_openai_result(data, send, end, chat=chat, path=path), end)
        body["stream"] = True
        body.setdefault("stream_options", {"include_usage": True})
        with closing(self._stream(path, body, tokens)) as events:
            return _assemble_openai_stream(events, chat=chat, path=path)


# -- result assembly ----------------------------------------------------------


R = TypeVar("R", bound=GenerateResult)


def _one_chunk(result: R, end: float) -> R:
    """A whole (not streamed) answer: one chunk, the response, arriving at ``end``."""
    result.end_time = end
    if result.completion_tokens > 0:
        result.chunk_times = [end]
        result.chunk_tokens = [result.completion_tokens]
    return result


def is_int(value: object) -> TypeGuard[int]:
    """Whether a decoded JSON value is an integer (JSON's ``true`` is a bool, not one)."""
    return type(value) is int


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    return value if is_int(value) else None


def _count(meta: dict[str, Any], key: str) -> int:
    """``meta_info[key]`` as a count (0 when absent); a ServerError when it is none."""
    value = meta.get(key, 0)
    if not is_int(value):
        raise ServerError("POST", "/generate", 200, f"{key} is not an integer: {value!r:.50}")
    return value


def int_ids(ids: list[Any]) -> list[int]:
    """``ids`` when every one is an integer; a ServerError otherwise."""
    if not all(map(is_int, ids)):
        raise ServerError(
            "POST", "/generate", 200, f"output_ids are not all integers: {ids!r:.200}"
        )
    return ids


MAX_TOP_LOGPROBS = 20


def parse_top_logprobs(
    rows: object, completion_tokens: int, top: int
) -> list[list[tuple[float, int]]] | None:
    """SGLang's ``meta_info.output_top_logprobs`` (per output token a list of
    ``[logprob, token_id, text|null]``) as (logprob, id) pairs, best first; None when
    absent. A ServerError when its shape is not one a server could have sent: a row per
    completion token, 1..``top`` entries each, finite logprobs <= 0, integer ids >= 0."""
    if rows is None:
        return None

    def bad(what: str) -> ServerError:
        return ServerError("POST", "/generate", 200, f"output_top_logprobs {what}")

    if not isinstance(rows, list) or len(rows) != completion_tokens:
        shown = len(rows) if isinstance(rows, list) else type(rows).__name__
        raise bad(f"must be a list of {completion_tokens} rows (one per token), got {shown}")
    out: list[list[tuple[float, int]]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or not 0 < len(row) <= top:
            raise bad(f"row {i} must list 1..{top} entries, got {row!r:.100}")
        pairs = []
        for entry in row:
            if not (isinstance(entry, list) and 2 <= len(entry) <= 3):
                raise bad(f"row {i}: entry {entry!r:.100} is not [logprob, token_id, text]")
            logprob, token = entry[0], entry[1]
            if (
                not isinstance(logprob, (int, float))
                or isinstance(logprob, bool)
                or not math.isfinite(logprob)
                or logprob > 1e-6
                or not is_int(token)
                or token < 0
            ):
                raise bad(f"row {i}: entry {entry!r:.100} needs a logprob <= 0 and an id >= 0")
            pairs.append((float(logprob), token))
        out.append(sorted(pairs, key=lambda p: -p[0]))
    return out


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, dict):
        return str(value.get("type")) if value.get("type") is not None else None
    return None if value is None else str(value)


def _generate_result(data: Any, send: float) -> GenerateResult:
    _refuse_error(data, "/generate", 200)
    if not isinstance(data, dict):
        raise ServerError("POST", "/generate", 200, f"expected an object, got {data!r:.200}")
    meta = data.get("meta_info")
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        raise ServerError("POST", "/generate", 200, f"meta_info is not an object: {meta!r:.200}")
    ids = data.get("output_ids")
    return GenerateResult(
        text=str(data.get("text", "")),
        completion_tokens=_count(meta, "completion_tokens"),
        prompt_tokens=_count(meta, "prompt_tokens"),
        finish_reason=_finish_reason(meta.get("finish_reason")),
        send_time=send,
        end_time=send,
        output_ids=int_ids(ids) if isinstance(ids, list) else None,
        spec_verify_ct=_int_or_none(meta.get("spec_verify_ct")),
        spec_accept_length=_float_or_none(meta.get("spec_accept_length")),
        server_e2e_latency=_float_or_none(meta.get("e2e_latency")),
        meta_info=dict(meta),
    )


def _assemble_generate_stream(events: Iterator[tuple[float, dict[str, Any]]]) -> GenerateResult:
    send, _ = next(events)
    text = ""
    ids: list[int] | None = None
    last: dict[str, Any] = {}
    times: list[float] = []
    tokens: list[int] = []
    seen = 0
    end = send
    for arrival, event in events:
        end = arrival
        last = event
        meta = event.get("meta_info") or {}
        count = int(meta.get("completion_tokens", seen))
        # SGLang streams cumulative text by default and deltas with
        # --incremental-streaming-output; the cumulative form repeats what we have.
        chunk_text = str(event.get("text", ""))
        text = chunk_text if chunk_text.startswith(text) else text + chunk_text
        chunk_ids = event.get("output_ids")
        if isinstance(chunk_ids, list):
            new_ids = [int(i) for i in chunk_ids]
            ids = new_ids if len(new_ids) == count or ids is None else ids + new_ids
        if count > seen:
            times.append(arrival)
            tokens.append(count - seen)
            seen = count
    if not last:
        raise ServerError("POST", "/generate", 200, "stream ended without any event")
    result = _generate_result(last, send)
    result.text = text
    result.output_ids = ids
    result.end_time = end
    result.chunk_times = times
    result.chunk_tokens = tokens
    return result


def _openai_result(data: Any, send: float, end: float, *, chat: bool, path: str) -> ChatResult:
    _refuse_error(data, path, 200)
    if not isinstance(data, dict) or not data.get("choices"):
        raise ServerError("POST", path, 200, f"no choices in {data!r:.200}")
    choice = data["choices"][0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    usage = data.get("usage") or {}
    details = _spec_details(data)
    return ChatResult(
        text=str(text or ""),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        finish_reason=_finish_reason(choice.get("finish_reason")),
        send_time=send,
        end_time=end,
        spec_verify_ct=_int_or_none(details.get("spec_verify_ct")),
        spec_accept_length=_float_or_none(details.get("spec_accept_length")),
        usage=dict(usage),
    )


def _spec_details(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``sglext.spec_tokens_details`` (sent with ``return_spec_tokens_details``), or {}."""
    ext = data.get("sglext")
    details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
    return details if isinstance(details, dict) else {}


def _float_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _assemble_openai_stream(
    events: Iterator[tuple[float, dict[str, Any]]], *, chat: bool, path: str
) -> ChatResult:
    send, _ = next(events)
    parts: list[str] = []
    arrivals: list[float] = []
    usage: dict[str, Any] = {}
    finish: str | None = None
    end = send
    for arrival, event in events:
        end = arrival
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
            if piece:
                parts.append(str(piece))
                arrivals.append(arrival)
            if choice.get("finish_reason") is not None:
                finish = _finish_reason(choice["finish_reason"])
    if "completion_tokens" not in usage:
        raise ServerError(
            "POST", path, 200, "stream carried no usage; cannot count tokens without it"
        )
    completion = int(usage["completion_tokens"])
    # OpenAI chunks carry no per-chunk counts; spread the server's total over
    # the chunks so sums stay exact (the per-chunk split is an estimate).
    counts = [completion // len(arrivals)] * len(arrivals) if arrivals else []
    for i in range(completion - sum(counts)):
        counts[i % len(counts)] += 1
    return ChatResult(
        text="".join(parts),
        completion_tokens=completion,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        finish_reason=finish,
        send_time=send,
        end_time=end,
        chunk_times=arrivals,
        chunk_tokens=counts,
        usage=dict(usage),
    )
