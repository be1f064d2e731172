"""Tests of scheduled replanning (placer.service.jobs)."""
