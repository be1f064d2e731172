"""What the executor's HTTP front serves: each model's router and tokenizer, and which one a request asks for.

In: the routers of a deployment (one model, or a fleet's: one per model), the deployment and the
control plane's token. Out: `Served` (`app.state.served` of `executor.server.create_app`) and its
rules: `pick(name)` — the request's model (404 naming an unknown one and the served ones; 400 when
none is named while several are served; optional with one) — and `owner(instance)`; `ServedDep`, the
endpoints' dependency that hands them the app's `Served`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request

from executor.engine.tokenizer import ByteTokenizer
from executor.router import Router


@dataclass(frozen=True)
class ServedModel:
    """One served model: its router and its tokenizer (text ↔ ids: `encode`, `decode`, `vocab_size`;
    a checkpoint's `HFTokenizer`, or bytes)."""

    router: Router
    tokenizer: Any = field(default_factory=ByteTokenizer)


@dataclass(frozen=True)
class Served:
    """What the endpoints serve (`app.state.served`, set once by `create_app`)."""

    models: dict[str, ServedModel]  # name → its router and tokenizer
    fleet: bool = False  # served as a fleet: metrics and instances carry the model
    deployment: Any = None  # a `LocalCluster`, `RayDeployment` or `Fleet`: enables `POST /plan`
    token: str | None = None  # the control plane's bearer token; None: control calls are refused

    def pick(self, name: str | None) -> tuple[str, ServedModel]:
        """The model a request asks for: 404 naming an unknown one, 400 when it names none of several."""
        names = ", ".join(self.models)
        if name is None:
            if len(self.models) == 1:
                return next(iter(self.models.items()))
            raise HTTPException(400, f"model: this server serves {len(self.models)} models ({names}); name one "
                                     "in the request's 'model' field")
        if name not in self.models:
            raise HTTPException(404, f"model: {name!r} is not served here; served: {names}")
        return name, self.models[name]

    def owner(self, instance: str) -> ServedModel | None:
        """The model whose router knows `instance`."""
        return next((m for m in self.models.values() if instance in m.router.instances), None)


def _served(request: Request) -> Served:
    return request.app.state.served


ServedDep = Annotated[Served, Depends(_served)]
