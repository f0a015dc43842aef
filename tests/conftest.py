"""Shared test configuration.

Under pytest every jaxtyping annotation of the mathematical modules of ``nnapprox`` is
checked at run time (shapes and dtypes, via beartype). The hook stays installed for the
whole session and must be installed before those modules are first imported. The runtime
contract (``nnapprox.runtime``, ``nnapprox.claims``) validates its own input and is not
hooked, so its tests see the same errors a chapter sees.
"""

import os

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
