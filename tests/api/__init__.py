"""Tests of the REST API (placer.api)."""
