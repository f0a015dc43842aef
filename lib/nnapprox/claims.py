"""Claims: every quantitative sentence of a chapter, checked, and honest about what it is.

A chapter records each number its text states as a *claim*: a measured ``value``, a
comparison ``op`` and a ``threshold`` whose ``source`` is named next to it. Every claim
also says what *kind* of statement it is:

``empirical``
    A *finding*: a statement about a random or trained experiment that could come out
    otherwise. Its threshold needs a ``basis``:

    ``paper``        the paper states this number (the source names the table, figure or
                     equation and the number);
    ``derived``      a formula the chapter derives (the source says where);
    ``statistical``  k standard errors from this run's own repeats: the claim records ``se``
                     (the standard error, from the run) and ``k`` (fixed before running, at
                     least :data:`K_MIN`, so that a correct run fails with probability below
                     1e-3 per claim under a normal approximation);
    ``convention``   a named convention (a rank-correlation cutoff, "within 5 %"), said as
                     such in the text.
``bound``
    A proven inequality evaluated on this run, with a threshold that does not use the
    quantity it bounds (e.g. a worst-case error bound with the network's error measured on
    independent held-out points). The source names the theorem.
``exact``
    An exact construction or identity (the sawtooth network equals the iterated tent map,
    Parseval). It can fail only through a bug: it guards the code.
``guard``
    Any other check that holds for every input when the code is right: a tautology,
    "holds by construction", or an *a-posteriori certificate* computed from the very quantity
    it bounds (a network's error bounded through its own measured error). A Monte Carlo check
    of a formula the chapter proves is a guard too.

The rules, each enforced when the claim is recorded (a ``ValueError`` names what is valid):

1. **Findings discriminate.** An empirical claim names its ``foil=(label, value)``: the
   simplest alternative a skeptic would offer (the best fixed baseline, least squares, the
   untrained network, shuffled labels, the model without the mechanism, a map that expands
   instead of contracting), with the *same statistic* computed on it. The same comparison is
   applied to the foil's value; if the foil passes too, the claim **fails** with "does not
   discriminate: <label> also passes (<value>)". A bound takes a foil too, or says why it
   has none in ``no_foil="..."``; exact checks and guards take no foil (their kind is the
   reason). Chapters not yet moved to this contract are listed in :data:`SECOND_EDITION`:
   there a finding without a foil is recorded with the foil marked "not yet named".
2. **Guards are not evidence.** Exact checks and guards are run and recorded, and shown in a
   collapsed "code checks" table; they are not counted among the findings.
3. **Training-run error.** A claim about what *training* finds gives ``training_runs=n``, the
   number of independent training runs (initialisation and data order) behind it. A
   statistical claim needs ``n >= TRAINING_RUNS_MIN`` with its ``se`` across those runs; with
   fewer runs the basis is not statistical and the name says how many ("one training run").
4. **Frozen before fresh seeds.** Each chapter's claims (name, kind, basis, op, threshold or
   its formula, k, foil) are frozen in ``book/claims.lock`` (``tests/lock.py``); the test
   suite fails when a chapter records claims that differ from it, and validation seeds
   disjoint from the design seeds 0-9 are run once per locked revision.

At the end the chapter calls ``run.report()``, which

1. shows a one-line summary, with the findings (and their foils) and the code checks in two
   collapsed tables;
2. writes ``$NNAPPROX_CLAIMS_DIR/<chapter>.json`` when that variable is set, and
3. raises :class:`ClaimError` if any claim failed, or if the chapter recorded none.

:meth:`Claims.section_status` gives the one-line status that closes a section ("2 findings
hold; their foils fail") for the claims recorded since the previous call.

JSON record
-----------
An object with ``chapter``, ``profile``, ``device``, ``seed``, ``seconds``, ``finished`` and
``claims``: a list of objects with ``name``, ``value``, ``op``, ``threshold``, ``source``,
``passed``, ``kind`` and, where they apply, ``basis``, ``se``, ``k``, ``tol``, ``note``,
``foil``, ``foil_value``, ``foil_passed``, ``no_foil``, ``training_runs``. A record written
before kinds existed has no ``kind``; :func:`claim_kind` reads it as ``"unclassified"``.
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
KINDS = ("empirical", "bound", "exact", "guard")
FINDING_KINDS = ("empirical", "bound")
"""Kinds shown as findings; the others are code checks (collapsed, not counted as evidence)."""
BASES = ("paper", "derived", "statistical", "convention")
K_MIN = 3.09
"""Smallest ``k`` of a statistical claim: the one-sided normal quantile of 1e-3."""
TRAINING_RUNS_MIN = 5
"""Fewest independent training runs behind a statistical claim about what training finds."""
SECOND_EDITION = {
    "depth": 38, "failures": 38, "icl": 39, "diffusion": 40, "scaling": 41,
    "sequential": 41,
}
"""Chapters whose findings do not yet all name a foil, with the issue that moves them (rule 1)."""
_KIND_LABEL = {"empirical": ("empirical", "empirical"), "bound": ("bound", "bounds"),
               "exact": ("exact check", "exact checks"), "guard": ("guard", "guards"),
               "unclassified": ("unclassified", "unclassified")}


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
    foil: str | None = None
    foil_value: Any = None
    foil_passed: bool | None = None
    no_foil: str | None = None
    training_runs: int | None = None

    def text(self) -> str:
        thr = f"[{self.threshold[0]:.4g}, {self.threshold[1]:.4g}]" if self.op == "in" else _fmt(self.threshold)
        tol = f" ± {self.tol:.1e}" if self.tol else ""
        se = f" (k = {self.k:g} s.e., s.e. {_fmt(self.se)})" if self.se is not None else ""
        return f"{_fmt(self.value)} {self.op} {thr}{tol}{se}"

    def foil_text(self) -> str:
        """``least squares: 0.41 (fails)``, the reason a claim has no foil, or ``""``."""
        if self.foil is not None:
            verdict = "passes too" if self.foil_passed else "fails"
            return f"{self.foil}: {_fmt(self.foil_value)} ({verdict})"
        return self.no_foil or ""

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
    """The claims of one chapter run (created by :func:`nnapprox.setup`).

    ``chapter`` names the chapter; a chapter listed in :data:`SECOND_EDITION` may still record
    findings without a foil. ``Claims()`` with no chapter applies every rule.
    """

    def __init__(self, chapter: str | None = None) -> None:
        self.chapter = chapter
        self.records: list[Claim] = []
        self._section_start = 0

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
        foil: tuple[str, Any] | None = None,
        no_foil: str | None = None,
        training_runs: int | None = None,
    ) -> bool:
        """Record ``value op threshold`` under ``name``; return whether it holds.

        ``kind`` is ``"empirical"``, ``"bound"``, ``"exact"`` or ``"guard"``; an empirical claim
        needs a ``basis`` (``"paper"``, ``"derived"``, ``"statistical"``, ``"convention"``), and
        a statistical one its standard error ``se`` (from this run) and ``k >= K_MIN`` (fixed
        before running). ``source`` says where the threshold comes from and is required.
        ``foil=(label, value)`` is the same statistic on the simplest alternative: the claim
        fails if the foil passes too. Empirical claims need a foil, bounds a foil or a
        ``no_foil`` reason; exact checks and guards take neither. ``training_runs`` counts the
        independent training runs behind a claim about what training finds. Every rule is
        checked here, before the comparison, with a message naming what is valid.
        """
        if not isinstance(name, str) or not name:
            raise ValueError("a claim needs a non-empty name")
        if any(c.name == name for c in self.records):
            raise ValueError(f"claim {name!r} was already recorded in this run")
        if not isinstance(source, str) or not source.strip():
            raise ValueError(f"claim {name!r} needs a source for its threshold")
        _validate_kind(name, kind, basis, se, k)
        foil_label, foil_value = _validate_foil(name, kind, foil, no_foil, self.chapter)
        _validate_training_runs(name, basis, training_runs, note)
        if op == "in" and (not isinstance(threshold, Sequence) or len(threshold) != 2):
            raise ValueError(f"claim {name!r}: op 'in' takes threshold=(lo, hi)")
        value = _plain(value)
        threshold = _plain(threshold)
        passed = compare(value, op, threshold, tol or 0.0)
        foil_passed = None
        if foil_label is not None:
            foil_value = _plain(foil_value)
            foil_passed = compare(foil_value, op, threshold, tol or 0.0)
        if no_foil is None and foil_label is None and kind in FINDING_KINDS:
            issue = SECOND_EDITION.get(self.chapter or "")
            no_foil = f"not yet named (second edition; issue {issue})"
        claim = Claim(name, value, op, threshold, source, passed and not foil_passed, kind, basis,
                      None if se is None else float(se), None if k is None else float(k), tol, note,
                      foil_label, foil_value, foil_passed, no_foil, training_runs)
        self.records.append(claim)
        mark = "PASS" if claim.passed else "FAIL"
        extra = f"; does not discriminate: {foil_label} also passes ({_fmt(foil_value)})" if foil_passed else ""
        print(f"[claim {mark}] {name}: {claim.text()}   [{claim.label()}; {source}]{extra}")
        return claim.passed

    # ------------------------------------------------------------------ sections
    def section_status(self, *, display: bool = True) -> str | None:
        """The one-line status of the claims recorded since the previous call.

        E.g. "Status: 2 findings hold; their foils fail; 1 code check passes." With ``display``
        it is shown as Markdown in a notebook (printed elsewhere) and ``None`` is returned, so
        that a notebook cell shows it once; with ``display=False`` the line is returned.
        """
        mine = [asdict(c) for c in self.records[self._section_start:]]
        self._section_start = len(self.records)
        text = "Status: " + status_line(mine) + "."
        if not display:
            return text
        try:
            from IPython import get_ipython
            from IPython.display import Markdown
            from IPython.display import display as show

            if get_ipython() is not None:
                show(Markdown(f"*{text}*"))
                return None
        except ImportError:  # pragma: no cover - IPython is always there in the book env
            pass
        print(text)
        return None

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
            names = "; ".join(f"{c.name} ({_failure(c)})" for c in self.failed)
            raise ClaimError(f"{len(self.failed)} of {len(self.records)} claims failed in {chapter!r}: {names}")
        return record


def _failure(c: Claim) -> str:
    if c.foil_passed:
        return f"{c.text()}; does not discriminate: {c.foil} also passes ({_fmt(c.foil_value)})"
    return c.text()


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
        claim = Claim(**_claim_fields(c))
        foil = f"  [foil {claim.foil_text()}]" if claim.foil_text() else ""
        print(f"  {'PASS' if c['passed'] else 'FAIL'}  [{claim_label(c)}] {c['name']}: "
              f"{claim.text()}  ({c['source']}){foil}")


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


def _validate_foil(name: str, kind: str, foil: Any, no_foil: Any, chapter: str | None) -> tuple[Any, Any]:
    """The foil's (label, value), after checking rule 1 of the module docstring."""
    if no_foil is not None and (not isinstance(no_foil, str) or not no_foil.strip()):
        raise ValueError(f"claim {name!r}: no_foil= takes the reason, as a non-empty string")
    if kind in ("exact", "guard"):
        if foil is not None or no_foil is not None:
            raise ValueError(
                f"claim {name!r}: a {kind!r} claim holds for any input when the code is right, so it "
                "takes no foil and no no_foil reason; a claim that a foil could fail is 'empirical' "
                "or 'bound'"
            )
        return None, None
    if foil is not None:
        if no_foil is not None:
            raise ValueError(f"claim {name!r}: give foil= or no_foil=, not both")
        if not isinstance(foil, (tuple, list)) or len(foil) != 2 or not isinstance(foil[0], str) \
                or not foil[0].strip():
            raise ValueError(
                f"claim {name!r}: foil= takes (label, value): the alternative's name, e.g. "
                "'least squares', and the same statistic computed on it"
            )
        value = _plain(foil[1])
        if isinstance(value, list):
            raise ValueError(f"claim {name!r}: the foil's value must be a single number, like the claim's")
        return foil[0], value
    if chapter in SECOND_EDITION:
        if no_foil is not None and kind == "empirical":
            raise ValueError(f"claim {name!r}: an empirical claim cannot give no_foil=; name its foil")
        return None, None
    if kind == "empirical":
        raise ValueError(
            f"claim {name!r}: an empirical claim (a finding) needs foil=(label, value): the simplest "
            "alternative a skeptic would offer (a fixed baseline, least squares, the untrained network, "
            "shuffled labels, the model without the mechanism), with the same statistic; only 'bound', "
            "'exact' and 'guard' claims may go without one"
        )
    if no_foil is None:
        raise ValueError(
            f"claim {name!r}: a bound needs foil=(label, value) (e.g. the same inequality on a map "
            "that expands) or no_foil='<why none applies>'"
        )
    return None, None


