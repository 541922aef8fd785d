"""Initial schema: meta, tenants, tokens, jobs, events, allocations, checkpoints, policy.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("meta", sa.Column("key", sa.String(64), primary_key=True), sa.Column("value", sa.Text(), nullable=False))
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("max_gpus", sa.Float(), nullable=True),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("created", sa.Float(), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("tenant_id", sa.Integer(), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False, unique=True),
        sa.Column("created", sa.Float(), nullable=False),
    )
    op.create_index("ix_tokens_tenant_id", "tokens", ["tenant_id"])
    op.create_table(
        "jobs",
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("tenant_id", sa.Integer(), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("pending_reason", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("submit_time", sa.Float(), nullable=False),
        sa.Column("start_time", sa.Float(), nullable=True),
        sa.Column("end_time", sa.Float(), nullable=True),
        sa.Column("iterations", sa.Float(), nullable=False),
        sa.Column("total_iterations", sa.Integer(), nullable=True),
        sa.Column("gpus", sa.Float(), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("hold_requested", sa.Boolean(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_jobs_tenant_idem"),
    )
    op.create_index("ix_jobs_name", "jobs", ["name"])
    op.create_index("ix_jobs_state_seq", "jobs", ["state", "seq"])
    op.create_index("ix_jobs_tenant_seq", "jobs", ["tenant_id", "seq"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("job", sa.String(64), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
    )
    op.create_index("ix_events_job", "events", ["job"])
    op.create_table(
        "allocations",
        sa.Column("job_seq", sa.Integer(), sa.ForeignKey("jobs.seq"), primary_key=True),
        sa.Column("nodes", sa.JSON(), nullable=False),
        sa.Column("alloc", sa.JSON(), nullable=False),
        sa.Column("pids", sa.JSON(), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
        sa.Column("from_checkpoint", sa.Boolean(), nullable=False),
    )
    op.create_table(
        "checkpoints",
        sa.Column("job_seq", sa.Integer(), sa.ForeignKey("jobs.seq"), primary_key=True),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
    )
    op.create_table(
        "policy",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("spec", sa.String(200), nullable=False),
        sa.Column("updated", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    for name in ("policy", "checkpoints", "allocations", "events", "jobs", "tokens", "tenants", "meta"):
        op.drop_table(name)
