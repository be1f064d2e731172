"""Request and response bodies of the REST API (pydantic), separate from the ORM models.

Inputs reuse the planner's validated specs (``placer.specs.Scenario``, ``ChipSpec``)
and the job specs (``placer.service.jobs.specs``), so the OpenAPI docs and the CLI share one
description of every field.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from placer.profiles.records import MIN_EFFICIENCY
from placer.service.jobs.specs import Policy, Schedule, WorkloadSource
from placer.specs import Scenario

T = TypeVar("T")

#: Ids fit a 32-bit signed integer on every backend.
MAX_ID = 2_147_483_647
Id = Annotated[int, Field(ge=1, le=MAX_ID)]
Name = Annotated[str, Field(min_length=1, max_length=200)]
Objective = Literal["bcr", "min-cost", "max-goodput"]
Solver = Literal["ortools", "ortools-highs", "ortools-scip", "pulp"]
#: The smallest efficiency a stored profile may carry: 1e-300 once passed "> 0" and made every solve of
#: its chip fail ("Expected finite coefficients"); no chip sustains under 0.1 % of its datasheet peak.
TimeLimit = Annotated[float, Field(gt=0, le=600, description="Solver time limit, seconds.")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Page(_Out, Generic[T]):
    items: list[T]
    total: int = Field(description="Rows matching the filters, over all pages.")
    limit: int
    offset: int


# --- chips and profiles -------------------------------------------------------------

class ChipOut(_Out):
    name: str
    source: Literal["catalog", "custom"] = Field(description="Bundled datasheet figures, or added through the API.")
    spec: dict[str, Any] = Field(description="Datasheet fields (catalog) or the stored ChipSpec (custom).")


class ProfileIn(_In):
    chip: Annotated[str, Field(min_length=1, max_length=128, description="Chip name (catalog or custom).")]
    compute_efficiency: float | None = Field(None, ge=MIN_EFFICIENCY, le=1, description="Sustained / peak compute.")
    mem_bw_efficiency: float | None = Field(None, ge=MIN_EFFICIENCY, le=1, description="Sustained / peak HBM bandwidth.")
    interconnect_efficiency: float | None = Field(None, ge=MIN_EFFICIENCY, le=1, description="Sustained / peak links.")
    measured_by: str = Field("", max_length=200, description="Who (or which host) measured.")
    measured_at: AwareDatetime | None = Field(None, description="When (default: now).")
    software: str = Field("", max_length=200, description="Software versions the measurement ran with.")
    results: dict[str, Any] = Field(default_factory=dict, description="Raw microbenchmark results.")

    @model_validator(mode="after")
    def _some_figure(self) -> ProfileIn:
        if all(getattr(self, f) is None for f in ("compute_efficiency", "mem_bw_efficiency",
                                                   "interconnect_efficiency")):
            raise ValueError("a profile needs at least one of compute_efficiency, mem_bw_efficiency, "
                             "interconnect_efficiency")
        return self


class ProfileOut(_Out):
    id: int
    chip: str
    compute_efficiency: float | None
    mem_bw_efficiency: float | None
    interconnect_efficiency: float | None
    measured_by: str
    measured_at: datetime
    software: str
    results: dict[str, Any]
    created_at: datetime


# --- scenarios ----------------------------------------------------------------------

class ScenarioOut(_Out):
    id: int
    name: str
    spec: dict[str, Any] = Field(description="The scenario document (docs/contracts.md).")
    created_at: datetime
    updated_at: datetime


# --- plans and solve jobs -----------------------------------------------------------

class _ScenarioRef(_In):
    scenario_id: Id | None = Field(None, description="A stored scenario.")
    scenario: Scenario | None = Field(None, description="Or the scenario inline.")

    @model_validator(mode="after")
    def _one(self) -> _ScenarioRef:
        if (self.scenario_id is None) == (self.scenario is None):
            raise ValueError("give exactly one of scenario_id and scenario")
        return self


class PlanRequest(_ScenarioRef):
    objective: Objective = "bcr"
    solver: Solver = "ortools"
    time_limit_s: TimeLimit = 30.0
    marginals: bool = Field(False, description="Re-solve to price each binding constraint (slower).")
    use_profiles: bool = Field(True, description="Calibrate with the newest stored profile of each chip.")


class CompareRequest(_ScenarioRef):
    objective: Objective = "bcr"
    solver: Solver = "ortools"
    time_limit_s: TimeLimit = 30.0
    use_profiles: bool = True


class SolveJobOut(_Out):
    id: int
    status: Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED"]
    error: str | None = Field(None, description="Why it FAILED.")
    scenario_id: int | None
    scenario_name: str
    objective: str
    plan_id: int | None = Field(None, description="The stored plan, once SUCCEEDED.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class PlanSummary(_Out):
    id: int
    scenario_id: int | None
    scenario_name: str
    objective: str
    source: str
    bcr_requests_per_usd: float
    cost_usd_per_h: float
    goodput_rps: float
    ttft_p90_s: float
    tpot_s: float
    wan_gbit_per_s: float
    rld_token_share: float
    solver_backend: str
    solver_status: str
    solve_seconds: float
    created_at: datetime


PlanSort = Literal["created_at", "bcr_requests_per_usd", "cost_usd_per_h", "goodput_rps", "id"]


# --- simulations --------------------------------------------------------------------

class SimulateRequest(_In):
    plan_id: Id
    scenario_id: Id | None = Field(None, description="Scenario to replay against (default: the plan's snapshot).")
    trace: str | None = Field(None, min_length=1, max_length=4096,
                              description="Replay this JSONL trace (on the service's machine) instead of the classes.")
    workload: Literal["classes", "agentic"] = Field(
        "classes", description="classes: i.i.d. requests of the classes; agentic: multi-turn sessions with real "
        "prefix caches (ignored with a trace).")
    load_rps: float | None = Field(None, ge=0.01, le=1e5,
                                   description="Arrival rate, req/s (default: the plan's carried load).")
    requests: int = Field(2000, ge=1, le=50_000, description="Requests to simulate.")
    seed: int = Field(0, ge=0, le=MAX_ID, description="The same seed gives the same result.")


class SimulationOut(_Out):
    id: int
    plan_id: int
    params: dict[str, Any]
    result: dict[str, Any] = Field(description="The Simulation JSON of docs/contracts.md.")
    created_at: datetime


# --- replanning jobs ----------------------------------------------------------------

class JobIn(_In):
    name: Name
    scenario_id: Id
    schedule: Schedule
    workload: WorkloadSource
    policy: Policy = Field(default_factory=Policy)
    objective: Objective = "bcr"
    solver: Solver = "ortools"
    time_limit_s: TimeLimit = 30.0
    enabled: bool = True
    current_plan_id: Id | None = Field(None, description="The plan in force now (default: the first run's).")


class JobPatch(_In):
    name: Name | None = None
    scenario_id: Id | None = None
    schedule: Schedule | None = None
    workload: WorkloadSource | None = None
    policy: Policy | None = None
    objective: Objective | None = None
    solver: Solver | None = None
    time_limit_s: TimeLimit | None = None
    enabled: bool | None = None
    current_plan_id: Id | None = None


class JobOut(_Out):
    id: int
    name: str
    scenario_id: int
    schedule: dict[str, Any]
    workload: dict[str, Any]
    policy: dict[str, Any]
    objective: str
    solver: str
    time_limit_s: float
    enabled: bool
    current_plan_id: int | None
    last_adopted_at: datetime | None
    active_run_id: int | None
    next_run_at: datetime | None = Field(None, description="Next scheduled fire in this service, if scheduled.")
    created_at: datetime
    updated_at: datetime


class RunOut(_Out):
    id: int
    job_id: int
    trigger: str
    idempotency_key: str | None
    status: Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED"]
    outcome: Literal["INITIAL", "ADOPTED", "PROPOSED", "UNCHANGED", "HELD", "SKIPPED"] | None
    reason: str | None
    error: str | None
    baseline_plan_id: int | None
    plan_id: int | None
    baseline_bcr: float | None = Field(None, description="The current plan's BCR under the new workload.")
    new_bcr: float | None
    gain_pct: float | None
    diff: dict[str, Any] | None
    workload: dict[str, Any] | None = Field(None, description="The fitted workload the run solved for.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class AdoptOut(_Out):
    job_id: int
    plan_id: int
    deployment_id: int


class DeploymentOut(_Out):
    id: int
    plan_id: int
    job_id: int | None
    status: Literal["REQUESTED", "ACTIVE", "SUPERSEDED", "FAILED"]
    note: str
    created_at: datetime
    updated_at: datetime


class Health(_Out):
    status: Literal["ok", "degraded"]
    database: str
    scheduler: Literal["running", "off"]


def utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(timezone.utc)
