"""Claims: every quantitative sentence of a chapter, checked, and honest about what it is.

A chapter records each number its text states as a *claim*: a measured ``value``, a
comparison ``op`` and a ``threshold`` whose ``source`` is named next to it. Every claim
also says what *kind* of statement it is:

``exact``
    An identity or a construction check (the sawtooth network equals the iterated tent map,
    Parseval, a layer built to stretch by exactly K stretches by K). It can fail only through
    a bug: it guards the code, it is not a finding.
``bound``
    A proven inequality evaluated on this run (e.g. a worst-case error bound with the
    network's error measured on held-out points). The source names the theorem.
``empirical``
    A statement about a random or trained experiment that could come out otherwise. Its
    threshold needs a ``basis``:

    ``paper``        the paper states this number (the source names the table, figure or
                     equation and the number);
    ``derived``      a formula the chapter derives (the source says where);
    ``statistical``  k standard errors from this run's own repeats: the claim records ``se``
                     (the standard error, from the run) and ``k`` (fixed before running, at
                     least :data:`K_MIN`, so that a correct run fails with probability below
                     1e-3 per claim under a normal approximation);
    ``convention``   a named convention (a rank-correlation cutoff, "within 5 %"), said as
                     such in the text.

At the end the chapter calls ``run.report()``, which

1. shows the claims as a table, grouped: empirical claims first, then bounds, then exact
   checks, under a header such as "14 empirical · 6 bounds · 9 exact checks, all hold";
2. writes ``$NNAPPROX_CLAIMS_DIR/<chapter>.json`` when that variable is set, and
3. raises :class:`ClaimError` if any claim failed, or if the chapter recorded none.

JSON record
-----------
An object with ``chapter``, ``profile``, ``device``, ``seed``, ``seconds``, ``finished`` and
``claims``: a list of objects with ``name``, ``value``, ``op``, ``threshold``, ``source``,
``passed``, ``kind`` and, where they apply, ``basis``, ``se``, ``k``, ``tol``, ``note``. A
record written before kinds existed has no ``kind``; :func:`claim_kind` reads it as
``"unclassified"``.
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
KINDS = ("empirical", "bound", "exact")
BASES = ("paper", "derived", "statistical", "convention")
K_MIN = 3.09
"""Smallest ``k`` of a statistical claim: the one-sided normal quantile of 1e-3."""
_KIND_LABEL = {"empirical": ("empirical", "empirical"), "bound": ("bound", "bounds"),
               "exact": ("exact check", "exact checks"), "unclassified": ("unclassified", "unclassified")}


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
    kind: str = "unclassified"
    basis: str | None = None
    se: float | None = None
    k: float | None = None
    tol: float | None = None
    note: str | None = None

    def text(self) -> str:
        thr = f"[{self.threshold[0]:.4g}, {self.threshold[1]:.4g}]" if self.op == "in" else _fmt(self.threshold)
        tol = f" ± {self.tol:.1e}" if self.tol else ""
        se = f" (k = {self.k:g} s.e., s.e. {_fmt(self.se)})" if self.se is not None else ""
        return f"{_fmt(self.value)} {self.op} {thr}{tol}{se}"

    def label(self) -> str:
        """``empirical (paper)``, ``bound``, ``exact check``: what the claim is."""
        return claim_label(asdict(self))


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
        kind: str,
        source: str,
        basis: str | None = None,
        se: float | None = None,
        k: float | None = None,
        tol: float | None = None,
        note: str | None = None,
    ) -> bool:
        """Record ``value op threshold`` under ``name``; return whether it holds.

        ``kind`` is ``"exact"``, ``"bound"`` or ``"empirical"``; an empirical claim needs a
        ``basis`` (``"paper"``, ``"derived"``, ``"statistical"``, ``"convention"``), and a
        statistical one its standard error ``se`` (from this run) and ``k >= K_MIN`` (fixed
        before running). ``source`` says where the threshold comes from and is required.
        Every rule is checked here, before the comparison, with a message naming what is valid.
        """
        if not isinstance(name, str) or not name:
            raise ValueError("a claim needs a non-empty name")
        if any(c.name == name for c in self.records):
            raise ValueError(f"claim {name!r} was already recorded in this run")
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"claim {name!r} needs a source for its threshold")
        _validate_kind(name, kind, basis, se, k)
        if op == "in" and (not isinstance(threshold, Sequence) or len(threshold) != 2):
            raise ValueError(f"claim {name!r}: op 'in' takes threshold=(lo, hi)")
        value = _plain(value)
        threshold = _plain(threshold)
        passed = compare(value, op, threshold, tol or 0.0)
        claim = Claim(name, value, op, threshold, source, passed, kind, basis,
                      None if se is None else float(se), None if k is None else float(k), tol, note)
        self.records.append(claim)
        mark = "PASS" if passed else "FAIL"
        print(f"[claim {mark}] {name}: {claim.text()}   [{claim.label()}; {source}]")
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
        return claims_html([asdict(c) for c in self.records])

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
    records = [asdict(c) for c in claims.records]
    head = (
        f"{chapter}: {summary(records)} "
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
    for c in sorted_claims(records):
        print(f"  {'PASS' if c['passed'] else 'FAIL'}  [{claim_label(c)}] {c['name']}: "
              f"{Claim(**_claim_fields(c)).text()}  ({c['source']})")


# --------------------------------------------------------------------------- kinds
def _validate_kind(name: str, kind: Any, basis: Any, se: Any, k: Any) -> None:
    """Raise ``ValueError`` unless kind/basis/se/k follow the rules of the module docstring."""
    if kind not in KINDS:
        raise ValueError(f"claim {name!r}: unknown kind {kind!r}: valid kinds are {', '.join(map(repr, KINDS))}")
    if kind != "empirical":
        if basis is not None or se is not None or k is not None:
            raise ValueError(
                f"claim {name!r}: basis, se and k belong to empirical claims only; "
                f"a {kind!r} claim is justified by its source"
            )
        return
    if basis is None:
        raise ValueError(
            f"claim {name!r}: an empirical claim needs basis=, one of {', '.join(map(repr, BASES))}"
        )
    if basis not in BASES:
        raise ValueError(f"claim {name!r}: unknown basis {basis!r}: valid bases are {', '.join(map(repr, BASES))}")
    if basis == "statistical":
        if se is None or k is None:
            raise ValueError(
                f"claim {name!r}: a statistical claim records se= (its standard error from this run) "
                f"and k= (standard errors, fixed before running, at least {K_MIN})"
            )
        se_f, k_f = float(_plain(se)), float(_plain(k))
        if not (math.isfinite(se_f) and se_f >= 0):
            raise ValueError(f"claim {name!r}: se must be a finite non-negative number, got {se!r}")
        if not (math.isfinite(k_f) and k_f >= K_MIN):
            raise ValueError(
                f"claim {name!r}: k = {k!r} standard errors is too few: a statistical threshold needs "
                f"k >= {K_MIN} (failure probability below 1e-3 per claim)"
            )
    elif se is not None or k is not None:
        raise ValueError(f"claim {name!r}: se and k belong to statistical claims (basis='statistical') only")


def claim_kind(c: dict) -> str:
    """The kind of a claim read from a JSON record; records older than kinds are ``unclassified``."""
    kind = c.get("kind")
    return kind if kind in KINDS else "unclassified"


def claim_label(c: dict) -> str:
    """``empirical (paper)``, ``bound``, ``exact check`` or ``unclassified``."""
    kind = claim_kind(c)
    word = _KIND_LABEL[kind][0]
    return f"{word} ({c['basis']})" if kind == "empirical" and c.get("basis") else word


def sorted_claims(claims: Sequence[dict]) -> list[dict]:
    """Claims grouped empirical, bound, exact, unclassified; recording order inside a group."""
    order = {k: i for i, k in enumerate(KINDS + ("unclassified",))}
    return sorted(claims, key=lambda c: order[claim_kind(c)])


def summary(claims: Sequence[dict]) -> str:
    """``"14 empirical · 6 bounds · 9 exact checks, all hold"`` (or ``", 2 fail: ..."``)."""
    counts = {k: 0 for k in KINDS + ("unclassified",)}
    for c in claims:
        counts[claim_kind(c)] += 1
    parts = [f"{n} {_KIND_LABEL[k][0] if n == 1 else _KIND_LABEL[k][1]}" for k, n in counts.items() if n]
    failed = [c for c in claims if not c.get("passed")]
    if not claims:
        return "no claims"
    verdict = "all hold" if not failed else f"{len(failed)} of {len(claims)} fail"
    return " · ".join(parts) + ", " + verdict


def claims_html(claims: Sequence[dict]) -> str:
    """The claims as an HTML table, grouped by kind, with a word (not a glyph) for pass/fail."""
    groups = []
    current = None
    for c in sorted_claims(claims):
        kind = claim_kind(c)
        if kind != current:
            current = kind
            groups.append(
                f'<tr class="nnapprox-kind"><th colspan="4">{html.escape(_KIND_LABEL[kind][1])}</th></tr>'
            )
        ok = bool(c.get("passed"))
        groups.append(
            "<tr><td class=\"{}\">{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>".format(
                "nnapprox-pass" if ok else "nnapprox-fail", "holds" if ok else "FAILS",
                html.escape(c["name"]), html.escape(Claim(**_claim_fields(c)).text()),
                html.escape(f"{claim_label(c)}: {c['source']}"),
            )
        )
    return (
        '<table class="nnapprox-claims"><thead><tr><th></th><th>claim</th>'
        "<th>measured vs threshold</th><th>kind and source of the threshold</th></tr></thead>"
        f"<tbody>{''.join(groups)}</tbody></table>"
    )


def _claim_fields(c: dict) -> dict:
    """The fields of :class:`Claim` present in a JSON claim (older records lack some)."""
    names = Claim.__dataclass_fields__
    fields = {k: v for k, v in c.items() if k in names}
    fields["kind"] = claim_kind(c)
    return fields
