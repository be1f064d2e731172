"""The service layer: REST API, replanning jobs, dashboard and their commands.

The only part of `placer` that imports `db`; the planner library never imports this.
"""
