"""Shared test configuration.

Under pytest every jaxtyping annotation of the mathematical modules of ``nnapprox`` is
checked at run time (shapes and dtypes, via beartype). The hook stays installed for the
whole session and must be installed before those modules are first imported. The runtime
contract (``nnapprox.runtime``, ``nnapprox.claims``) validates its own input and is not
hooked, so its tests see the same errors a chapter sees.
"""

import os

import pytest
from jaxtyping import install_import_hook

os.environ.setdefault("NNAPPROX_STATIC", "1")

# one entry per topic subpackage / top-level mathematical module
CHECKED_MODULES = [
    "nnapprox.composition",
    "nnapprox.universal",
    "nnapprox.depth",
    "nnapprox.icl",
    "nnapprox.diffusion",
    "nnapprox.scaling",
    "nnapprox.failures",
]
_HOOK = install_import_hook(CHECKED_MODULES, "beartype.beartype")


# Run order: fast library tests first, then the chapters (which also fill the book's
# execution cache), then the assignments, then the book build and browser checks.
_ORDER = {"chapter": 1, "assignments": 2, "book": 3}

# Under pytest-xdist (``make test`` runs ``-n JOBS --dist loadgroup``) the tests of one group
# run on one worker: the assignments share one build of every assignment (a session fixture
# that each worker would otherwise repeat), and the book's tests share one build of the book.
# The book group must also run after every chapter (it is built from their executions), so
# ``make test`` runs it in a second, serial pytest run; every other test is free to spread.
_XDIST_GROUPS = ("assignments", "book")


def pytest_collection_modifyitems(config, items):
    def rank(item):
        return min((_ORDER[m.name] for m in item.iter_markers() if m.name in _ORDER), default=0)

    items.sort(key=rank)  # stable: keeps the file order within each group
    if not config.pluginmanager.hasplugin("xdist"):  # e.g. JOBS=1 (-p no:xdist)
        return
    for item in items:
        group = next((m.name for m in item.iter_markers() if m.name in _XDIST_GROUPS), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
