"""Initial schema: chips, profiles, scenarios, plans, solve jobs, simulations,
replanning jobs and runs, deployments, request log.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Frozen copies of the column types in db.types (a migration must not follow later code).
UTC = sa.DateTime()  # naive UTC; db.types.UTCDateTime adds the zone back on read
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BIGID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "chip_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chip", sa.String(length=128), nullable=False),
        sa.Column("compute_efficiency", sa.Float(), nullable=True),
        sa.Column("mem_bw_efficiency", sa.Float(), nullable=True),
        sa.Column("interconnect_efficiency", sa.Float(), nullable=True),
        sa.Column("measured_by", sa.String(length=200), nullable=False),
        sa.Column("measured_at", UTC, nullable=False),
        sa.Column("software", sa.String(length=200), nullable=False),
        sa.Column("results", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chip_profiles")),
    )
    op.create_index(op.f("ix_chip_profiles_chip"), "chip_profiles", ["chip"], unique=False)
    op.create_table(
        "chips",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chips")),
        sa.UniqueConstraint("name", name=op.f("uq_chips_name")),
    )
    op.create_table(
        "scenarios",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("spec", JSON, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scenarios")),
        sa.UniqueConstraint("name", name=op.f("uq_scenarios_name")),
    )
    op.create_table(
        "plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=True),
        sa.Column("scenario_name", sa.String(length=200), nullable=False),
        sa.Column("objective", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=64), nullable=False),
        sa.Column("inputs", JSON, nullable=False),
        sa.Column("plan", JSON, nullable=False),
        sa.Column("bcr_requests_per_usd", sa.Float(), nullable=False),
        sa.Column("cost_usd_per_h", sa.Float(), nullable=False),
        sa.Column("goodput_rps", sa.Float(), nullable=False),
        sa.Column("ttft_p90_s", sa.Float(), nullable=False),
        sa.Column("tpot_s", sa.Float(), nullable=False),
        sa.Column("wan_gbit_per_s", sa.Float(), nullable=False),
        sa.Column("rld_token_share", sa.Float(), nullable=False),
        sa.Column("solver_backend", sa.String(length=64), nullable=False),
        sa.Column("solver_status", sa.String(length=32), nullable=False),
        sa.Column("solve_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenarios.id"], name=op.f("fk_plans_scenario_id_scenarios"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_plans")),
    )
    op.create_index(op.f("ix_plans_bcr_requests_per_usd"), "plans", ["bcr_requests_per_usd"], unique=False)
    op.create_index(op.f("ix_plans_cost_usd_per_h"), "plans", ["cost_usd_per_h"], unique=False)
    op.create_index(op.f("ix_plans_created_at"), "plans", ["created_at"], unique=False)
    op.create_index(op.f("ix_plans_objective"), "plans", ["objective"], unique=False)
    op.create_index(op.f("ix_plans_scenario_id"), "plans", ["scenario_id"], unique=False)
    op.create_index("ix_plans_scenario_name_created_at", "plans", ["scenario_name", "created_at"], unique=False)
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("schedule", JSON, nullable=False),
        sa.Column("workload", JSON, nullable=False),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("objective", sa.String(length=32), nullable=False),
        sa.Column("solver", sa.String(length=32), nullable=False),
        sa.Column("time_limit_s", sa.Float(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("current_plan_id", sa.Integer(), nullable=True),
        sa.Column("last_adopted_at", UTC, nullable=True),
        sa.Column("active_run_id", sa.Integer(), nullable=True),
        sa.Column("lock_expires_at", UTC, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["current_plan_id"], ["plans.id"], name=op.f("fk_jobs_current_plan_id_plans"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenarios.id"], name=op.f("fk_jobs_scenario_id_scenarios"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("name", name=op.f("uq_jobs_name")),
    )
    op.create_index(op.f("ix_jobs_scenario_id"), "jobs", ["scenario_id"], unique=False)
    op.create_table(
        "simulations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("result", JSON, nullable=False),
        sa.Column("sla_attainment", sa.Float(), nullable=True),
        sa.Column("goodput_rps", sa.Float(), nullable=True),
        sa.Column("bcr_requests_per_usd", sa.Float(), nullable=True),
        sa.Column("ttft_p90_s", sa.Float(), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_simulations_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_simulations")),
    )
    op.create_index(op.f("ix_simulations_plan_id"), "simulations", ["plan_id"], unique=False)
    op.create_table(
        "solve_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Integer(), nullable=True),
        sa.Column("scenario_name", sa.String(length=200), nullable=False),
        sa.Column("request", JSON, nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "PENDING",
                "RUNNING",
                "SUCCEEDED",
                "FAILED",
                name="solve_status",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_status", sa.Integer(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("started_at", UTC, nullable=True),
        sa.Column("finished_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_solve_jobs_plan_id_plans"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenarios.id"], name=op.f("fk_solve_jobs_scenario_id_scenarios"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_solve_jobs")),
    )
    op.create_index(op.f("ix_solve_jobs_status"), "solve_jobs", ["status"], unique=False)
    op.create_table(
        "deployments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column(
            "status",
            sa.Enum(
                "REQUESTED",
                "ACTIVE",
                "SUPERSEDED",
                "FAILED",
                name="deployment_status",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("updated_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_deployments_job_id_jobs"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["plans.id"], name=op.f("fk_deployments_plan_id_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
    )
    op.create_index(op.f("ix_deployments_plan_id"), "deployments", ["plan_id"], unique=False)
    op.create_table(
        "job_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "PENDING",
                "RUNNING",
                "SUCCEEDED",
                "FAILED",
                name="run_status",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column(
            "outcome",
            sa.Enum(
                "INITIAL",
                "ADOPTED",
                "PROPOSED",
                "UNCHANGED",
                "HELD",
                "SKIPPED",
                name="run_outcome",
                native_enum=False,
                create_constraint=True,
                length=16,
            ),
            nullable=True,
        ),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("baseline_plan_id", sa.Integer(), nullable=True),
        sa.Column("plan_id", sa.Integer(), nullable=True),
        sa.Column("baseline_bcr", sa.Float(), nullable=True),
        sa.Column("new_bcr", sa.Float(), nullable=True),
        sa.Column("gain_pct", sa.Float(), nullable=True),
        sa.Column("diff", JSON, nullable=True),
        sa.Column("workload", JSON, nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("started_at", UTC, nullable=True),
        sa.Column("finished_at", UTC, nullable=True),
        sa.ForeignKeyConstraint(
            ["baseline_plan_id"], ["plans.id"], name=op.f("fk_job_runs_baseline_plan_id_plans"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_runs_job_id_jobs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["plan_id"], ["plans.id"], name=op.f("fk_job_runs_plan_id_plans"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_runs")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_job_runs_idempotency_key")),
    )
    op.create_index(op.f("ix_job_runs_job_id"), "job_runs", ["job_id"], unique=False)
    op.create_table(
        "request_log",
        sa.Column("id", BIGID, autoincrement=True, nullable=False),
        sa.Column("arrival_at", UTC, nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("prefix_hit_tokens", sa.Integer(), nullable=False),
        sa.Column("pipeline", sa.String(length=16), nullable=False),
        sa.Column("ttft_s", sa.Float(), nullable=True),
        sa.Column("tpot_s", sa.Float(), nullable=True),
        sa.Column("request_class", sa.String(length=200), nullable=True),
        sa.Column("deployment_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["deployment_id"],
            ["deployments.id"],
            name=op.f("fk_request_log_deployment_id_deployments"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_log")),
    )
    op.create_index(op.f("ix_request_log_arrival_at"), "request_log", ["arrival_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_request_log_arrival_at"), table_name="request_log")
    op.drop_table("request_log")
    op.drop_index(op.f("ix_job_runs_job_id"), table_name="job_runs")
    op.drop_table("job_runs")
    op.drop_index(op.f("ix_deployments_plan_id"), table_name="deployments")
    op.drop_table("deployments")
    op.drop_index(op.f("ix_solve_jobs_status"), table_name="solve_jobs")
    op.drop_table("solve_jobs")
    op.drop_index(op.f("ix_simulations_plan_id"), table_name="simulations")
    op.drop_table("simulations")
    op.drop_index(op.f("ix_jobs_scenario_id"), table_name="jobs")
    op.drop_table("jobs")
    op.drop_index("ix_plans_scenario_name_created_at", table_name="plans")
    op.drop_index(op.f("ix_plans_scenario_id"), table_name="plans")
    op.drop_index(op.f("ix_plans_objective"), table_name="plans")
    op.drop_index(op.f("ix_plans_created_at"), table_name="plans")
    op.drop_index(op.f("ix_plans_cost_usd_per_h"), table_name="plans")
    op.drop_index(op.f("ix_plans_bcr_requests_per_usd"), table_name="plans")
    op.drop_table("plans")
    op.drop_table("scenarios")
    op.drop_table("chips")
    op.drop_index(op.f("ix_chip_profiles_chip"), table_name="chip_profiles")
    op.drop_table("chip_profiles")
