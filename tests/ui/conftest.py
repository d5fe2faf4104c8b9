"""Fixtures of the UI tests: one live deployment (webserver + daemon) per module, a headless
Chromium, and ``screenshot(step)`` saving ``<repo>/.ui-screenshots/<test name>-<step>.png``.

Playwright is imported inside the fixtures: ``test_ui.py`` skips itself first when playwright or
Chromium is missing, so these fixtures never run without them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipelines.definitions import REPO_ROOT
from pipelines.target import SENSOR_INTERVAL_ENV
from tests.support.live_dagster import LiveDagster

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# Debian's chromium (`make test` installs it when missing); playwright's own download is not used.
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = REPO_ROOT / ".ui-screenshots"
# Sensor ticks every 5 s: the compaction a day's five commits make due is requested within seconds.
SENSOR_INTERVAL_S = 5
# Playwright's default wait for a locator or a navigation: the webserver of a busy 2-core machine
# answers the asset page's queries in tens of seconds while runs start next to it.
UI_TIMEOUT_MS = 90_000
VIEWPORT = {"width": 1600, "height": 1000}

Screenshot = Callable[[str], Path]


@pytest.fixture(scope="module")
def dagster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDagster]:
    """The project's ``workspace.yaml`` served by a webserver and a daemon on a temp instance and
    warehouse (about 30 s to start); stopped, with every process it spawned, after the module."""
    root = tmp_path_factory.mktemp("ui")
    yield from served(LiveDagster(root, warehouse=str(root / "warehouse"),
                                  env={SENSOR_INTERVAL_ENV: str(SENSOR_INTERVAL_S)}))


def served(deployment: LiveDagster) -> Iterator[LiveDagster]:
    """Start ``deployment``, yield it, and stop it with every process it spawned (a module fixture's body)."""
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()
    assert not deployment.group_alive(), "a process of the deployment outlived stop()"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    assert executable is not None, "test_ui.py skips itself without chromium"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(executable), headless=True,
                                              args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so ``page`` can tell whether its test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context per test; a failed test leaves ``<test name>-failure.png``."""
    from playwright.sync_api import expect

    # Assertions wait as long as actions do: a busy machine renders slowly, it is not wrong.
    expect.set_options(timeout=UI_TIMEOUT_MS)
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(UI_TIMEOUT_MS)
    context.set_default_navigation_timeout(UI_TIMEOUT_MS)
    tab = context.new_page()
    try:
        yield tab
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            tab.screenshot(path=str(screenshot_path(request.node.name, "failure")), full_page=True)
    finally:
        context.close()


def screenshot_path(test_name: str, step: str) -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', test_name)}-{step}.png"


@pytest.fixture
def screenshot(page: Page, request: pytest.FixtureRequest) -> Screenshot:
    """``screenshot(step)``: the whole page as ``.ui-screenshots/<test name>-<step>.png``."""
    for old in SCREENSHOTS.glob(f"{request.node.name}-*.png"):
        old.unlink()

    def take(step: str) -> Path:
        path = screenshot_path(request.node.name, step)
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def chromium_path() -> Path | None:
    """Debian's chromium, else one on ``$PATH``, else None."""
    if CHROMIUM.exists():
        return CHROMIUM
    found = shutil.which("chromium")
    return Path(found) if found else None


def skip_without_browser() -> None:
    """Skip the calling test module (at import) when playwright or chromium is missing."""
    try:
        import playwright.sync_api  # noqa: F401 - only whether it imports
    except ImportError:  # pragma: no cover - depends on the environment
        pytest.skip("UI tests need playwright (pip install 'playwright==1.65.2'); SKIPPED", allow_module_level=True)
    if chromium_path() is None:  # pragma: no cover - depends on the environment
        pytest.skip("UI tests need chromium (/usr/bin/chromium: `apt-get install chromium`); SKIPPED",
                    allow_module_level=True)
