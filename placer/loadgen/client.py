"""One streamed completion against an OpenAI-compatible endpoint, timed.

in:  an ``httpx.AsyncClient`` (redirects never followed), the completions URL, a request body and
     the :class:`~placer.loadgen.prompts.BenchRequest` it carries
out: :class:`Outcome`: TTFT (arrival → first chunk with content: the request's arrival time, so a
     request the client held back waited as its user would), TPOT ((last content chunk − first) /
     (tokens − 1)), end-to-end, tokens (the server's ``usage`` when it sends one, else the content
     chunks: ``token_ids`` where given, else one per chunk), the prefix hit the server reports
     (``usage.prompt_tokens_details.cached_tokens`` as vLLM and SGLang send it, or the executor's
     ``placer.prefix_hit_tokens``) and the error, if any

What counts as an error (never dropped): an HTTP status other than 200 (a redirect too: it is not
followed), an SSE ``error`` event, a stream that ends before ``[DONE]`` or a ``finish_reason``, a
timeout or a broken connection. The SSE parsing asks for nothing beyond the OpenAI stream format
(``data: {json}`` lines, ``data: [DONE]``): the executor's extra fields are read where present.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from placer.loadgen.prompts import BenchRequest
from placer.readers import MAX_LINE_BYTES

MAX_ERROR_CHARS = 300


@dataclass
class Outcome:
    """What one request measured (times in seconds; None where it never got that far)."""

    request: BenchRequest
    sent_unix_s: float  # when it left (wall clock)
    send_lag_s: float = 0.0  # how long after its arrival time it left (the cap, a busy client)
    ended_unix_s: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None  # the server's count (usage.prompt_tokens)
    cached_tokens: int | None = None  # the server's prefix-cache hit, when it says
    finish_reason: str | None = None
    error: str | None = None
    pipeline: str | None = None  # the executor's, when it says
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


#: The fields beyond OpenAI's that pin a request's output length (vLLM's and SGLang's, and ours). A
#: server that refuses them (``transformers serve`` answers 422 "Unexpected fields") is sent without
#: them: its requests may then end early at an end-of-sequence token, and the bench says so.
EXACT_LENGTH_FIELDS = ("min_tokens", "ignore_eos")


def body_for(req: BenchRequest, prompt: str, model: str | None, exact_lengths: bool = True) -> dict[str, Any]:
    """The completion body: streamed, usage asked for, and (``exact_lengths``) the exact output length
    (``ignore_eos`` and ``min_tokens``)."""
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": req.output_tokens, "temperature": 0.0, "stream": True,
                            "stream_options": {"include_usage": True}}
    if exact_lengths:
        body.update(min_tokens=req.output_tokens, ignore_eos=True)
    if model:
        body["model"] = model
    return body


def _content(choice: dict) -> tuple[bool, int]:
    """(whether this chunk carries content, the tokens it carries by its own count)."""
    ids = choice.get("token_ids")
    if isinstance(ids, list) and ids:
        return True, len(ids)
    text = choice.get("text")
    if text is None and isinstance(choice.get("delta"), dict):  # a chat stream
        text = choice["delta"].get("content")
    return bool(text), 1 if text else 0


class _Stream:
    """The state of one SSE stream as its events arrive."""

    def __init__(self, t0: float) -> None:
        self.t0, self.first, self.last, self.tokens = t0, None, None, 0
        self.usage: dict | None = None
        self.finish, self.done, self.error, self.placer = None, False, None, None

    def event(self, data: str, now: float) -> None:
        if data == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except json.JSONDecodeError:
            self.error = f"malformed SSE data: {data[:80]!r}"
            return
        if not isinstance(obj, dict):
            return
        if obj.get("error"):
            err = obj["error"]
            self.error = "server error event: " + str(err.get("message", err) if isinstance(err, dict) else err)
            return
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]
        if isinstance(obj.get("placer"), dict):
            self.placer = obj["placer"]
        for choice in obj.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            has, n = _content(choice)
            if has:
                self.first = now if self.first is None else self.first
                self.last = now
                self.tokens += n
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]


async def send(client: httpx.AsyncClient, url: str, req: BenchRequest, body: dict[str, Any],
               headers: dict[str, str], arrival_perf: float | None = None) -> Outcome:
    """POST ``body`` streamed to ``url``; the timed :class:`Outcome` (errors inside it, never raised).
    TTFT and end-to-end count from ``arrival_perf`` (the request's arrival time on ``time.perf_counter``)
    when given: a request the client held back (the cap, a late loop) waited as its user would."""
    out = Outcome(req, sent_unix_s=time.time())
    sent = time.perf_counter()
    out.send_lag_s = max(0.0, sent - arrival_perf) if arrival_perf is not None else 0.0
    t0 = sent - out.send_lag_s
    state = _Stream(t0)
    try:
        async with client.stream("POST", url, json=body, headers=headers) as r:
            if r.status_code != 200:
                out.error = await _status_error(r)
            else:
                async for line in r.aiter_lines():
                    if len(line) > MAX_LINE_BYTES:  # the readers' bound on a streamed line
                        out.error = f"an SSE line of {len(line):,} characters (over {MAX_LINE_BYTES:,})"
                        break
                    if line.startswith("data:"):
                        state.event(line[5:].strip(), time.perf_counter())
                        if state.error or state.done:
                            break
    except httpx.TimeoutException as e:
        out.error = f"timeout: {type(e).__name__}"
    except httpx.HTTPError as e:
        detail = str(e)[:MAX_ERROR_CHARS] or "the server closed the connection"
        out.error = f"connection: {type(e).__name__}: {detail}"
    end = time.perf_counter()
    out.ended_unix_s = out.sent_unix_s + (end - sent)
    _fill(out, state, t0, end)
    return out


async def _status_error(r: httpx.Response) -> str:
    if r.is_redirect:
        return f"HTTP {r.status_code}: redirect to {r.headers.get('location', '?')!r} not followed"
    try:
        text = (await r.aread()).decode("utf-8", errors="replace")
    except httpx.HTTPError:
        text = ""
    return f"HTTP {r.status_code}: {' '.join(text.split())[:MAX_ERROR_CHARS]}"


def _fill(out: Outcome, s: _Stream, t0: float, end: float) -> None:
    usage = s.usage or {}
    out.output_tokens = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) \
        else s.tokens
    if isinstance(usage.get("prompt_tokens"), int):
        out.prompt_tokens = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        out.cached_tokens = details["cached_tokens"]
    if s.placer:
        if isinstance(s.placer.get("prefix_hit_tokens"), int):
            out.cached_tokens = s.placer["prefix_hit_tokens"]
        if isinstance(s.placer.get("pipeline"), str):
            out.pipeline = s.placer["pipeline"]
    out.finish_reason = s.finish
    if out.error is None and s.error:
        out.error = s.error
    if out.error is None and not (s.done or s.finish):
        out.error = "dropped stream: it ended before [DONE] or a finish_reason"
    if s.first is not None:
        out.ttft_s = s.first - t0
        if out.output_tokens > 1 and s.last is not None:
            out.tpot_s = (s.last - s.first) / (out.output_tokens - 1)
    if out.error is None:
        if s.first is None:
            out.error = "no content in the stream"
        out.e2e_s = end - t0
