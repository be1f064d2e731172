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
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel, Field, field_validator

from executor.admission import Overloaded
from executor.elastic import ApplyBusy, ApplyOperation
from executor.engine.tokenizer import ByteTokenizer
from executor.placement import placement
from executor.registry import InstanceInfo
from executor.router import Router
from executor.routing import NoRouteError
from executor.stream import RequestStream
from placer import flows
from placer.plan import Plan

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
    role: str = Field(description=f"{', '.join(flows.ROLES[:-1])} or {flows.ROLES[-1]}.")
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


@dataclass(frozen=True)
class Served:
    """What the endpoints serve (`app.state.served`, set once by `create_app`)."""

    router: Router
    model_name: str
    deployment: Any = None  # a `LocalCluster` or `RayDeployment`: enables `POST /plan`


def _served(request: Request) -> Served:
    return request.app.state.served


ServedDep = Annotated[Served, Depends(_served)]
TOKENIZER = ByteTokenizer()

completions_api = APIRouter()  # the OpenAI-style face
operations_api = APIRouter()  # health, metrics, instances, live plan changes


def create_app(router: Router, *, model_name: str = "placer-tiny", deployment: Any = None) -> FastAPI:
    """The app over a running router (nothing connects at import time).

    `deployment` (a `LocalCluster` or `RayDeployment`) enables `POST /plan`.
    """
    app = FastAPI(title="placer executor", version="1")
    app.state.served = Served(router, model_name, deployment)
    app.include_router(completions_api)
    app.include_router(operations_api)
    return app


# ---- completions ----------------------------------------------------------------------------


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def _chunk(model: str, cid: str, created: int, text: str, ids: list[int], finish: str | None, **extra: Any) -> dict:
    return {"id": cid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": 0, "text": text, "token_ids": ids, "logprobs": None, "finish_reason": finish}],
            **extra}


