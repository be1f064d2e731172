"""A replanning job's view of the running deployment (`placer deploy`'s server), over HTTP.

in:  the deployment's URL (``Policy.deploy_url``), a plan
out: :func:`running_differs` — whether the deployment's ``GET /instances`` matches a plan
     (in words when not); :func:`apply_plan` — the plan applied live through ``POST /plan``
     and followed on ``GET /plan/status`` to its end, as an :class:`Applied`

The job never imports the executor: this is its client. A failure is an :class:`Applied`
with ``ok`` False and the reason, never an exception, so the run can be recorded FAILED.
Every call carries the executor's control-plane token (``Settings.executor_token``, from
``PLACER_EXECUTOR_TOKEN``) in its Authorization header (docs/security.md).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

from placer.plan import Plan
from placer.settings import Settings

POLL_S = 0.5
HTTP_TIMEOUT_S = 30.0


class DeploymentError(Exception):
    """The deployment could not be reached or answered nonsense."""


def _auth() -> dict[str, str]:
    """The executor's Authorization header (none without a token: its control plane then refuses)."""
    token = Settings.from_env().executor_token
    return {"Authorization": f"Bearer {token}"} if token else {}


def refusal(url: str, reply: httpx.Response) -> str:
    """Words for a deployment's error answer; a refused token (401, 403) names the variable that carries it."""
    detail = reply.text[:300]
    try:
        detail = str(reply.json().get("detail", detail))[:300]
    except (ValueError, AttributeError):
        pass
    if reply.status_code in (401, 403):
        given = "no control token was sent" if not _auth() else "the control token sent is not the deployment's"
        return (f"the deployment at {url} refused the job ({reply.status_code} {detail}): {given}; set "
                f"PLACER_EXECUTOR_TOKEN to the deployment's control token (what placer deploy printed, or its "
                f"--token / PLACER_EXECUTOR_TOKEN) where the job runs: placer serve's environment, or "
                f"placer jobs run-now's")
    return f"the deployment at {url} answered HTTP {reply.status_code}: {detail}"


def _get(url: str, path: str) -> Any:
    try:
        reply = httpx.get(url.rstrip("/") + path, timeout=HTTP_TIMEOUT_S, headers=_auth())
    except httpx.HTTPError as err:
        raise DeploymentError(f"GET {url.rstrip('/')}{path} failed: cannot reach the deployment "
                              f"({type(err).__name__}: {err})") from None
    if reply.status_code >= 400:
        raise DeploymentError(f"GET {url.rstrip('/')}{path}: {refusal(url, reply)}")
    try:
        return reply.json()
    except ValueError:
        raise DeploymentError(f"GET {url.rstrip('/')}{path}: the answer is not JSON: {reply.text[:200]!r}") from None


def _pool_key(role: str, datacenter: str, chip: str, tp: int) -> str:
    return f"{role} {datacenter} {chip} tp{tp}"


def running_differs(url: str, plan: Plan) -> str | None:
    """None when the deployment runs exactly ``plan``'s instances (pools capped by its
    ``max_per_pool``, if it was started with one), else the difference in words.
    DeploymentError when it cannot be asked."""
    cap = _get(url, "/plan/status").get("max_per_pool")
    running = Counter(_pool_key(i["role"], i["datacenter"], i["chip"], int(i["tp"])) for i in _get(url, "/instances"))
    wanted: Counter[str] = Counter()
    for p in plan.pools:
        if p.count > 0:
            wanted[_pool_key(p.role, p.datacenter, p.chip, p.tp)] += p.count if cap is None else min(p.count, cap)
    if running == wanted:
        return None
    parts = [f"{key}: runs {running.get(key, 0)}, plan {wanted.get(key, 0)}"
             for key in sorted(set(running) | set(wanted)) if running.get(key, 0) != wanted.get(key, 0)]
    return "; ".join(parts[:6]) + (f"; and {len(parts) - 6} more" if len(parts) > 6 else "")


@dataclass(frozen=True)
class Applied:
    ok: bool
    words: str  # what happened, for the run's reason or error
    status: dict[str, Any] | None = None  # the final GET /plan/status


def apply_plan(url: str, plan: Plan, timeout_s: float, grace_s: float = 30.0) -> Applied:
    """Apply ``plan`` live and wait for the end of the change, at most ``timeout_s`` (the
    deployment stops the change itself at that limit and keeps its old plan)."""
    base = url.rstrip("/")
    try:
        reply = httpx.post(base + "/plan", content=plan.to_json(), timeout=HTTP_TIMEOUT_S,
                           params={"grace_s": grace_s, "timeout_s": timeout_s, "ready_timeout_s": timeout_s},
                           headers={"content-type": "application/json", **_auth()})
    except httpx.HTTPError as err:
        return Applied(False, f"applying it to {url} failed: {type(err).__name__}: {err}")
    if reply.status_code >= 400:
        return Applied(False, f"applying it to {url} failed: {refusal(url, reply)}")
    end = time.monotonic() + timeout_s + HTTP_TIMEOUT_S
    while True:
        try:
            status = _get(url, "/plan/status")
        except DeploymentError as err:
            return Applied(False, f"lost the deployment at {url} while it applied the plan: {err}")
        if status.get("state") != "applying":
            break
        if time.monotonic() > end:
            return Applied(False, f"the deployment at {url} was still applying the plan after {timeout_s:g} s", status)
        time.sleep(POLL_S)
    if status.get("state") != "succeeded":
        return Applied(False, f"the deployment at {url} did not apply it ({status.get('strategy') or 'no change'}): "
                       f"{status.get('error')}", status)
    report = status.get("report") or {}
    return Applied(True, f"applied to the deployment at {url} ({report.get('strategy')}: "
                   f"{len(report.get('joined', []))} joined, {len(report.get('remove', []))} left, "
                   f"{report.get('seconds', 0):.1f} s)", status)
