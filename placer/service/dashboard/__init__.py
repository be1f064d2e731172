"""The dashboard: server-rendered pages over the service's database (see README.md here).

Public surface: :func:`mount` (adds the pages and their stylesheet to a FastAPI app made
by :func:`placer.service.api.create_app`) and :data:`router`. The views are loaded when
mounted: they use the API's session dependency, and the API's app factory imports this
package, so loading them here at import time would be a cycle.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


def mount(app, *, public: bool = False) -> None:
    """Serve the dashboard from ``app`` (idempotent).

    ``public``: serve the pages without the token (read-only pages on a trusted network).
    """
    if getattr(app.state, "dashboard_mounted", False):
        app.state.dashboard_public = public  # mounted by the app factory: only the access changes
        return

    from placer.service.dashboard.views import router

    app.state.dashboard_mounted = True
    app.state.dashboard_public = public
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="dashboard-static")


def __getattr__(name: str):
    if name == "router":
        from placer.service.dashboard.views import router

        return router
    raise AttributeError(name)


__all__ = ["mount", "router"]
