"""Tests of scheduled replanning (placer.jobs)."""
