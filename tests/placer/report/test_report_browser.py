"""The report opened from disk in a real headless Chromium: it fetches nothing from the
network, every figure renders. A screenshot goes to test-artifacts/report/."""

from __future__ import annotations

import pytest

from tests.placer.service.dashboard.support import artifact, browser_missing, chromium

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")


def test_the_report_renders_offline_with_every_figure(full_report):
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, offline=True)
        page = context.new_page()
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(full_report.html_path.as_uri())
        page.wait_for_load_state("load")
        assert all(url.startswith(("file:", "data:")) for url in requested), requested
        images = page.locator("img.figure")
        assert images.count() == 7
        widths = images.evaluate_all("els => els.map(e => e.complete ? e.naturalWidth : 0)")
        assert all(w > 500 for w in widths), widths
        diagram = page.locator("#plan-diagram + figure svg")
        assert diagram.is_visible() and diagram.bounding_box()["width"] > 600
        assert "H100-SXM" in " ".join(diagram.locator("text").all_text_contents())
        assert page.locator("#why-list li").count() >= 2 and page.locator("#headline").is_visible()
        assert "req/s" in page.inner_text("#headline")
        page.screenshot(path=artifact("report", "report.png"), full_page=True)
        context.close()
