"""How `make test` finds its browser, and the one message when there is none."""

import pytest

import browser


def test_forced_path_must_be_an_executable(monkeypatch, tmp_path):
    monkeypatch.setenv("NNAPPROX_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(SystemExit, match="not an executable file.*apt-get install chromium"):
        browser.find_browser()
    exe = tmp_path / "chromium"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("NNAPPROX_CHROMIUM", str(exe))
    assert browser.find_browser() == str(exe)


def test_system_browser_before_playwright(monkeypatch, tmp_path):
    monkeypatch.delenv("NNAPPROX_CHROMIUM", raising=False)
    exe = tmp_path / "google-chrome"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(browser, "_playwright_chromium", lambda: "/playwright/chrome")
    assert browser.find_browser() == str(exe)
    exe.unlink()
    assert browser.find_browser() == "/playwright/chrome"


def test_no_browser_stops_with_one_message(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(browser, "find_browser", lambda: None)
    monkeypatch.setattr(browser, "install_browser", lambda: calls.append("install"))
    assert browser.main() == 1
    assert calls == ["install"]  # it tried to install one first
    err = capsys.readouterr().err
    assert "No Chromium or Chrome was found" in err and "NNAPPROX_CHROMIUM" in err
