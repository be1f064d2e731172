"""The placer REST API (FastAPI): ``create_app(Settings(...))``; served by ``placer serve``."""

from placer.service.api.app import create_app
from placer.settings import Settings

__all__ = ["Settings", "create_app"]
