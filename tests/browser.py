"""Find a Chromium for the browser tests, installing one if there is none.

``make test`` runs ``python tests/browser.py`` before any test, so that a machine without a
browser either gets one or stops at once with one message, instead of failing the browser
tests twenty minutes later. The order:

1. ``$NNAPPROX_CHROMIUM`` (an executable path);
2. a system Chromium or Chrome on ``PATH`` (``chromium``, ``chromium-browser``,
   ``google-chrome``, ``google-chrome-stable``);
3. Playwright's own Chromium, if ``playwright install chromium`` has been run;
4. otherwise install one: ``apt-get install chromium`` when running as root on Debian or
   Ubuntu, else ``python -m playwright install chromium`` where Playwright's download works.

``find_browser()`` (steps 1-3, nothing installed) is what the browser tests call.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HELP = (
    "No Chromium or Chrome was found and none could be installed. Install one and run "
    "`make test` again: on Debian/Ubuntu `sudo apt-get install chromium` "
    "(Ubuntu: `chromium-browser`), on macOS `brew install --cask chromium`, or point "
    "NNAPPROX_CHROMIUM at a Chromium/Chrome executable."
)


def _playwright_chromium() -> str | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:  # noqa: BLE001 - a broken Playwright install counts as none
        return None
    return path if path and Path(path).is_file() else None


def find_browser() -> str | None:
    """The first usable browser executable in the order of the module docstring, or ``None``."""
    forced = os.environ.get("NNAPPROX_CHROMIUM")
    if forced:
        if not (Path(forced).is_file() and os.access(forced, os.X_OK)):
            raise SystemExit(f"NNAPPROX_CHROMIUM={forced!r} is not an executable file. {HELP}")
        return forced
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return _playwright_chromium()


def _run(cmd: list[str], timeout: float) -> bool:
    print("browser: running " + " ".join(cmd), flush=True)
    try:
        return subprocess.run(cmd, timeout=timeout, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                              stdout=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def install_browser() -> None:
    """Try the installers of the module docstring, quietly; never raises."""
    debian = Path("/etc/debian_version").exists()
    if debian and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        for package in ("chromium", "chromium-browser"):
            if _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package], 900):
                return
        if _run(["apt-get", "update", "-qq"], 600):
            for package in ("chromium", "chromium-browser"):
                if _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", package], 900):
                    return
    _run([sys.executable, "-m", "playwright", "install", "chromium"], 600)


def main() -> int:
    path = find_browser()
    if path is None:
        install_browser()
        path = find_browser()
    if path is None:
        print(HELP, file=sys.stderr)
        return 1
    print(f"browser: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
