"""HTTP face of the router: an OpenAI-style completions endpoint (streaming with SSE).

In: `POST /v1/completions` with `prompt` as text (byte tokenizer, BOS added) or token
ids, `max_tokens`, `temperature`, `seed`, `stream`, `ignore_eos`. Out: with
`stream: true`, one SSE event per token (`choices[0].text` and `token_ids`), a last
event with `finish_reason`, `usage` and our `placer` block (pipeline, prefix hit,
TTFT), then `data: [DONE]`; without, one JSON completion. Also `GET /v1/models`,
`GET /health`, `GET /metrics` (router counters: Prometheus text for a scraper —
`Accept: text/plain` or `?format=prometheus` — else JSON), `GET /instances`,
`POST /instances` and `DELETE /instances/{name}` (instances register and
unregister), `POST /plan` (apply a new plan live: `executor.elastic`; needs the
deployment handed to `create_app`).

A face only: routing, streaming and logging live in `executor.router`.
Errors: a bad body → 422; no instance can serve → 503; every instance that could
serve is full → 429 with `Retry-After` (admission, not a timeout); a request that
fails mid-stream → an SSE `error` event, then `[DONE]` (never a silent cut).
"""

from __future__ import annotations

import asyncio
import codecs
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel, Field, field_validator

from executor.admission import Overloaded
from executor.engine.tokenizer import ByteTokenizer
from executor.router import InstanceInfo, Router
from executor.routing import NoRouteError

MAX_TOKENS_LIMIT = 4096


class CompletionRequest(BaseModel):
    model: str | None = Field(None, description="Model name (informational: one model is served).")
    prompt: str | list[int] = Field(description="Text (UTF-8 bytes, BOS prepended) or token ids.")
    max_tokens: int = Field(16, ge=1, le=MAX_TOKENS_LIMIT, description="Output token budget.")
    temperature: float = Field(0.0, ge=0, description="0 = greedy.")
    seed: int = Field(0, description="Sampling seed when temperature > 0.")
    stream: bool = Field(False, description="Stream tokens as server-sent events.")
    ignore_eos: bool = Field(False, description="Keep generating past EOS up to max_tokens.")

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str | list[int]) -> str | list[int]:
        if isinstance(value, list):
            if not value:
                raise ValueError("prompt token list must not be empty")
            bad = [t for t in value if not 0 <= t < ByteTokenizer.vocab_size]
            if bad:
                raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {ByteTokenizer.vocab_size})")
        return value


class InstanceBody(BaseModel):
    name: str
    role: str = Field(description="P, RLD, MD or D.")
    datacenter: str
    chip: str = "cpu"
    tp: int = Field(1, ge=1)
    address: str | None = None


PROMETHEUS_COUNTERS = {  # router counter → (metric, help)
    "completed": ("placer_requests_completed_total", "Requests that ended with a completion."),
    "failed": ("placer_requests_failed_total", "Requests that ended with an error event."),
    "migrations": ("placer_migrations_total", "Requests moved mid-stream to another instance."),
    "fallbacks": ("placer_fallbacks_total", "Requests served by RLD in place of an MD pipeline."),
    "retries": ("placer_retries_total", "Attempts restarted before the first token reached the client."),
    "failures_after_first_token": ("placer_failures_after_first_token_total",
                                   "Requests failed (not retried) after tokens reached the client."),
    "stalls": ("placer_stalls_total", "Attempts that made no progress within the stall deadline."),
    "rejected_overloaded": ("placer_rejected_overloaded_total", "Requests refused with 429."),
    "rejected_no_capacity": ("placer_rejected_no_capacity_total", "Requests refused with 503."),
    "peers_down": ("placer_peers_down_total", "Instances marked DOWN."),
    "peers_recovered": ("placer_peers_recovered_total", "DOWN instances that answered again."),
    "orders_undelivered": ("placer_orders_undelivered_total", "Orders that could not be delivered."),
}


def prometheus_text(stats: dict[str, Any]) -> str:
    """Router stats → Prometheus text exposition (counters, live gauge, per-instance health)."""
    lines = []
    for key, (metric, help_) in PROMETHEUS_COUNTERS.items():
        lines += [f"# HELP {metric} {help_}", f"# TYPE {metric} counter", f"{metric} {int(stats.get(key, 0))}"]
    lines += ["# HELP placer_requests_live Requests in flight.", "# TYPE placer_requests_live gauge",
              f"placer_requests_live {int(stats.get('live', 0))}",
              "# HELP placer_instance_up 1 UP, 0.5 SUSPECT, 0 DOWN.", "# TYPE placer_instance_up gauge"]
    up = {"up": 1, "suspect": 0.5, "down": 0}
    for name, state in sorted(stats.get("health", {}).items()):
        lines.append(f'placer_instance_up{{instance="{name}"}} {up[state]}')
    return "\n".join(lines) + "\n"