def _validate_training_runs(name: str, basis: Any, training_runs: Any, note: Any) -> None:
    """Rule 3: a claim about training carries error across independent training runs."""
    if training_runs is None:
        return
    if isinstance(training_runs, bool) or not isinstance(training_runs, int) or training_runs < 1:
        raise ValueError(f"claim {name!r}: training_runs= takes a positive integer, got {training_runs!r}")
    if training_runs >= TRAINING_RUNS_MIN:
        return
    if basis == "statistical":
        raise ValueError(
            f"claim {name!r}: {training_runs} training run(s) are too few for a standard error: use at "
            f"least {TRAINING_RUNS_MIN} independent runs, or basis='convention' and say so in the name"
        )
    said = f"{name} {note or ''}".lower()
    wanted = "one training run" if training_runs == 1 else f"{training_runs} training runs"
    if wanted not in said:
        raise ValueError(
            f"claim {name!r}: with {training_runs} training run(s), the claim's name or note must "
            f"say so ({wanted!r})"
        )


def claim_kind(c: dict) -> str:
    """The kind of a claim read from a JSON record; records older than kinds are ``unclassified``."""
    kind = c.get("kind")
    return kind if kind in KINDS else "unclassified"


def is_finding(c: dict) -> bool:
    """Whether a claim counts as a finding (empirical or bound); exact checks and guards do not."""
    return claim_kind(c) in FINDING_KINDS + ("unclassified",)


