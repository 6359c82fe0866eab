"""Headless Chromium for the console's browser tests and screenshots: Debian's ``chromium``
(``make browser`` installs it) driven by Playwright's Python API, which is pointed at that binary;
nothing is downloaded (Playwright's own browser builds are never installed or used).

``open_browser()`` gives a fresh browser context on a new empty profile (``http_credentials``: the
user name and password it answers a Basic login with, as a user types them), or raises
BrowserUnavailable with the reason (no chromium, no playwright, or chromium does not start), which
the tests turn into a skip that prints it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# What this machine's closed network needs (no background connections, no QUIC, no updates) and
# what running as root in a container needs (no sandbox, no GPU).
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")
VIEWPORT = {"width": 1280, "height": 860}


class BrowserUnavailable(RuntimeError):
    pass


def chromium_path() -> str:
    found = os.environ.get("ROCKETBOX_CHROMIUM") or next(
        (path for path in CHROMIUM_CANDIDATES if os.access(path, os.X_OK)), None) or shutil.which("chromium")
    if not found:
        raise BrowserUnavailable("Debian's chromium is not installed (make browser installs it: "
                                 "apt-get install chromium)")
    return found


@contextlib.contextmanager
def open_browser(http_credentials: dict | None = None):
    """A Playwright BrowserContext of Debian's chromium on a fresh profile directory (removed after)."""
    executable = chromium_path()
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise BrowserUnavailable(f"the playwright package is missing ({exc}): make install") from None
    profile = tempfile.mkdtemp(prefix="rocketbox-chromium-")
    try:
        with sync_playwright() as playwright:
            try:
                # Playwright makes the profile itself when launched without one; the persistent form
                # is how a directory of our own (new and empty) is given to it.
                context = playwright.chromium.launch_persistent_context(
                    profile, executable_path=executable, headless=True, args=list(CHROMIUM_FLAGS),
                    viewport=VIEWPORT, timeout=60_000, http_credentials=http_credentials)
            except PlaywrightError as exc:
                raise BrowserUnavailable(f"{executable} did not start: {str(exc).splitlines()[0]}") from None
            try:
                context.set_default_timeout(30_000)
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