def create_app(router: Router, *, model_name: str = "placer-tiny", deployment: Any = None) -> FastAPI:
    """The app over a running router (nothing connects at import time).

    `deployment` (a `LocalCluster` or `RayDeployment`) enables `POST /plan`.
    """
    app = FastAPI(title="placer executor", version="1")
    tok = ByteTokenizer()

    def _sse(obj: Any) -> str:
        return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"

    def _chunk(cid: str, created: int, text: str, ids: list[int], finish: str | None, **extra: Any) -> dict:
        return {"id": cid, "object": "text_completion", "created": created, "model": model_name,
                "choices": [{"index": 0, "text": text, "token_ids": ids, "logprobs": None, "finish_reason": finish}],
                **extra}

    def _placer(record: Any, pipeline: str) -> dict:
        if record is None:
            return {"pipeline": pipeline}
        return {"pipeline": record.pipeline, "prefix_hit_tokens": record.prefix_hit_tokens, "ttft_s": record.ttft_s,
                "tpot_s": record.tpot_s, "instances": record.extra.get("instances")}

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest):
        tokens = tok.encode(body.prompt) if isinstance(body.prompt, str) else list(body.prompt)
        sampling = {"temperature": body.temperature, "seed": body.seed, "max_new_tokens": body.max_tokens,
                    "stop_at_eos": not body.ignore_eos}
        loop = asyncio.get_running_loop()
        try:
            stream = router.submit(tokens, sampling, loop=loop)
        except Overloaded as exc:
            raise HTTPException(429, str(exc), headers={"Retry-After": str(max(1, round(exc.retry_after_s)))}) \
                from None
        except NoRouteError as exc:
            raise HTTPException(503, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        cid, created = f"cmpl-{uuid.uuid4().hex[:16]}", int(time.time())
        usage = lambda n: {"prompt_tokens": len(tokens), "completion_tokens": n,
                           "total_tokens": len(tokens) + n}

        if body.stream:
            async def events():
                dec = codecs.getincrementaldecoder("utf-8")("replace")
                n = 0
                async for ev in stream.aevents():
                    if ev.kind == "token":
                        n += 1
                        text = dec.decode(bytes([ev.token])) if ev.token < 256 else ""
                        yield _sse(_chunk(cid, created, text, [ev.token], None))
                    elif ev.kind == "end":
                        yield _sse(_chunk(cid, created, dec.decode(b"", final=True), [], ev.finish_reason,
                                          usage=usage(n), placer=_placer(ev.record, stream.pipeline.value)))
                    else:
                        yield _sse({"id": cid, "error": {"message": ev.error, "type": "server_error"}})
                yield "data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

        ids: list[int] = []
        async for ev in stream.aevents():
            if ev.kind == "token":
                ids.append(ev.token)
            elif ev.kind == "error":
                raise HTTPException(502, f"request failed: {ev.error}")
        return {"id": cid, "object": "text_completion", "created": created, "model": model_name,
                "choices": [{"index": 0, "text": tok.decode(ids), "token_ids": ids, "logprobs": None,
                             "finish_reason": stream.finish_reason}],
                "usage": usage(len(ids)), "placer": _placer(stream.record, stream.pipeline.value)}

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "placer"}]}

    @app.get("/health")
    def health():
        by_role: dict[str, int] = {}
        for i in router.instances.values():
            by_role[i.role] = by_role.get(i.role, 0) + 1
        ok = by_role.get("P", 0) > 0 and (by_role.get("MD", 0) + by_role.get("D", 0) + by_role.get("RLD", 0)) > 0
        return {"status": "ok" if ok else "degraded", "instances": by_role}

    @app.get("/metrics")
    def metrics(request: Request, format: str | None = None):
        accept = request.headers.get("accept", "")
        if format == "prometheus" or (format is None and ("text/plain" in accept or "openmetrics" in accept)):
            return PlainTextResponse(prometheus_text(router.stats()), media_type="text/plain; version=0.0.4")
        return router.stats()

    @app.post("/plan")
    def apply_plan(body: dict[str, Any], grace_s: float = 30.0):
        if deployment is None:
            raise HTTPException(409, "this server was started without a deployment to change")
        from placer.plan import Plan

        try:
            plan = Plan.model_validate(body)
        except ValueError as exc:
            raise HTTPException(422, f"not a plan: {exc}") from None
        return deployment.apply_plan(plan, grace_s=grace_s).to_dict()

    @app.get("/instances")
    def instances():
        return [vars(i) for i in router.instances.values()]

    @app.post("/instances", status_code=201)
    def register(body: InstanceBody):
        try:
            info = InstanceInfo(**body.model_dump())
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        router.register(info)
        return vars(info)

    @app.delete("/instances/{name}", status_code=204)
    def unregister(name: str):
        if name not in router.instances:
            raise HTTPException(404, f"no instance named {name!r}")
        router.unregister(name)

    return app
