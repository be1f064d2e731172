"""profiler package."""
