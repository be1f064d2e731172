"""Tests of the REST API (placer.service.api)."""
