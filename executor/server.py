"""HTTP face of the router: OpenAI-style completions and chat completions (streaming with SSE).

In: `POST /v1/completions` with `prompt` as text (the model's tokenizer, BOS where it adds one) or
token ids, `max_tokens`, `temperature`, `seed`, `stream`, `ignore_eos`, `n` (1..8 choices, each
its own request through the router; choice i samples with seed + i); `logprobs` is refused (422:
the engine computes none). Out: with `stream: true`, one SSE event per token
(`choices[0].index`, `.text` and `.token_ids`), each choice's last event with its
`finish_reason` and our `placer` block (pipeline, prefix hit, TTFT, TPOT), the last choice's also
with the request's `usage`, then `data: [DONE]`; without, one JSON completion (`choices[i]`,
`usage` counting the prompt once, `placer` of choice 0, and each choice's own when n > 1).
`POST /v1/chat/completions` (`executor.chat`): the messages through the checkpoint's chat
template, OpenAI's `chat.completion` / `chat.completion.chunk` shapes. Also `GET /v1/models`
(each model, its `created` and, where admission sets one, `max_model_len`), `GET /health`,
`GET /metrics` (Prometheus text for a scraper — `Accept: text/plain` or `?format=prometheus`: the
router counters, then the vLLM-named latency histograms of `executor.latency_metrics`; else the
counters as JSON), and the control plane:
`GET /instances`, `POST /instances` and `DELETE /instances/{name}` (instances register
and unregister), `POST /plan` (start applying a new plan live: `executor.elastic`; needs
the deployment handed to `create_app`) and `GET /plan/status` (its progress).

Who may call what (docs/security.md): the control plane needs `Authorization: Bearer
<token>` (the `token` of `create_app`, compared in constant time: 401 without, 403
wrong); a server built without a token refuses every control call (403: locked).
The completions and models routes are open unless `protect_completions` (then they
need the same token); `/health` and `/metrics` stay open for probes and scrapers.
Bodies over `max_body_bytes` → 413 before they are parsed.

Models: a server serves one model (`create_app(router, model_name=…)`) or a fleet, one router
per model (`create_app(models={name: ServedModel(router, tokenizer)})`, `executor.fleet`). Each
request goes to the router of its `model` field (OpenAI's rule): an unknown model → 404 naming it
and the served ones; no `model` while several are served → 400 naming the choices; with one
model it may be left out. `/v1/models` lists every model; in a fleet `/metrics` labels every
series with `model` (JSON: `{"models": {name: stats}}`), `/health` and `/instances` say each
instance's model, and `POST /instances` needs one of the served models.

A face only: routing, streaming and logging live in `executor.router`, a request's choices in
`executor.choices`. Errors: a bad body → 422 naming the field (a non-finite temperature, a seed
outside [0, 2^64), n outside 1..8, logprobs, a chat message's role or content, prompt +
max_tokens beyond the model's context); a request that needs more KV than an instance
holds → 413; no instance can serve → 503; every instance that could serve is full →
429 with `Retry-After` (admission, not a timeout — all of these before any work); a
request that fails mid-stream → an SSE `error` event, then `[DONE]` (never a silent
cut). A client that goes away mid-request cancels it (`Router.cancel`: its instances
drop it and free its KV), every choice of it; a choice refused at admission cancels the
ones already routed (all or none).
"""

from __future__ import annotations

import functools
import hmac
import json
import threading
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from executor.bodies import (  # noqa: F401 - re-exported: the server's bodies and limits
    GREEDY_BELOW,
    MAX_BODY_BYTES,
    MAX_SEED,
    MAX_TOKENS_LIMIT,
    CompletionRequest,
    InstanceBody,
)
from executor.chat import chat_api
from executor.choices import (SERVING_ANSWERS, TextStream, cancel_all, collect, merged_events, placer_block,
                              submit_choices, usage)
from executor.apply_operation import ApplyBusy, ApplyOperation
from executor.elastic import FleetChangeUnsupported, refuse_fleet_change
from executor.engine.tokenizer import ByteTokenizer
from executor.health import PeerState
from executor.latency_metrics import RequestMetrics
from executor.placement import placement
from executor.prometheus import PROMETHEUS_COUNTERS, prometheus_text  # noqa: F401 - re-exported
from executor.registry import InstanceInfo
from executor.router import Router
from executor.served import Served, ServedDep, ServedModel
from executor.stream import RequestStream
from placer import pdd
from placer.plan import Plan
from placer.plancheck import check_plan_alone

_bearer = HTTPBearer(auto_error=False, description="The deployment's token (placer deploy --token).")


