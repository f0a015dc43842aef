"""Progress bars and interactive explorers that behave in all three places a chapter runs.

* live in Jupyter: a widget progress bar and ipywidgets sliders;
* wherever no one can move a slider: a plain text bar on stderr that updates rarely, and the
  explorer drawn once at its default values, so the static HTML book shows a precomputed
  figure and needs no widget JavaScript. That is the case under the test harness and the book
  build (``NNAPPROX_STATIC=1``), and also, with no variable set, whenever the code runs
  outside a Jupyter kernel or in a kernel driven by a non-interactive client: papermill,
  nbclient and myst-nb execute cells with ``allow_stdin=False``, while Jupyter front ends
  (JupyterLab, Notebook, VS Code, Colab) send ``allow_stdin=True``. A live ``interact``
  under papermill can leave the kernel waiting for a front end that never answers.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable


def static_mode() -> bool:
    """True unless a person at a Jupyter front end can use widgets (see the module docstring).

    ``NNAPPROX_STATIC`` set to anything but ``0`` forces static mode; otherwise static mode is
    chosen when there is no IPython kernel or when the current execution request came from a
    client that cannot answer (``allow_stdin`` false: papermill, nbclient, myst-nb).
    """
    if os.environ.get("NNAPPROX_STATIC", "0") not in ("", "0"):
        return True
    return not _front_end_attached()


def _front_end_attached() -> bool:
    """Whether the running IPython kernel's current request came from an interactive front end."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is part of the book environment
        return False
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:  # plain Python or a terminal IPython: nobody to move a slider
        return False
    return bool(getattr(kernel, "_allow_stdin", False))


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str | None = None, **kw: Any):
    """A ``tqdm`` bar: a widget when live in Jupyter, a sparse text bar in static mode."""
    if static_mode():
        from tqdm.std import tqdm

        kw.setdefault("mininterval", 15.0)
        kw.setdefault("file", sys.stderr)
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, total=total, desc=desc, **kw)


def explorer(plot: Callable[..., Any], **controls: Any):
    """Interactive explorer of ``plot(**values)``.

    Each control is an ipywidgets widget (its ``value`` is the default) or a plain value
    (kept fixed). Live, this is ``ipywidgets.interact``; in static mode, or where
    ipywidgets is missing, ``plot`` is called once with the defaults, which is the figure
    the rendered book shows in the explorer's place.
    """
    defaults = {k: getattr(v, "value", v) for k, v in controls.items()}
    if static_mode():
        return plot(**defaults)
    try:
        import ipywidgets
    except ImportError:
        return plot(**defaults)
    fixed = {k: ipywidgets.fixed(v) for k, v in controls.items() if not hasattr(v, "value")}
    live = {k: v for k, v in controls.items() if hasattr(v, "value")}
    return ipywidgets.interact(plot, **live, **fixed)
