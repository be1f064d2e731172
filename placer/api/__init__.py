"""The placer REST API (FastAPI): ``create_app(Settings(...))``; served by ``placer serve``."""

from placer.api.app import create_app
from placer.api.settings import Settings

__all__ = ["Settings", "create_app"]