def require_token(served: ServedDep,
                  credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """401 without a bearer token, 403 with a wrong one or when the server has none (locked)."""
    if served.token is None:
        raise HTTPException(403, "the control plane is locked: this server was started without a token "
                                 "(placer deploy --token, or PLACER_EXECUTOR_TOKEN)")
    if credentials is None or not credentials.credentials:
        raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(credentials.credentials.encode(), served.token.encode()):
        raise HTTPException(403, "wrong bearer token")


Authorized = Depends(require_token)
completions_api = APIRouter()  # the OpenAI-style face
operations_api = APIRouter()  # health and metrics (read-only)
control_api = APIRouter(dependencies=[Authorized])  # instances and live plan changes: token only


def create_app(router: Router | None = None, *, model_name: str = "placer-tiny", deployment: Any = None,
               token: str | None = None, protect_completions: bool = False, max_body_bytes: int = MAX_BODY_BYTES,
               tokenizer: Any = None, models: dict[str, ServedModel] | None = None) -> FastAPI:
    """The app over a running router (nothing connects at import time), or over a fleet's: `models`
    maps each model's name to its router and tokenizer (then `router`, `model_name` and `tokenizer`
    are not given).

    `deployment` (a `LocalCluster` or `RayDeployment`) enables `POST /plan`. `token`: the bearer
    token of the control plane (None: it is locked); `protect_completions`: completions and models
    need it too (`/health` and `/metrics` stay open for probes and scrapers). `max_body_bytes`:
    larger request bodies are refused with 413. `tokenizer`: the served model's (text prompts and
    replies; token ids are checked against its vocabulary), the byte tokenizer by default.
    """
    if token is not None and (len(token) < 8 or token != token.strip() or " " in token):
        raise ValueError("token: at least 8 characters, no spaces")
    if protect_completions and token is None:
        raise ValueError("protect_completions needs a token")
    if (router is None) == (models is None) or (models is not None and not models):
        raise ValueError("give a router (one model) or a non-empty models mapping (a fleet), not both")
    app = FastAPI(title="placer executor", version="1", max_body_size=max_body_bytes,
                  openapi_url=None, docs_url=None, redoc_url=None)  # served below, behind the token
    fleet = models is not None
    served = models if fleet else {model_name: ServedModel(router, tokenizer or ByteTokenizer())}
    app.state.served = Served(dict(served), fleet, deployment, token)
    app.state.created = int(time.time())
    app.state.request_metrics = RequestMetrics()  # latency histograms, observed as each request ends
    for name, m in app.state.served.models.items():
        m.router.on_end.append(functools.partial(app.state.request_metrics.observe, name))
    app.state.datacenters = _datacenters(app.state.served)  # those known at start: a later register names one
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.include_router(completions_api, dependencies=[Authorized] if protect_completions else [])
    app.include_router(chat_api, dependencies=[Authorized] if protect_completions else [])
    app.include_router(operations_api)
    app.include_router(control_api)

    @app.get("/openapi.json", include_in_schema=False, dependencies=[Authorized])
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=[Authorized])
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="placer executor")

    return app


def _datacenters(served: Served) -> set[str]:
    """Every datacenter the deployment knows: its plan's, its instances', its WAN lines', the router's."""
    known: set[str] = set()
    plan = getattr(served.deployment, "plan", None)
    known.update(p.datacenter for p in getattr(plan, "pools", None) or ())
    known.update(s.datacenter for s in getattr(served.deployment, "specs", None) or ())
    for m in served.models.values():
        known.update(i.datacenter for i in m.router.instances.values())
        config = getattr(m.router, "config", None)
        for pair in getattr(config, "links", None) or {}:
            known.update(pair)
        if getattr(config, "router_datacenter", None):
            known.add(config.router_datacenter)
    return known


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each field and reason, without echoing the input (a NaN or a 10 MB prompt)."""
    detail = [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
              for e in exc.errors()]
    return JSONResponse(status_code=422, content={"detail": detail})


# ---- completions ----------------------------------------------------------------------------


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def _chunk(model: str, cid: str, created: int, index: int, text: str, ids: list[int], finish: str | None,
           **extra: Any) -> dict:
    return {"id": cid, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": index, "text": text, "token_ids": ids, "logprobs": None, "finish_reason": finish}],
            **extra}


async def _sse_events(router: Router, streams: list[RequestStream], model: str, cid: str, created: int,
                      prompt_tokens: int, tokenizer: Any):
    """One SSE event per token (`choices[0].index` names its choice), each choice's last with its
    finish_reason and our `placer` block (or an `error` event), the last choice to end also with the
    request's `usage`; then `[DONE]`. Closed early (the client went away): every choice is cancelled."""
    texts = [TextStream(tokenizer) for _ in streams]
    counts, left = [0] * len(streams), len(streams)
    try:
        async for i, ev in merged_events(streams):
            if ev.kind == "token":
                counts[i] += 1
                yield _sse(_chunk(model, cid, created, i, texts[i].push(ev.token), [ev.token], None))
                continue
            left -= 1
            if ev.kind == "end":
                whole = {"usage": usage(prompt_tokens, sum(counts))} if left == 0 else {}
                yield _sse(_chunk(model, cid, created, i, texts[i].flush(), [], ev.finish_reason, **whole,
                                  placer=placer_block(ev.record, streams[i].pipeline.value)))
            else:
                yield _sse({"id": cid, "error": {"message": ev.error, "type": "server_error", "index": i}})
        yield "data: [DONE]\n\n"
    finally:
        cancel_all(router, streams)


