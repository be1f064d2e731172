"""Solve jobs: the work behind ``POST /plans`` (and the shared scenario preparation).

in:  a scenario mapping (inline or stored), objective, solver, time limit
out: a ``solve_jobs`` row at submit time (inputs validated and snapshotted: custom chips
     from the database merged in, the newest chip profiles captured); later, run by a
     worker, the plan stored in ``plans`` and the job SUCCEEDED, or FAILED with the error.

The solve itself is :func:`placer.optimize.optimize`, the function the CLI calls.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from db import repo
from db.models import Scenario as ScenarioRow
from db.models import SolveJob, SolveStatus
from db.session import session_scope
from placer.catalog import chip_catalog, get_model
from placer.errors import InputError, PlacerError, UnknownChipError
from placer.optimize import OBJECTIVES, SolveConfig
from placer.profiles.records import LATEST, MIN_EFFICIENCY
from placer.service.jobs import work
from placer.service.jobs.bounds import check_size
from placer.service.jobs.child import ChildInternalError, ChildJobs, internal_words
from placer.service.store import save_plan
from placer.specs import Scenario, parse_scenario

log = logging.getLogger(__name__)


def with_custom_chips(session: Session, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` plus the stored custom chips its inventories name and it does not define."""
    defined = {c.get("name") for c in spec.get("chips") or [] if isinstance(c, dict)}
    wanted = []
    for dc in spec.get("datacenters") or []:
        if isinstance(dc, dict) and isinstance(dc.get("inventory"), dict):
            wanted.extend(dc["inventory"])
    catalog = chip_catalog()
    extra = []
    for name in dict.fromkeys(wanted):
        if name in defined or name in catalog:
            continue
        row = repo.find_chip(session, name)
        if row is not None:
            extra.append(dict(row.spec))
    if not extra:
        return spec
    return {**spec, "chips": [*(spec.get("chips") or []), *extra]}


def check_scenario(spec: dict[str, Any]) -> Scenario:
    """Validate a scenario mapping, including the chip and model names and the service's size bound
    (:mod:`placer.service.jobs.bounds`) (InputError)."""
    scenario = parse_scenario(spec)
    check_size(scenario)
    known = set(chip_catalog()) | {c.name for c in scenario.chips}
    for c in scenario.chips:
        if c.base is not None and c.base not in chip_catalog():
            raise InputError(f"chips: {UnknownChipError(c.base, sorted(chip_catalog()))}")
    for i, dc in enumerate(scenario.datacenters):
        for chip in dc.inventory:
            if chip not in known:
                raise InputError(f"datacenters[{i}].inventory: {UnknownChipError(chip, sorted(known))}")
    for member in ([scenario.member(i) for i in range(len(scenario.models))] if scenario.is_fleet else [scenario]):
        _check_model_and_trace(member)
    _check_profiles(scenario)
    return scenario


def _check_profiles(scenario: Scenario) -> None:
    """Over the service a scenario's ``profiles`` may only say 'latest' (the stored profiles, checked
    when they were posted): a client never names a file for the server to read (``/bin/ls`` was a 500)."""
    paths = [p for p in scenario.profiles or () if p != LATEST]
    if paths:
        raise InputError(f"profiles: {paths[0][:200]!r} is a file path; the service reads no file a client "
                         f"names: give 'latest' (the profiles stored with POST /profiles) or leave it out")


def _check_model_and_trace(scenario: Scenario) -> None:
    """A single-model scenario's (or one fleet member's) catalog model and trace file (InputError)."""
    if isinstance(scenario.model, str):
        get_model(scenario.model)
    if not scenario.workload.classes and scenario.workload.trace:
        try:
            found = Path(scenario.workload.trace).is_file()
        except (OSError, ValueError):  # e.g. an embedded NUL byte
            found = False
        if not found:
            raise InputError(f"workload.trace: no trace file {scenario.workload.trace[:300]!r}")


def prepare(session: Session, spec: dict[str, Any]) -> tuple[dict[str, Any], Scenario]:
    """The spec with custom chips merged in, and its validated Scenario."""
    full = with_custom_chips(session, spec)
    return full, check_scenario(full)


#: The floor of a stored efficiency (the profile records', which the API's schema applies too): a row
#: stored before it existed (1e-300, 5e-324) made the MILP's coefficients non-finite and failed every
#: solve of its chip.
MIN_STORED_EFFICIENCY = MIN_EFFICIENCY


