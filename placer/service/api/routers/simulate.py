"""``POST /simulate``: replay a stored plan in the discrete-event simulator (``placer.sim``);
``/simulations`` lists and reads the stored results."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status

from db import repo
from db.session import session_scope
from placer.service.api.deps import ServiceDep, SessionDep
from placer.service.api.errors import DEADLINE
from placer.service.api.routers.jobs import check_trace
from placer.service.api.schemas import Id, Page, SimulateRequest, SimulationOut
from placer.service.jobs import solve, work
from placer.service.store import stored_plan

router = APIRouter(tags=["simulations"])


def simulator():
    """The simulator entry point, or None in a build without ``placer.sim``."""
    try:
        from placer.sim import simulate as run
    except ImportError:
        return None
    return run


@router.post("/simulate", response_model=SimulationOut, status_code=status.HTTP_201_CREATED,
             responses={501: {"description": "This build has no simulator (placer.sim)."}, **DEADLINE})
async def simulate(body: SimulateRequest, service: ServiceDep):
    """Simulate a stored plan on its scenario (or another stored one), optionally on a trace; in a child
    process killed after ``Settings.simulate_deadline_s`` (504 naming the deadline)."""
    run = simulator()
    if run is None:
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED,
                            "the simulator (placer.sim) is not part of this build")
    service.check_capacity()
    if body.trace is not None:
        check_trace(body.trace, "trace")

    def simulate_in_child():
        from placer.sim import SimConfig

        with service.factory() as session:
            row = repo.get_plan(session, body.plan_id)
            spec = (dict(repo.get_scenario(session, body.scenario_id).spec) if body.scenario_id is not None
                    else dict(row.inputs["scenario"]))
            full, _ = solve.prepare(session, spec)
            measured = row.inputs.get("measured") or None
            plan = stored_plan(row)
        config = SimConfig(requests=body.requests, seed=body.seed, load_rps=body.load_rps,
                           workload="trace" if body.trace else body.workload, trace=body.trace)
        deadline_s = service.settings.simulate_deadline_s
        data = service.compute(work.simulate, full, measured, plan, config, what=f"simulation of plan {body.plan_id}",
                               deadline=(deadline_s, "the service's limit on a simulation, "
                                                     "Settings.simulate_deadline_s"),
                               hint="simulate fewer requests")
        params = body.model_dump(mode="json")
        with session_scope(service.factory) as session:
            sim = repo.save_simulation(session, body.plan_id, params, data)
            return SimulationOut.model_validate(sim)

    return await asyncio.wrap_future(service.submit(simulate_in_child))


@router.get("/simulations", response_model=Page[SimulationOut])
def list_simulations(session: SessionDep, plan_id: Annotated[int | None, Query(ge=1, le=2_147_483_647)] = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 50,
                     offset: Annotated[int, Query(ge=0, le=2_147_483_647)] = 0):
    rows, total = repo.list_simulations(session, plan_id, limit, offset)
    return Page[SimulationOut](items=rows, total=total, limit=limit, offset=offset)


@router.get("/simulations/{simulation_id}", response_model=SimulationOut)
def get_simulation(simulation_id: Id, session: SessionDep):
    return repo.get_simulation(session, simulation_id)