@completions_api.post("/v1/completions", responses={
    **SERVING_ANSWERS,
    400: {"description": "No 'model' named while several models are served (the choices are named)."},
    422: {"description": "A bad field (named: n beyond 8, logprobs, ...), or prompt + max_tokens beyond the "
                         "model's context."}})
async def completions(body: CompletionRequest, served: ServedDep, request: Request):
    model_name, model = served.pick(body.model)
    tokenizer, router = model.tokenizer, model.router
    tokens = tokenizer.encode(body.prompt) if isinstance(body.prompt, str) else list(body.prompt)
    if bad := [t for t in tokens if t >= tokenizer.vocab_size]:
        raise HTTPException(422, f"prompt: token ids {bad[:5]} are outside the vocabulary [0, {tokenizer.vocab_size})")
    streams = submit_choices(router, tokens, n=body.n, temperature=body.temperature, seed=body.seed,
                             max_tokens=body.max_tokens, ignore_eos=body.ignore_eos)
    cid, created = f"cmpl-{uuid.uuid4().hex[:16]}", int(time.time())
    if body.stream:
        return StreamingResponse(_sse_events(router, streams, model_name, cid, created, len(tokens), tokenizer),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    ids = await collect(request, router, streams)
    choices = [{"index": i, "text": tokenizer.decode(out), "token_ids": out, "logprobs": None,
                "finish_reason": s.finish_reason, **({"placer": placer_block(s.record, s.pipeline.value)}
                                                     if body.n > 1 else {})}
               for i, (s, out) in enumerate(zip(streams, ids, strict=True))]
    return {"id": cid, "object": "text_completion", "created": created, "model": model_name, "choices": choices,
            "usage": usage(len(tokens), sum(map(len, ids))),
            "placer": placer_block(streams[0].record, streams[0].pipeline.value)}


@completions_api.get("/v1/models")
def models(served: ServedDep, request: Request):
    """OpenAI's model list: each served model (`created`: when this server started; `max_model_len`: the
    context admission allows, where the deployment sets one)."""
    created = request.app.state.created
    data = []
    for name, m in served.models.items():
        context = getattr(getattr(getattr(m.router, "config", None), "admission", None), "max_context_tokens", None)
        data.append({"id": name, "object": "model", "created": created, "owned_by": "placer",
                     **({"max_model_len": context} if context else {})})
    return {"object": "list", "data": data}


# ---- operations -----------------------------------------------------------------------------


@operations_api.get("/health")
@operations_api.get("/healthz", include_in_schema=False)  # the service's path: one health path for both servers
def health(served: ServedDep):
    """ok when every served model can serve a request end to end (in a fleet: `models`, each's own)."""
    own = {name: _health(m.router) for name, m in served.models.items()}
    if not served.fleet:
        return next(iter(own.values()))
    ok = all(h["status"] == "ok" for h in own.values())
    by_role: dict[str, int] = {}
    for h in own.values():
        for role, n in h["instances"].items():
            by_role[role] = by_role.get(role, 0) + n
    return {"status": "ok" if ok else "degraded", "instances": by_role, "models": own}


def _health(router: Router) -> dict[str, Any]:
    """ok when a request can be served end to end and no instance is DOWN; `instances` counts the live
    ones by role, `down` names those the heartbeats found dead (DOWN after `down_after` missed
    heartbeats: 2 s at the default 0.5 s interval), which stay registered until a plan replaces them."""
    by_role: dict[str, int] = {}
    down = sorted(n for n in router.instances if router.health.state(n) is PeerState.DOWN)
    for i in router.instances.values():
        if i.name not in down:
            by_role[i.role] = by_role.get(i.role, 0) + 1
    # a request can be served end to end: by an aggregated instance alone, or by P and a decoder
    ok = not down and (by_role.get(pdd.AGG, 0) > 0 or (
        by_role.get(pdd.P, 0) > 0 and sum(by_role.get(r, 0) for r in pdd.DECODE_ROLES) > 0))
    return {"status": "ok" if ok else "degraded", "instances": by_role, **({"down": down} if down else {})}


@operations_api.get("/metrics")
def metrics(request: Request, served: ServedDep, format: str | None = None):
    accept = request.headers.get("accept", "")
    stats = {name: m.router.stats() for name, m in served.models.items()}
    if format == "prometheus" or (format is None and ("text/plain" in accept or "openmetrics" in accept)):
        latency = request.app.state.request_metrics
        text = (prometheus_text(stats, by_model=True, latency=latency) if served.fleet
                else prometheus_text(*stats.values(), latency=latency))
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
    return {"models": stats} if served.fleet else next(iter(stats.values()))


def _plan_apply(request: Request) -> ApplyOperation:
    """The app's one plan-change operation (made on first use)."""
    state = request.app.state
    with _APPLY_LOCK:
        if getattr(state, "plan_apply", None) is None:
            state.plan_apply = ApplyOperation()
        return state.plan_apply


_APPLY_LOCK = threading.Lock()


@control_api.post("/plan", status_code=202, responses={
    501: {"description": "A live change a fleet cannot make yet (named): another set of models, a "
                         "single-model deployment into a fleet, models pinned to GPUs apart."}})
def apply_plan(body: dict[str, Any], request: Request, served: ServedDep, grace_s: float = Query(30.0, ge=0),
               timeout_s: float = Query(600.0, gt=0, le=24 * 3600),
               ready_timeout_s: float = Query(300.0, gt=0, le=24 * 3600)):
    """Start applying a new plan live (202); follow it at `GET /plan/status`. 409 while another runs."""
    if served.deployment is None:
        raise HTTPException(409, "this server was started without a deployment to change")
    try:
        plan = Plan.model_validate(body)
        check_plan_alone(plan)  # the one plan check (placer.plancheck): no prefill, all counts 0, repeated rows
        placed = getattr(served.deployment, "placed", None)  # a fleet: the same models, every row naming one
        if callable(placed):
            specs = placed(plan)
        else:
            refuse_fleet_change(served.deployment, plan)
            specs = placement(plan, getattr(served.deployment, "max_per_pool", None))
    except FleetChangeUnsupported as exc:
        raise HTTPException(501, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(422, f"not a plan: {exc}") from None
    try:
        return _plan_apply(request).start(served.deployment, plan, specs, grace_s=grace_s,
                                          ready_timeout_s=ready_timeout_s, timeout_s=timeout_s)
    except ApplyBusy as exc:
        raise HTTPException(409, str(exc)) from None


@control_api.get("/plan/status")
def plan_status(request: Request, served: ServedDep):
    """The last plan change: state (idle, applying, succeeded, failed), strategy, events, error;
    and `max_per_pool`, the deployment's cap on each pool (what `GET /instances` is compared with)."""
    return {**_plan_apply(request).status(), "max_per_pool": getattr(served.deployment, "max_per_pool", None)}


@control_api.get("/instances")
def instances(served: ServedDep):
    """Every instance (in a fleet each with its `model`)."""
    return [{**vars(i), "model": name} if served.fleet else vars(i)
            for name, m in served.models.items() for i in m.router.instances.values()]


@control_api.post("/instances", status_code=201)
def register(body: InstanceBody, served: ServedDep, request: Request):
    """Register an instance with its model's router (a fleet needs `model`: 422 naming the choices);
    its datacenter must be one the deployment knows (422 naming them)."""
    fields = body.model_dump(exclude={"model"})
    if served.fleet and body.model not in served.models:
        raise HTTPException(422, f"model: {body.model!r} is not served here; give one of {', '.join(served.models)}")
    known = request.app.state.datacenters | _datacenters(served)
    if known and body.datacenter not in known:
        raise HTTPException(422, f"datacenter: {body.datacenter!r} is not one of this deployment's "
                                 f"({', '.join(sorted(known)[:20])})")
    try:
        info = InstanceInfo(**fields)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    _, model = served.pick(body.model if served.fleet else None)
    model.router.register(info)
    return {**vars(info), "model": body.model} if served.fleet else vars(info)


@control_api.delete("/instances/{name}", status_code=204)
def unregister(name: str, served: ServedDep):
    model = served.owner(name)
    if model is None:
        raise HTTPException(404, f"no instance named {name!r}")
    model.router.unregister(name)
