"""The repository: every read and write the API, the jobs and the CLI make.

in:  a Session and plain values (mappings for scenarios, plans, specs; ids; filters)
out: ORM rows; :class:`~db.errors.NotFoundError` and :class:`~db.errors.ConflictError`

Functions flush but never commit: the caller owns the transaction (``session_scope``).
A unique-constraint race is turned into ``ConflictError`` after rolling back.
One module per resource; callers use them through this package (``repo.get_plan``).
"""

from db.repo.chips import (
    add_profile,
    create_chip,
    delete_chip,
    delete_profile,
    find_chip,
    get_chip,
    get_profile,
    latest_profiles,
    list_chips,
    list_profiles,
    update_chip,
)
from db.repo.deployments import create_deployment, list_deployments
from db.repo.jobs import (
    create_job,
    create_run,
    delete_job,
    find_job,
    find_run_by_key,
    get_job,
    get_run,
    interrupted_runs,
    list_jobs,
    list_runs,
    lock_job,
    release_stale_locks,
    runs_by_outcome,
    unlock_job,
    update_job,
)
from db.repo.plans import (
    get_plan,
    get_simulation,
    list_plans,
    list_simulations,
    save_plan,
    save_simulation,
)
from db.repo.request_rows import add_requests, request_window
from db.repo.scenarios import (
    create_scenario,
    delete_scenario,
    find_scenario,
    get_scenario,
    list_scenarios,
    update_scenario,
)
from db.repo.solve_jobs import (
    claim_solve_job,
    create_solve_job,
    finish_solve_job,
    get_solve_job,
    interrupted_solve_jobs,
    list_solve_jobs,
    solve_jobs_by_status,
)

__all__ = [
    "add_profile", "add_requests", "claim_solve_job", "create_chip",
    "create_deployment", "create_job", "create_run", "create_scenario", "create_solve_job", "delete_chip",
    "delete_job", "delete_profile", "delete_scenario", "find_chip", "find_job", "find_run_by_key", "find_scenario",
    "finish_solve_job", "get_chip", "get_job", "get_plan", "get_profile", "get_run", "get_scenario",
    "get_simulation", "get_solve_job", "interrupted_runs", "interrupted_solve_jobs", "latest_profiles",
    "list_chips", "list_deployments", "list_jobs", "list_plans", "list_profiles", "list_runs", "list_scenarios",
    "list_simulations", "list_solve_jobs", "lock_job", "release_stale_locks", "request_window", "runs_by_outcome",
    "save_plan", "save_simulation", "solve_jobs_by_status", "unlock_job", "update_chip", "update_job", "update_scenario",
]
