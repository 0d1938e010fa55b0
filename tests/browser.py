"""A real browser for the history site's tests: Debian's Chromium, driven by Selenium through Debian's
ChromeDriver (``.ci/install-browser`` installs both).

``browser`` (session scope) starts one headless Chromium with a fresh profile, no network services of its
own (the flags below) and ``about:blank`` as its one start page (``START_PREFS``: ChromeDriver passes no
start URL, and Chromium 150 then opens its new-tab page, whose hundred-odd ``chrome://new-tab-page/``
requests land in the same DevTools log as the test's page), and quits it at the end; it skips, with the reason, where
Chromium, ChromeDriver or Selenium is missing. Selenium is given ChromeDriver's path, so it never
runs Selenium Manager (which would look for a driver on the network). ``Page`` wraps it for a test:
open a ``file://`` page and wait until its script says it is ready, read the console's errors,
keep a screenshot as a CI artifact (under ``out/screenshots/``, or ``$DLPERF_SCREENSHOTS``).

PYTEST_DONT_REWRITE: a plugin module; its asserts carry their own messages.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["browser", "page", "Page", "CHROMIUM_FLAGS", "START_PREFS", "own_requests"]

#: How the tests start Chromium: headless, no sandbox (root in CI), no GPU, and none of its own network
#: traffic (QUIC, background networking, component updates, sync); a fresh --user-data-dir is added.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1400,1000")
#: The profile's start page: about:blank, not the new-tab page (``session.restore_on_startup`` 4 is "open
#: the URLs in ``session.startup_urls``", https://chromeenterprise.google/policies/#RestoreOnStartup).
START_PREFS = {"session.restore_on_startup": 4, "session.startup_urls": ["about:blank"],
               "homepage": "about:blank", "homepage_is_newtabpage": False}
ROOT = Path(__file__).resolve().parents[1]


def _find(names: tuple[str, ...], env: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return given if os.access(given, os.X_OK) else None
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot_folder() -> Path:
    folder = Path(os.environ.get("DLPERF_SCREENSHOTS") or ROOT / "out" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def start_chromium(chromium: str, driver: str, profile: str) -> Any:
    """A Selenium session of headless Chromium with ``profile`` as its user data folder."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_experimental_option("prefs", START_PREFS)
    # The console's messages, and the DevTools network events: what each page asked for.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(options=options, service=Service(driver))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium under Selenium, one per test process."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (the test extra)")
    chromium = _find(("chromium", "chromium-browser"), "DLPERF_CHROMIUM")
    driver = _find(("chromedriver",), "DLPERF_CHROMEDRIVER")
    if chromium is None or driver is None:
        pytest.skip("Chromium and ChromeDriver are not installed: bash .ci/install-browser installs Debian's "
                    "chromium and chromium-driver")
    profile = tempfile.mkdtemp(prefix="dlperf-chromium-")
    try:
        # Selenium Manager is not run; nor would it report anything.  Set only while the browser starts: a variable
        # left in this process's environment would give every later run of its tests a fork server of its own (the
        # servers are kept per start-time environment, pytest_dlperf/launch/forkserver.py).
        with pytest.MonkeyPatch.context() as env:
            env.setenv("SE_AVOID_STATS", "true")
            session = start_chromium(chromium, driver, profile)
    except Exception as exc:  # noqa: BLE001 - a browser that cannot start is the reason to skip, said in a line
        shutil.rmtree(profile, ignore_errors=True)
        pytest.skip(f"Chromium did not start under ChromeDriver: {str(exc).strip().splitlines()[0]}")
    try:
        pages = (len(session.window_handles), session.current_url)
        assert pages == (1, "about:blank"), \
            f"Chromium started with {pages[0]} page(s), showing {pages[1]}: expected one about:blank (START_PREFS)"
        yield session
    finally:
        session.quit()
        shutil.rmtree(profile, ignore_errors=True)


def own_requests(log: list[dict], target: str, url: str) -> list[str]:
    """The URLs that the document loaded from ``url`` in the page ``target`` asked for, itself first, from
    ChromeDriver's performance log (``log``: its entries' messages, parsed) of DevTools' Network events.

    A page's requests are that page's own: the events of its target (the entry's ``webview``, the window's
    handle) and of the document it loaded (the ``loaderId`` of the navigation request for ``url`` in the
    target's main frame), so a page that Chromium opened by itself, or the previous document still loading
    in the same tab, is never counted. A ``url`` with no navigation request in the log is an error."""
    loader, urls = None, []
    for record in log:
        message = record["message"]
        if message.get("method") != "Network.requestWillBeSent" or record.get("webview") != target:
            continue
        params = message["params"]
        asked = params["request"]["url"]
        if (loader is None and params.get("type") == "Document" and params.get("frameId") == target
                and asked.split("#")[0] == url.split("#")[0]):
            loader = params["loaderId"]
        if loader is not None and params.get("loaderId") == loader:
            urls.append(asked)
    assert loader is not None, f"no navigation request for {url} in the DevTools log of page {target}"
    return urls


class Page:
    """The browser on one page of a test."""

    def __init__(self, driver: Any, name: str):
        self.driver = driver
        self.name = name

    def open(self, path: Path | str, *, timeout: float = 30.0) -> Page:
        """Load ``path`` (a file, or a file:// URL) and wait until its script set ``body[data-ready]``."""
        url = path if isinstance(path, str) and path.startswith("file:") else Path(path).resolve().as_uri()
        self.driver.get_log("browser")  # what an earlier page said or asked for is not this one's
        self.driver.get_log("performance")
        self._url = url
        self._log: list[dict] = []
        self.driver.get(url)
        self.wait("document.body && document.body.getAttribute('data-ready') === '1'", timeout=timeout)
        return self

    def wait(self, condition: str, *, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.driver.execute_script(f"return !!({condition});"):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.driver.current_url}: not {condition} after {timeout} s; console: "
                                     f"{self.console()}")
            time.sleep(0.05)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def console(self) -> list[str]:
        """The console's messages since the last call: each ``LEVEL message``."""
        return [f"{entry['level']} {entry['message']}" for entry in self.driver.get_log("browser")]

    def requests(self) -> list[str]:
        """Every URL that the opened document asked for since it was opened (``own_requests``)."""
        import json

        self._log.extend(json.loads(entry["message"]) for entry in self.driver.get_log("performance"))
        return own_requests(self._log, self.driver.current_window_handle, self._url)

    def errors(self) -> list[str]:
        """The console's errors (a script's uncaught exception, console.error, a file that did not load)."""
        return [line for line in self.console() if line.startswith("SEVERE")]

    def screenshot(self, label: str, *, full: bool = True) -> Path:
        """Keep a screenshot of the page (the whole page's height, up to 4,000 pixels) as a CI artifact."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{self.name}-{label}").strip("-") + ".png"
        path = screenshot_folder() / name
        size = self.driver.get_window_size()
        if full:
            height = min(4000, int(self.js("return document.documentElement.scrollHeight;")))
            self.driver.set_window_size(size["width"], max(height, 600))
        try:
            self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(size["width"], size["height"])
        return path


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Page:
    """The browser, for this test (its screenshots are named after it)."""
    return Page(browser, request.node.name)
