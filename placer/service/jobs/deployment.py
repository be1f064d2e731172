"""A replanning job's view of the running deployment (`placer deploy`'s server), over HTTP.

in:  the deployment's URL (``Policy.deploy_url``), a plan
out: :func:`running_differs` — whether the deployment's ``GET /instances`` matches a plan
     (in words when not); :func:`apply_plan` — the plan applied live through ``POST /plan``
     and followed on ``GET /plan/status`` to its end, as an :class:`Applied`

The job never imports the executor: this is its client. A failure is an :class:`Applied`
with ``ok`` False and the reason, never an exception, so the run can be recorded FAILED.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

from placer.plan import Plan

POLL_S = 0.5
HTTP_TIMEOUT_S = 30.0


class DeploymentError(Exception):
    """The deployment could not be reached or answered nonsense."""


def _get(url: str, path: str) -> Any:
    try:
        reply = httpx.get(url.rstrip("/") + path, timeout=HTTP_TIMEOUT_S)
        reply.raise_for_status()
        return reply.json()
    except (httpx.HTTPError, ValueError) as err:
        raise DeploymentError(f"GET {url.rstrip('/')}{path} failed: {type(err).__name__}: {err}") from None


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
                           headers={"content-type": "application/json"})
    except httpx.HTTPError as err:
        return Applied(False, f"applying it to {url} failed: {type(err).__name__}: {err}")
    if reply.status_code >= 400:
        return Applied(False, f"applying it to {url} failed: HTTP {reply.status_code} {reply.text[:300]}")
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