def measured_for(session: Session, scenario: Scenario) -> dict[str, dict[str, Any]]:
    """Newest stored profile of every chip the scenario's inventories name; InputError naming the
    profile when one is outside (MIN_STORED_EFFICIENCY, 1] (the request fails, not the service)."""
    measured = repo.latest_profiles(session, [chip for dc in scenario.datacenters for chip in dc.inventory])
    for chip, figures in measured.items():
        for key, value in figures.items():
            if key.endswith("_efficiency") and not (isinstance(value, (int, float))
                                                    and MIN_STORED_EFFICIENCY <= value <= 1):
                raise InputError(f"{figures.get('profile', 'a stored profile')} of chip {chip!r} has {key} "
                                 f"{value!r}, outside [{MIN_STORED_EFFICIENCY:g}, 1]: delete it (DELETE /profiles/"
                                 f"<id>) or store a measured one, or solve with use_profiles false")
    return measured


def submit(session: Session, spec: dict[str, Any], *, objective: str = "bcr", solver: str = "ortools",
           time_limit_s: float = 30.0, marginals: bool = False, use_profiles: bool = True,
           scenario_id: int | None = None) -> SolveJob:
    """Validate and snapshot the inputs; a PENDING solve job (InputError on bad input)."""
    if objective not in OBJECTIVES:
        raise InputError(f"objective: unknown {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    full, scenario = prepare(session, spec)
    if objective == "max-goodput" and scenario.options.budget_usd_per_h is None:
        raise InputError("objective max-goodput needs options.budget_usd_per_h in the scenario")
    measured = measured_for(session, scenario) if use_profiles else {}
    request = {"scenario": full, "objective": objective, "solver": solver, "time_limit_s": time_limit_s,
               "marginals": marginals, "measured": measured}
    return repo.create_solve_job(session, scenario_name=scenario.name, request=request, scenario_id=scenario_id)


@dataclass(frozen=True)
class SolveOutcome:
    job_id: int
    status: SolveStatus
    seconds: float
    objective: str = ""
    plan_id: int | None = None
    error: str | None = None


def run(factory: sessionmaker[Session], job_id: int, children: ChildJobs | None = None,
        margin_s: float = work.JOB_MARGIN_S) -> SolveOutcome | None:
    """Run one PENDING solve job to the end; None when another worker already took it. With
    ``children`` (the service) the solve runs in a child process killed at its deadline (the time
    limit + ``margin_s``) or when the service stops; the job then FAILS naming why."""
    with session_scope(factory) as session:
        if not repo.claim_solve_job(session, job_id):
            return None
        job = repo.get_solve_job(session, job_id)
        request, scenario_id = dict(job.request), job.scenario_id
    start = time.perf_counter()
    error, status_code, plan = None, None, None
    try:
        config = SolveConfig(request["objective"], request["solver"], request["time_limit_s"], request["marginals"])
        plan = work.call(children, work.solve_plan, request["scenario"], config, request["measured"] or None,
                         deadline=work.solve_deadline(config.time_limit_s, margin_s), what=f"solve job {job_id}")
    except PlacerError as err:
        error, status_code = str(err), err.http_status
    except Exception as err:  # a bug: keep the service up, record it on the job
        if not isinstance(err, ChildInternalError):  # the child's traceback is logged already
            log.exception("solve job %s failed", job_id)
        error, status_code = internal_words(err), 500
    seconds = time.perf_counter() - start
    with session_scope(factory) as session:
        if plan is None:
            repo.finish_solve_job(session, job_id, error=error, error_status=status_code)
            return SolveOutcome(job_id, SolveStatus.FAILED, seconds, request["objective"], error=error)
        row = save_plan(session, plan, inputs=request, scenario_id=_existing_scenario(session, scenario_id),
                             source="api")
        repo.finish_solve_job(session, job_id, plan_id=row.id)
        return SolveOutcome(job_id, SolveStatus.SUCCEEDED, seconds, request["objective"], plan_id=row.id)


def _existing_scenario(session: Session, scenario_id: int | None) -> int | None:
    """The scenario may have been deleted while the job ran; the plan keeps its snapshot."""
    if scenario_id is None:
        return None
    return scenario_id if session.get(ScenarioRow, scenario_id) is not None else None
