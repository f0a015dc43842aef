"""Progress bars and interactive explorers that behave in all three places a chapter runs.

* live in Jupyter: a widget progress bar and ipywidgets sliders;
* under the test harness or the book build (``NNAPPROX_STATIC=1``): a plain text bar on
  stderr that updates rarely, and the explorer drawn once at its default values, so the
  static HTML book shows a precomputed figure and needs no widget JavaScript.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable


def static_mode() -> bool:
    """True under the test harness and the book build (``NNAPPROX_STATIC`` set and not ``0``)."""
    return os.environ.get("NNAPPROX_STATIC", "0") not in ("", "0")


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
