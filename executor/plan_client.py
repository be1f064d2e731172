"""A running deployment's control plane, from outside: send it a new plan and follow the change.

in:  a plan, the deployment server's URL (`placer deploy`'s HTTP endpoint) and its bearer token
out: `post_plan` (`POST /plan`: the change's first status), `follow_apply` (poll `GET /plan/status`,
     each new event handed on, the final status), `bearer` (the Authorization header)

Used by `placer deploy --apply` (`executor.cli`). httpx is imported inside the functions, so importing
this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from placer.errors import InputError, PlacerError

if TYPE_CHECKING:
    from placer.plan import Plan


def bearer(token: str | None) -> dict[str, str]:
    """The control plane's Authorization header (none without a token)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def post_plan(plan: Plan, url: str, grace_s: float, timeout_s: float = 600.0, *,
              token: str | None = None) -> dict[str, Any]:
    """Start applying `plan` on the server of a running deployment (`POST /plan`, 202); the
    change's first status. Follow it with `follow_apply`. `token`: the control plane's bearer
    token, sent in the Authorization header only.

    Raises `PlacerError` when the server cannot be reached or refuses (401/403: token; 409:
    another change runs), `InputError` when it refuses the plan as invalid (HTTP 422).
    """
    import httpx

    try:
        r = httpx.post(f"{url.rstrip('/')}/plan", json=plan.model_dump(mode="json"),
                       params={"grace_s": grace_s, "timeout_s": timeout_s, "ready_timeout_s": timeout_s}, timeout=30,
                       headers=bearer(token))
    except httpx.HTTPError as exc:
        raise PlacerError(f"cannot reach the deployment at {url}: {exc}") from None
    if r.status_code not in (200, 202):
        error = InputError if r.status_code == 422 else PlacerError
        raise error(f"the deployment refused the plan ({r.status_code}): {r.text[:500]}")
    return r.json()


def follow_apply(url: str, timeout_s: float, on_event: Callable[[dict[str, Any]], None] = lambda ev: None,
                 poll_s: float = 0.5, *, token: str | None = None) -> dict[str, Any]:
    """Poll `GET /plan/status` until the change ends, handing each new event to `on_event`; the
    final status (`state` succeeded or failed). PlacerError when it is still applying at `timeout_s`
    or the server stops answering."""
    import time

    import httpx

    seen, end = 0, time.monotonic() + timeout_s
    while True:
        try:
            r = httpx.get(f"{url.rstrip('/')}/plan/status", timeout=30, headers=bearer(token))
            r.raise_for_status()
        except httpx.HTTPError as exc:
            raise PlacerError(f"lost the deployment at {url} while it applied the plan: {exc}") from None
        status = r.json()
        for ev in status["events"][seen:]:
            on_event(ev)
        seen = len(status["events"])
        if status["state"] != "applying":
            return status
        if time.monotonic() > end:
            raise PlacerError(f"the deployment at {url} is still applying the plan after {timeout_s:g} s; "
                              f"see {url.rstrip('/')}/plan/status")
        time.sleep(poll_s)
