"""A second OpenAI-compatible server, not ours: streams completions as vLLM does, with a prefix cache.

Chunks carry ``choices[0].text`` only (no ``token_ids``, no ``placer`` block); with
``stream_options.include_usage`` a last chunk with empty ``choices`` carries ``usage`` and
``prompt_tokens_details.cached_tokens``, as vLLM's does. One character is one token; the cache
holds every prompt's whole blocks of ``BLOCK`` characters. ``fail_every`` answers every n-th
request with HTTP 500, ``drop_every`` cuts every n-th stream after two chunks, ``redirect`` answers
every completion with a 307 to another host.
"""

from __future__ import annotations

import asyncio
import json

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse

BLOCK = 16


def foreign_app(step_s: float = 0.002, fail_every: int = 0, drop_every: int = 0, redirect: bool = False) -> FastAPI:
    app = FastAPI()
    cache: set[str] = set()
    seen = {"n": 0, "bodies": [], "in_flight": 0, "most_in_flight": 0}
    app.state.seen = seen

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": "other-llm", "object": "model"}]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        seen["n"] += 1
        seen["bodies"].append({k: v for k, v in body.items() if k != "prompt"})
        n = seen["n"]
        if redirect:
            return RedirectResponse("http://example.invalid/v1/completions", status_code=307)
        if fail_every and n % fail_every == 0:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=500)
        prompt, out = body["prompt"], body["max_tokens"]
        hit = 0
        while hit + BLOCK <= len(prompt) and prompt[:hit + BLOCK] in cache:
            hit += BLOCK
        for end in range(BLOCK, len(prompt) + 1, BLOCK):
            cache.add(prompt[:end])

        async def events():
            seen["in_flight"] += 1
            seen["most_in_flight"] = max(seen["most_in_flight"], seen["in_flight"])
            try:
                async for event in stream():
                    yield event
            finally:
                seen["in_flight"] -= 1

        async def stream():
            for i in range(out):
                await asyncio.sleep(step_s)
                if drop_every and n % drop_every == 0 and i == 2:
                    return  # the connection ends without finish_reason or [DONE]
                chunk = {"id": f"cmpl-{n}", "object": "text_completion", "model": "other-llm",
                         "choices": [{"index": 0, "text": "ab"[i % 2], "logprobs": None,
                                      "finish_reason": "length" if i == out - 1 else None, "stop_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": len(prompt), "completion_tokens": out, "total_tokens": len(prompt) + out,
                         "prompt_tokens_details": {"cached_tokens": hit}}
                yield f"data: {json.dumps({'id': f'cmpl-{n}', 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def scenario_dict(rate: float = 40.0, hit: float = 0.75, input_tokens: int = 256, output_tokens: int = 8) -> dict:
    """A small two-class scenario whose numbers a CPU endpoint can serve."""
    return {
        "name": "bench-small", "model": "llama-3.1-8b", "kv_dtype": "bf16",
        "datacenters": [{"name": "dc-a", "inventory": {"H100-SXM": 4}}, {"name": "dc-b", "inventory": {"L40S": 4}}],
        "links": [{"src": "dc-a", "dst": "dc-b", "gbit_per_s": 10, "rtt_ms": 20}],
        "workload": {"arrival_rps": rate, "classes": [
            {"name": "warm", "share": 0.75, "input_tokens": input_tokens, "output_tokens": output_tokens,
             "hit_rate": hit},
            {"name": "cold", "share": 0.25, "input_tokens": input_tokens, "output_tokens": output_tokens,
             "hit_rate": 0.0}]},
        "sla": {"ttft_p90_s": 2.0, "tpot_s": 0.05},
        "options": {"tp_degrees": [1]},
    }
