"""Tests of the db package (SQLite always, PostgreSQL when PLACER_TEST_POSTGRES_URL is set)."""