def _placer(record: Any, pipeline: str) -> dict:
    if record is None:
        return {"pipeline": pipeline}
    return {"pipeline": record.pipeline, "prefix_hit_tokens": record.prefix_hit_tokens, "ttft_s": record.ttft_s,
            "tpot_s": record.tpot_s, "instances": record.extra.get("instances")}


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _submit(router: Router, tokens: list[int], body: CompletionRequest) -> RequestStream:
    """Route the request; a refusal becomes its HTTP status (429 with Retry-After, 503, 422)."""
    sampling = {"temperature": body.temperature, "seed": body.seed, "max_new_tokens": body.max_tokens,
                "stop_at_eos": not body.ignore_eos}
    try:
        return router.submit(tokens, sampling, loop=asyncio.get_running_loop())
    except Overloaded as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": str(max(1, round(exc.retry_after_s)))}) \
            from None
    except NoRouteError as exc:
        raise HTTPException(503, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None


async def _sse_events(stream: RequestStream, model: str, cid: str, created: int, prompt_tokens: int):
    """One SSE event per token, the last with finish_reason, usage and our `placer` block (or an
    `error` event), then `[DONE]`."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    n = 0
    async for ev in stream.aevents():
        if ev.kind == "token":
            n += 1
            text = dec.decode(bytes([ev.token])) if ev.token < 256 else ""
            yield _sse(_chunk(model, cid, created, text, [ev.token], None))
        elif ev.kind == "end":
            yield _sse(_chunk(model, cid, created, dec.decode(b"", final=True), [], ev.finish_reason,
                              usage=_usage(prompt_tokens, n), placer=_placer(ev.record, stream.pipeline.value)))
        else:
            yield _sse({"id": cid, "error": {"message": ev.error, "type": "server_error"}})
    yield "data: [DONE]\n\n"


@completions_api.post("/v1/completions")
async def completions(body: CompletionRequest, served: ServedDep):
    tokens = TOKENIZER.encode(body.prompt) if isinstance(body.prompt, str) else list(body.prompt)
    stream = _submit(served.router, tokens, body)
    cid, created = f"cmpl-{uuid.uuid4().hex[:16]}", int(time.time())
    if body.stream:
        return StreamingResponse(_sse_events(stream, served.model_name, cid, created, len(tokens)),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    ids: list[int] = []
    async for ev in stream.aevents():
        if ev.kind == "token":
            ids.append(ev.token)
        elif ev.kind == "error":
            raise HTTPException(502, f"request failed: {ev.error}")
    return {"id": cid, "object": "text_completion", "created": created, "model": served.model_name,
            "choices": [{"index": 0, "text": TOKENIZER.decode(ids), "token_ids": ids, "logprobs": None,
                         "finish_reason": stream.finish_reason}],
            "usage": _usage(len(tokens), len(ids)), "placer": _placer(stream.record, stream.pipeline.value)}


@completions_api.get("/v1/models")
def models(served: ServedDep):
    return {"object": "list", "data": [{"id": served.model_name, "object": "model", "owned_by": "placer"}]}


# ---- operations -----------------------------------------------------------------------------


@operations_api.get("/health")
@operations_api.get("/healthz", include_in_schema=False)  # the service's path: one health path for both servers
def health(served: ServedDep):
    by_role: dict[str, int] = {}
    for i in served.router.instances.values():
        by_role[i.role] = by_role.get(i.role, 0) + 1
    ok = by_role.get(flows.P, 0) > 0 and sum(by_role.get(r, 0) for r in flows.DECODE_ROLES) > 0
    return {"status": "ok" if ok else "degraded", "instances": by_role}


@operations_api.get("/metrics")
def metrics(request: Request, served: ServedDep, format: str | None = None):
    accept = request.headers.get("accept", "")
    if format == "prometheus" or (format is None and ("text/plain" in accept or "openmetrics" in accept)):
        return PlainTextResponse(prometheus_text(served.router.stats()), media_type="text/plain; version=0.0.4")
    return served.router.stats()


def _plan_apply(request: Request) -> ApplyOperation:
    """The app's one plan-change operation (made on first use)."""
    state = request.app.state
    with _APPLY_LOCK:
        if getattr(state, "plan_apply", None) is None:
            state.plan_apply = ApplyOperation()
        return state.plan_apply


_APPLY_LOCK = threading.Lock()


@operations_api.post("/plan", status_code=202)
def apply_plan(body: dict[str, Any], request: Request, served: ServedDep, grace_s: float = Query(30.0, ge=0),
               timeout_s: float = Query(600.0, gt=0, le=24 * 3600),
               ready_timeout_s: float = Query(300.0, gt=0, le=24 * 3600)):
    """Start applying a new plan live (202); follow it at `GET /plan/status`. 409 while another runs."""
    if served.deployment is None:
        raise HTTPException(409, "this server was started without a deployment to change")
    try:
        plan = Plan.model_validate(body)
        specs = placement(plan, getattr(served.deployment, "max_per_pool", None))
    except ValueError as exc:
        raise HTTPException(422, f"not a plan: {exc}") from None
    try:
        return _plan_apply(request).start(served.deployment, plan, specs, grace_s=grace_s,
                                          ready_timeout_s=ready_timeout_s, timeout_s=timeout_s)
    except ApplyBusy as exc:
        raise HTTPException(409, str(exc)) from None


@operations_api.get("/plan/status")
def plan_status(request: Request, served: ServedDep):
    """The last plan change: state (idle, applying, succeeded, failed), strategy, events, error;
    and `max_per_pool`, the deployment's cap on each pool (what `GET /instances` is compared with)."""
    return {**_plan_apply(request).status(), "max_per_pool": getattr(served.deployment, "max_per_pool", None)}


@operations_api.get("/instances")
def instances(served: ServedDep):
    return [vars(i) for i in served.router.instances.values()]


@operations_api.post("/instances", status_code=201)
def register(body: InstanceBody, served: ServedDep):
    try:
        info = InstanceInfo(**body.model_dump())
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    served.router.register(info)
    return vars(info)


@operations_api.delete("/instances/{name}", status_code=204)
def unregister(name: str, served: ServedDep):
    if name not in served.router.instances:
        raise HTTPException(404, f"no instance named {name!r}")
    served.router.unregister(name)
