"""A request's choices: `n` requests through the router, their events merged, their tokens collected.

In: a router, the prompt's token ids, the body's sampling fields, `n`; the client's connection.
Out: the choices' `RequestStream`s (`submit_choices`: all or none — a refusal of the k-th cancels
the ones before it and becomes its HTTP status: 429 with Retry-After, 503, 413, 422), their events
merged in arrival order (`merged_events`: `(choice index, StreamEvent)`), each choice's tokens
(`collect`: a client that goes away cancels every choice), `TextStream` (ids arriving one at a time
→ the new text each adds) and `usage` (OpenAI's: the prompt counted once, the completions summed).

Choice i samples with seed `seed + i` (mod 2^64), so sampled choices differ and a greedy request's
choices are identical, as in OpenAI's API. Shared by `/v1/completions` (`executor.server`) and
`/v1/chat/completions` (`executor.chat`); no routing here, the router routes each choice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import HTTPException, Request

from executor.admission import Overloaded, TooLarge
from executor.bodies import MAX_SEED, effective_temperature
from executor.router import Router
from executor.routing import NoRouteError
from executor.stream import RequestStream, StreamEvent

DISCONNECT_POLL_S = 0.5  # non-streamed requests: how often the client's connection is checked


def sampling(temperature: float, seed: int, max_tokens: int, ignore_eos: bool, choice: int = 0) -> dict[str, Any]:
    """The router's sampling fields of choice `choice` (its seed: `seed + choice`, mod 2^64)."""
    return {"temperature": effective_temperature(temperature), "seed": (seed + choice) % (MAX_SEED + 1),
            "max_new_tokens": max_tokens, "stop_at_eos": not ignore_eos}


def _submit(router: Router, tokens: list[int], fields: dict[str, Any]) -> RequestStream:
    """Route one request; a refusal becomes its HTTP status (429 with Retry-After, 503, 413, 422)."""
    try:
        return router.submit(tokens, fields, loop=asyncio.get_running_loop())
    except Overloaded as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(max(1, round(exc.retry_after_s)))}) \
            from None
    except NoRouteError as exc:
        raise HTTPException(503, str(exc)) from None
    except TooLarge as exc:
        raise HTTPException(413, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None


def submit_choices(router: Router, tokens: list[int], *, n: int, temperature: float, seed: int, max_tokens: int,
                   ignore_eos: bool) -> list[RequestStream]:
    """`n` requests for one prompt, all or none: a refusal cancels the choices already routed."""
    streams: list[RequestStream] = []
    try:
        for i in range(n):
            streams.append(_submit(router, tokens, sampling(temperature, seed, max_tokens, ignore_eos, i)))
    except HTTPException:
        for s in streams:
            router.cancel(s.request_id, "another choice of the request was refused")
        raise
    return streams


async def merged_events(streams: list[RequestStream]) -> AsyncIterator[tuple[int, StreamEvent]]:
    """Every choice's events as they arrive, each tagged with its choice's index; ends after the last
    choice's `end` or `error`."""
    if len(streams) == 1:  # the common case: no tasks, no queue
        async for ev in streams[0].aevents():
            yield 0, ev
        return
    merged: asyncio.Queue[tuple[int, StreamEvent]] = asyncio.Queue()

    async def pump(i: int, stream: RequestStream) -> None:
        async for ev in stream.aevents():
            await merged.put((i, ev))

    tasks = [asyncio.create_task(pump(i, s)) for i, s in enumerate(streams)]
    left = len(streams)
    try:
        while left:
            i, ev = await merged.get()
            if ev.kind != "token":
                left -= 1
            yield i, ev
    finally:
        for t in tasks:
            t.cancel()


def cancel_all(router: Router, streams: list[RequestStream]) -> None:
    """The client went away (or the response ended): every choice still running is cancelled."""
    for s in streams:
        router.cancel(s.request_id)  # a no-op once the request has ended


async def collect(request: Request, router: Router, streams: list[RequestStream]) -> list[list[int]]:
    """Each choice's tokens (a choice that fails → 502); every choice is cancelled if the client goes away."""
    ids: list[list[int]] = [[] for _ in streams]

    async def read() -> None:
        async for i, ev in merged_events(streams):
            if ev.kind == "token":
                ids[i].append(ev.token)
            elif ev.kind == "error":
                raise HTTPException(502, f"request failed: {ev.error}")

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(DISCONNECT_POLL_S)

    reader, watcher = asyncio.create_task(read()), asyncio.create_task(watch())
    try:
        await asyncio.wait((reader, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        gone = not reader.done()  # the client went away (or this handler was cancelled)
        if gone:
            reader.cancel()
        if gone or reader.exception() is not None:
            cancel_all(router, streams)
    if gone:
        raise HTTPException(400, "the client disconnected; the request was cancelled")
    reader.result()
    return ids


class TextStream:
    """Token ids arriving one at a time → the new text each adds (any tokenizer: the text of all ids
    so far minus what was sent; held back while it ends in a cut-off character, U+FFFD)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.ids, self.sent = tokenizer, [], ""

    def push(self, token: int) -> str:
        self.ids.append(token)
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd") or not text.startswith(self.sent):
            return ""
        new, self.sent = text[len(self.sent):], text
        return new

    def flush(self) -> str:
        text = self.tokenizer.decode(self.ids)
        new = text[len(self.sent):] if text.startswith(self.sent) else ""
        self.sent = text
        return new


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's usage block (the prompt counted once however many choices)."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def placer_block(record: Any, pipeline: str) -> dict[str, Any]:
    """Our extension of a response: the pipeline, the prefix hit, TTFT and TPOT, the instances."""
    if record is None:
        return {"pipeline": pipeline}
    return {"pipeline": record.pipeline, "prefix_hit_tokens": record.prefix_hit_tokens, "ttft_s": record.ttft_s,
            "tpot_s": record.tpot_s, "instances": record.extra.get("instances")}


#: The answers both generation routes (completions and chat) share, for their OpenAPI entries.
SERVING_ANSWERS: dict[int | str, dict[str, Any]] = {
    404: {"description": "The named model is not served here (the served ones are named)."},
    413: {"description": "Prompt + max_tokens need more KV than one instance holds, or the body is too large."},
    429: {"description": "Every instance that could serve it is full; retry after Retry-After."},
    503: {"description": "No instance that could serve it is up."}}
