"""``/healthz`` (no token; ``/health`` is an alias, as on a deployment's server) and ``/metrics`` (Prometheus text; token required)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from placer.service.api.deps import Authorized, ServiceDep
from placer.service.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
@router.get("/health", response_model=Health, responses={503: {"model": Health}}, include_in_schema=False)
def healthz(service: ServiceDep):
    """Liveness and database reachability; 503 when the database does not answer."""
    scheduler = "running" if service.scheduler is not None and service.scheduler.running else "off"
    try:
        with service.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        database = "ok"
    except Exception as err:
        database = f"unreachable: {type(err).__name__}"
    body = Health(status="ok" if database == "ok" else "degraded", database=database, scheduler=scheduler)
    return JSONResponse(body.model_dump(), status_code=200 if database == "ok" else 503)


metrics_router = APIRouter(tags=["health"], dependencies=[Authorized])


@metrics_router.get("/metrics", response_class=Response,
                    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format."}})
def metrics(service: ServiceDep) -> Response:
    """Solve-time histogram, solve jobs by status, replanning runs by outcome."""
    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)