def claim_label(c: dict) -> str:
    """``empirical (paper)``, ``bound``, ``exact check``, ``guard`` or ``unclassified``."""
    kind = claim_kind(c)
    word = _KIND_LABEL[kind][0]
    return f"{word} ({c['basis']})" if kind == "empirical" and c.get("basis") else word


def sorted_claims(claims: Sequence[dict]) -> list[dict]:
    """Claims grouped empirical, bound, exact, guard, unclassified; recording order inside a group."""
    order = {k: i for i, k in enumerate(KINDS + ("unclassified",))}
    return sorted(claims, key=lambda c: order[claim_kind(c)])


def summary(claims: Sequence[dict]) -> str:
    """``"14 empirical · 6 bounds · 9 exact checks, all hold"`` (or ``", 2 of 29 fail"``)."""
    counts = {k: 0 for k in KINDS + ("unclassified",)}
    for c in claims:
        counts[claim_kind(c)] += 1
    parts = [f"{n} {_KIND_LABEL[k][0] if n == 1 else _KIND_LABEL[k][1]}" for k, n in counts.items() if n]
    failed = [c for c in claims if not c.get("passed")]
    if not claims:
        return "no claims"
    verdict = "all hold" if not failed else f"{len(failed)} of {len(claims)} fail"
    return " · ".join(parts) + ", " + verdict


