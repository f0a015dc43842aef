"""Claims: every quantitative sentence of a chapter, checked.

A chapter records each number its text states as a *claim*: a measured ``value``, a
comparison ``op`` and a ``threshold`` whose ``source`` (a theorem, a paper's table, an exact
identity) is named next to it. At the end the chapter calls ``run.report()``, which

1. shows the claims as a table,
2. writes ``$NNAPPROX_CLAIMS_DIR/<chapter>.json`` when that variable is set, and
3. raises :class:`ClaimError` if any claim failed, or if the chapter recorded none.

The JSON record is read by the test harness and the book's status page; its format is
stable: an object with ``chapter``, ``profile``, ``device``, ``seed``, ``seconds`` and
``claims`` (a list of objects with ``name``, ``value``, ``op``, ``threshold``, ``source``,
``passed``, and optionally ``tol`` and ``note``).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

OPS = ("<", "<=", ">", ">=", "==", "in")


class ClaimError(AssertionError):
    """Raised by :meth:`Claims.report` when a claim failed or none was recorded."""


def _plain(x: Any) -> Any:
    """Convert tensors / numpy scalars / tuples to JSON-friendly Python values."""
    if hasattr(x, "tolist"):  # torch.Tensor, numpy array or scalar
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def compare(value: Any, op: str, threshold: Any, tol: float = 0.0) -> bool:
    """Evaluate ``value op threshold``; NaN never passes.

    ``==`` passes when ``|value - threshold| <= tol`` (booleans and integers compare
    exactly when ``tol == 0``); ``in`` takes ``threshold = (lo, hi)``, inclusive.
    """
    if op not in OPS:
        raise ValueError(f"unknown comparison {op!r}: valid comparisons are {', '.join(OPS)}")
    if isinstance(value, (list, tuple)):
        raise ValueError("a claim's value must be a single number or boolean; reduce it first (max, all, ...)")
    if isinstance(value, bool) or isinstance(threshold, bool):
        if op != "==":
            raise ValueError("boolean claims use op '=='")
        return bool(value) == bool(threshold)
    value = float(value)
    if math.isnan(value):
        return False
    if op == "in":
        lo, hi = threshold
        return float(lo) <= value <= float(hi)
    threshold = float(threshold)
    if op == "<":
        return value < threshold
    if op == "<=":
        return value <= threshold
    if op == ">":
        return value > threshold
    if op == ">=":
        return value >= threshold
    return abs(value - threshold) <= float(tol)


@dataclass
class Claim:
    name: str
    value: Any
    op: str
    threshold: Any
    source: str
    passed: bool
    tol: float | None = None
    note: str | None = None

    def text(self) -> str:
        thr = f"[{self.threshold[0]:.4g}, {self.threshold[1]:.4g}]" if self.op == "in" else _fmt(self.threshold)
        tol = f" ± {self.tol:.1e}" if self.tol else ""
        return f"{_fmt(self.value)} {self.op} {thr}{tol}"


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.4g}" if x == 0 or 1e-3 <= abs(x) < 1e5 else f"{x:.3e}"
    return str(x)


class Claims:
    """The claims of one chapter run (created by :func:`nnapprox.setup`)."""

    def __init__(self) -> None:
        self.records: list[Claim] = []

    def check(
        self,
        name: str,
        value: Any,
        op: str,
        threshold: Any,
        *,
        source: str,
        tol: float | None = None,
        note: str | None = None,
    ) -> bool:
        """Record ``value op threshold`` under ``name``; return whether it holds.

        ``source`` says where the threshold comes from (a theorem, a paper, an exact
        identity) and is required: a threshold without a source is not a claim.
        """
        if not isinstance(name, str) or not name:
            raise ValueError("a claim needs a non-empty name")
        if any(c.name == name for c in self.records):
            raise ValueError(f"claim {name!r} was already recorded in this run")
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"claim {name!r} needs a source for its threshold")
        if op == "in" and (not isinstance(threshold, Sequence) or len(threshold) != 2):
            raise ValueError(f"claim {name!r}: op 'in' takes threshold=(lo, hi)")
        value = _plain(value)
        threshold = _plain(threshold)
        passed = compare(value, op, threshold, tol or 0.0)
        claim = Claim(name, value, op, threshold, source, passed, tol, note)
        self.records.append(claim)
        mark = "PASS" if passed else "FAIL"
        print(f"[claim {mark}] {name}: {claim.text()}   ({source})")
        return passed

    # ------------------------------------------------------------------ reporting
    @property
    def failed(self) -> list[Claim]:
        return [c for c in self.records if not c.passed]

    def to_record(self, *, chapter: str, profile: str, device: str, seed: int, seconds: float) -> dict:
        return {
            "chapter": chapter,
            "profile": profile,
            "device": device,
            "seed": seed,
            "seconds": round(float(seconds), 3),
            "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "claims": [{k: v for k, v in asdict(c).items() if v is not None or k in ("value", "threshold")}
                       for c in self.records],
        }

    def html(self) -> str:
        rows = "".join(
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>".format(
                "✅" if c.passed else "❌", html.escape(c.name), html.escape(c.text()), html.escape(c.source)
            )
            for c in self.records
        )
        return (
            '<table class="nnapprox-claims"><thead><tr><th></th><th>claim</th>'
            "<th>measured vs threshold</th><th>source of the threshold</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )

    def report(self, *, chapter: str, profile: str, device: str, seed: int, seconds: float) -> dict:
        record = self.to_record(chapter=chapter, profile=profile, device=device, seed=seed, seconds=seconds)
        out_dir = os.environ.get("NNAPPROX_CLAIMS_DIR")
        if out_dir:
            path = Path(out_dir) / f"{chapter}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record, indent=1) + "\n")
        _display(self, chapter, profile, device, seed, seconds)
        if not self.records:
            raise ClaimError(f"chapter {chapter!r} recorded no claim: every chapter must check what it states")
        if self.failed:
            names = "; ".join(f"{c.name} ({c.text()})" for c in self.failed)
            raise ClaimError(f"{len(self.failed)} of {len(self.records)} claims failed in {chapter!r}: {names}")
        return record


def _display(claims: Claims, chapter: str, profile: str, device: str, seed: int, seconds: float) -> None:
    n_pass = sum(c.passed for c in claims.records)
    head = (
        f"{chapter}: {n_pass}/{len(claims.records)} claims hold "
        f"(profile {profile}, device {device}, seed {seed}, {seconds:.1f} s)"
    )
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        if get_ipython() is not None:
            display(HTML(f"<p><strong>{html.escape(head)}</strong></p>" + claims.html()))
            return
    except ImportError:  # pragma: no cover - IPython is always there in the book env
        pass
    print(head)
    for c in claims.records:
        print(f"  {'PASS' if c.passed else 'FAIL'}  {c.name}: {c.text()}  ({c.source})")
