"""Alembic migrations of the placer database (run programmatically by db.migrate)."""
