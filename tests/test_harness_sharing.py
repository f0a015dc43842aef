"""The chapter harness's hang guard grows with the number of runs that share the cores."""

import os

import harness


def test_sharing_counts_xdist_workers_and_threads(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert harness.sharing() == 1
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    assert harness.sharing() == 3
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    cores = os.cpu_count() or 1
    assert harness.sharing(threads=1) == cores
    assert harness.sharing(threads=cores) == 1
