"""placer package."""