def status_line(claims: Sequence[dict]) -> str:
    """``"2 findings hold; their foils fail; 3 code checks pass"``, for a section's claims."""
    findings = [c for c in claims if is_finding(c)]
    checks = [c for c in claims if not is_finding(c)]
    parts = []
    if findings:
        n, bad = len(findings), [c for c in findings if not c.get("passed")]
        one = n == 1
        if bad:
            parts.append(f"{len(bad)} of {n} findings fail: " + "; ".join(c["name"] for c in bad))
        else:
            parts.append("1 finding holds" if one else f"{n} findings hold")
            named = sum(c.get("foil") is not None for c in findings)
            if named == n:
                parts.append("its foil fails" if one else "their foils fail")
            elif named == 1:
                parts.append("1 names a foil, and it fails")
            elif named:
                parts.append(f"{named} name foils, and they fail")
    if checks:
        n, bad = len(checks), sum(not c.get("passed") for c in checks)
        parts.append(f"{bad} of {n} code checks fail" if bad else
                     ("1 code check passes" if n == 1 else f"{n} code checks pass"))
    return "; ".join(parts) if parts else "no claims recorded here"


def _rows(claims: Sequence[dict], with_foil: bool) -> str:
    rows = []
    current = None
    cols = 5 if with_foil else 4
    for c in sorted_claims(claims):
        kind = claim_kind(c)
        if kind != current:
            current = kind
            rows.append(
                f'<tr class="nnapprox-kind"><th colspan="{cols}">{html.escape(_KIND_LABEL[kind][1])}</th></tr>'
            )
        ok = bool(c.get("passed"))
        claim = Claim(**_claim_fields(c))
        foil = f"<td>{html.escape(claim.foil_text())}</td>" if with_foil else ""
        rows.append(
            "<tr><td class=\"{}\">{}</td><td>{}</td><td><code>{}</code></td>{}<td>{}</td></tr>".format(
                "nnapprox-pass" if ok else "nnapprox-fail", "holds" if ok else "FAILS",
                html.escape(c["name"]), html.escape(claim.text()), foil,
                html.escape(f"{claim_label(c)}: {c['source']}"),
            )
        )
    foil_head = "<th>foil: the same statistic on the alternative</th>" if with_foil else ""
    return (
        '<div class="nnapprox-scroll"><table class="nnapprox-claims"><thead><tr><th></th><th>claim</th>'
        f"<th>measured vs threshold</th>{foil_head}<th>kind and source of the threshold</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def claims_html(claims: Sequence[dict]) -> str:
    """The claims as HTML: findings (with their foils) and code checks, each a collapsed table.

    Pass or fail is a word, not a glyph; a table with a failing claim is open.
    """
    findings = [c for c in claims if is_finding(c)]
    checks = [c for c in claims if not is_finding(c)]
    parts = []
    for title, group, with_foil in (("Findings and their foils", findings, True),
                                    ("Code checks (guards and exact checks: not evidence)", checks, False)):
        if not group:
            continue
        failing = any(not c.get("passed") for c in group)
        parts.append(
            f'<details class="nnapprox-claims-group"{" open" if failing else ""}><summary>'
            f"{html.escape(title)}: {html.escape(summary(group))}</summary>"
            f"{_rows(group, with_foil)}</details>"
        )
    return "".join(parts)


def _claim_fields(c: dict) -> dict:
    """The fields of :class:`Claim` present in a JSON claim (older records lack some)."""
    names = Claim.__dataclass_fields__
    fields = {k: v for k, v in c.items() if k in names}
    fields["kind"] = claim_kind(c)
    return fields
