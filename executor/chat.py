"""OpenAI's chat completions on the executor: `POST /v1/chat/completions`, streamed or whole.

In: a `ChatCompletionRequest` (`messages` of `{role, content}`, `max_tokens` or `max_completion_tokens`,
`temperature`, `seed`, `n`, `stream`, `stream_options.include_usage`, `ignore_eos`). Out: a
`chat.completion` (`choices[i].message = {role: "assistant", content}`, `finish_reason`, `usage`, our
`placer` block), or with `stream: true` server-sent `chat.completion.chunk`s — per choice a first
chunk with `delta.role`, one chunk per token with `delta.content` (and our `token_ids`), a last one
with an empty `delta`, its `finish_reason` and `placer` block — then, when `include_usage`, a chunk
with no choices and the `usage`, then `data: [DONE]`.

The prompt: the checkpoint's chat template (`HFTokenizer.encode_chat`: the template from
tokenizer_config.json or chat_template.jinja, rendered by jinja2 in a sandbox, `add_generation_prompt`
on). The byte tokenizer of the tiny model has no template of its own and gets `DEFAULT_CHAT_TEMPLATE`
(documented below; BOS first). A checkpoint without a template → 400 (no guessed format for a real
model). `developer` messages are rendered as `system` (OpenAI's newer name for it). A template
that refuses the conversation (its `raise_exception`, e.g. roles that do not alternate) → 422
naming `messages`. Routing, `n`, refusals and cancellation as `/v1/completions` (`executor.choices`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse

from executor.bodies import ChatCompletionRequest, ChatMessage
from executor.choices import (SERVING_ANSWERS, TextStream, cancel_all, collect, merged_events, placer_block,
                              submit_choices, usage)
from executor.router import Router
from executor.served import ServedDep
from executor.stream import RequestStream

#: The byte model's chat format (it has no checkpoint, so no template): each message as
#: `<|role|>` + newline + content + newline, then `<|assistant|>` + newline for the reply; BOS first.
DEFAULT_CHAT_TEMPLATE = "<|{role}|>\n{content}\n"
GENERATION_PROMPT = "<|assistant|>\n"

chat_api = APIRouter()


def _as_dicts(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    return [{"role": "system" if m.role == "developer" else m.role, "content": m.content} for m in messages]


def render_default(messages: Sequence[dict[str, str]]) -> str:
    """`DEFAULT_CHAT_TEMPLATE` over `messages`, then the generation prompt."""
    return "".join(DEFAULT_CHAT_TEMPLATE.format(**m) for m in messages) + GENERATION_PROMPT


def chat_prompt(tokenizer: Any, messages: Sequence[ChatMessage], model_name: str) -> list[int]:
    """The prompt's token ids: the checkpoint's chat template, or the default one for a tokenizer that
    has no template attribute at all (the byte tokenizer); 400 for a checkpoint without one, 422 for a
    conversation its template refuses."""
    as_dicts = _as_dicts(messages)
    if not hasattr(tokenizer, "chat_template"):
        return tokenizer.encode(render_default(as_dicts))
    if tokenizer.chat_template is None:
        raise HTTPException(400, f"messages: model {model_name!r} has no chat template (tokenizer_config.json "
                                 "chat_template or chat_template.jinja); send a prompt to /v1/completions")
    try:
        return tokenizer.encode_chat(as_dicts)
    except ValueError as exc:  # TokenizerError: the template's raise_exception, or a template error
        raise HTTPException(422, f"messages: {exc}") from None


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def _chunk(model: str, cid: str, created: int, index: int, delta: dict[str, str], finish: str | None,
           **extra: Any) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}]}


async def _chunks(router: Router, streams: list[RequestStream], model: str, cid: str, created: int,
                  prompt_tokens: int, tokenizer: Any, include_usage: bool):
    """The SSE chunks of a streamed chat completion (module docstring); the client going away cancels
    every choice."""
    texts = [TextStream(tokenizer) for _ in streams]
    counts = [0] * len(streams)
    try:
        for i in range(len(streams)):
            yield _sse(_chunk(model, cid, created, i, {"role": "assistant", "content": ""}, None))
        async for i, ev in merged_events(streams):
            if ev.kind == "token":
                counts[i] += 1
                yield _sse(_chunk(model, cid, created, i, {"content": texts[i].push(ev.token)}, None,
                                  token_ids=[ev.token]))
            elif ev.kind == "end":
                rest = texts[i].flush()
                if rest:
                    yield _sse(_chunk(model, cid, created, i, {"content": rest}, None))
                yield _sse({**_chunk(model, cid, created, i, {}, ev.finish_reason),
                            "placer": placer_block(ev.record, streams[i].pipeline.value)})
            else:
                yield _sse({"id": cid, "error": {"message": ev.error, "type": "server_error", "index": i}})
        if include_usage:
            yield _sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [], "usage": usage(prompt_tokens, sum(counts))})
        yield "data: [DONE]\n\n"
    finally:
        cancel_all(router, streams)


@chat_api.post("/v1/chat/completions", responses={
    **SERVING_ANSWERS,
    400: {"description": "No 'model' named while several are served, or the model has no chat template."},
    422: {"description": "A bad field (named: a message's role or content, n, logprobs, ...), a conversation "
                         "the chat template refuses, or prompt + max_tokens beyond the model's context."}})
async def chat_completions(body: ChatCompletionRequest, served: ServedDep, request: Request):
    """OpenAI's chat completion: the messages through the model's chat template, then as a completion."""
    model_name, model = served.pick(body.model)
    tokenizer, router = model.tokenizer, model.router
    tokens = chat_prompt(tokenizer, body.messages, model_name)
    streams = submit_choices(router, tokens, n=body.n, temperature=body.temperature, seed=body.seed,
                             max_tokens=body.budget, ignore_eos=body.ignore_eos)
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:16]}", int(time.time())
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return StreamingResponse(_chunks(router, streams, model_name, cid, created, len(tokens), tokenizer,
                                         include_usage),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    ids = await collect(request, router, streams)
    choices = [{"index": i, "message": {"role": "assistant", "content": tokenizer.decode(out)}, "logprobs": None,
                "finish_reason": s.finish_reason, "placer": placer_block(s.record, s.pipeline.value)}
               for i, (s, out) in enumerate(zip(streams, ids, strict=True))]
    return {"id": cid, "object": "chat.completion", "created": created, "model": model_name, "choices": choices,
            "usage": usage(len(tokens), sum(map(len, ids))),
            "placer": placer_block(streams[0].record, streams[0].pipeline.value)}
