"""Pictures of plans: the plan diagram, charts against baselines and simulations, and a
self-contained HTML report (see README.md beside this file).

Public surface: :func:`build_report`, :func:`plan_diagram`, :func:`inline_svg`.
matplotlib and jinja2 are imported only when a figure or page is made.
"""

from placer.report.build import Report, build_report
from placer.report.diagram import plan_diagram
from placer.report.figures import inline_svg

__all__ = ["Report", "build_report", "inline_svg", "plan_diagram"]
