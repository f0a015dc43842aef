"""The claims lock: each chapter's claims frozen before fresh validation seeds are run.

``book/claims.lock`` (YAML) holds, per chapter, every claim of its quick-profile run: name,
kind, basis, op, threshold (the number, or ``from the run`` with the source's formula when
the threshold is computed by the run: k standard errors, a derived interval; recognised as a
threshold that varies between the runs given, carries a standard error, or has more than six
significant digits), k, foil and training runs. Three sections:

``chapters``    the frozen design, one entry per chapter of ``_toc.yml``;
``history``     one entry per change: date, chapters, reason, whether it followed a failed
                run, and the digest of ``chapters`` after the change. The test suite fails
                when the newest digest is not the lock's, so no change goes unrecorded;
``validation``  the validation runs: per chapter revision (the digest of its entry), the
                seed block run once, and the outcome.

Design happens on seeds 0-9. ``make seeds SEEDS=validation`` then runs each chapter on the
next block of ten fresh seeds (10-19, then 20-29, ...) once per revision and records the
outcome here; a claim that fails there is redesigned (a new revision, a history entry saying
so) and validated on the next block. Seeds are never chosen, and a revision is never rerun.

Commands::

    python tests/lock.py write intro --reason "..." --after-failed-run no   # from the runs on disk
    python tests/lock.py check                                              # digest and coverage
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import math
import sys
from pathlib import Path

import yaml

import harness

LOCK = harness.ROOT / "book" / "claims.lock"
FROM_RUN = "from the run"
DESIGN_SEEDS = tuple(range(10))
BLOCK = 10
FIELDS = ("kind", "basis", "op", "threshold", "k", "foil", "training_runs")
HEADER = """\
# The frozen design of every chapter's claims (quick profile). Written by tests/lock.py from
# chapter runs; the tests fail when a chapter records claims that differ from it, and when
# the newest history entry's digest is not the digest of `chapters` (every change is dated,
# explained and says whether it followed a failed run). See tests/lock.py and
# book/contributing.md.
"""


class LockError(AssertionError):
    """A chapter's claims differ from the lock, or the lock's history does not cover it."""


# --------------------------------------------------------------------------- reading
def load(path: Path = LOCK) -> dict:
    if not path.exists():
        return {"chapters": {}, "history": [], "validation": []}
    data = yaml.safe_load(path.read_text()) or {}
    for key, empty in (("chapters", {}), ("history", []), ("validation", [])):
        data.setdefault(key, empty)
        if data[key] is None:
            data[key] = empty
    return data


def save(data: dict, path: Path = LOCK) -> None:
    body = yaml.safe_dump({k: data[k] for k in ("chapters", "history", "validation")},
                          sort_keys=False, allow_unicode=True, width=100)
    path.write_text(HEADER + body)


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(chapters: dict) -> str:
    """The digest of the frozen design (the ``chapters`` section)."""
    return hashlib.sha256(_canonical(chapters).encode()).hexdigest()[:16]


def revision(entry: dict) -> str:
    """One chapter's revision: the digest of its entry (claims, contract, and the source key of
    the runs it was frozen from, when they record one)."""
    return hashlib.sha256(_canonical(entry).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- entries
def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return a == b


def _literal(x) -> bool:
    """Whether a threshold reads like a number an author typed (at most 6 significant digits).

    A computed threshold (k standard errors, a derived band, a bound from the run's own
    quantities) almost never does; it is locked as its formula instead of its value.
    """
    if isinstance(x, (list, tuple)):
        return all(_literal(v) for v in x)
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return True
    return math.isfinite(x) and float(f"{x:.6g}") == x


def claim_entry(claims: list[dict]) -> dict:
    """A claim's lock entry from its records in one or more runs (the same name)."""
    first = claims[0]
    thresholds = [c.get("threshold") for c in claims]
    varies = any(not _same(t, thresholds[0]) for t in thresholds[1:])
    entry = {"name": first["name"]}
    for key in FIELDS:
        entry[key] = first.get(key)
    if varies or first.get("se") is not None or not _literal(first.get("threshold")):
        entry["threshold"] = f"{FROM_RUN}: {first.get('source', '')}"
    return entry


def chapter_entry(records: list[dict], contract: str) -> dict:
    """A chapter's lock entry from the claims records of one or more of its quick-profile runs."""
    if not records:
        raise LockError("no claims record to lock")
    names = [c["name"] for c in records[0]["claims"]]
    for r in records[1:]:
        other = [c["name"] for c in r["claims"]]
        if other != names:
            raise LockError(
                f"runs of {records[0].get('chapter')!r} record different claim names (seed "
                f"{records[0].get('seed')} vs {r.get('seed')}): only in one: "
                f"{sorted(set(names) ^ set(other))}; a name must not depend on the seed"
            )
    by_name = {n: [next(c for c in r["claims"] if c["name"] == n) for r in records] for n in names}
    entry = {"contract": contract, "claims": [claim_entry(by_name[n]) for n in names]}
    keys = {r.get("key") for r in records}
    if len(keys) > 1:
        by_key = {k: [r.get("seed") for r in records if r.get("key") == k] for k in keys}
        raise LockError(
            f"runs of {records[0].get('chapter')!r} come from different versions of the chapter or its "
            f"library (seeds by source key: {by_key}); rerun the sweep on one version before locking it"
        )
    if keys != {None}:
        # the design is the source, not only the claims table: a changed setting with the same
        # claims is a new revision, and so needs its own validation block
        entry["source"] = keys.pop()
    return entry


def differences(entry: dict, record: dict) -> list[str]:
    """What a chapter run records that differs from its lock entry (empty when it matches)."""
    locked = {c["name"]: c for c in entry["claims"]}
    ran = {c["name"]: c for c in record["claims"]}
    out = [f"not in the lock: {n!r}" for n in ran if n not in locked]
    out += [f"locked but not recorded: {n!r}" for n in locked if n not in ran]
    for name in [n for n in locked if n in ran]:
        want, got = locked[name], claim_entry([ran[name]])
        for key in FIELDS:
            w, g = want.get(key), got.get(key)
            if key == "threshold" and isinstance(w, str) and w.startswith(FROM_RUN):
                continue  # computed by the run (k s.e., a derived interval): its formula is the source
            if not _same(w, g):
                out.append(f"{name!r}: {key} is {g!r} in this run, {w!r} in the lock")
    return out


def assert_matches(chapter: str, record: dict, lock: dict | None = None) -> None:
    """Raise :class:`LockError` if a quick-profile run of ``chapter`` differs from the lock."""
    lock = load() if lock is None else lock
    if record.get("profile", "quick").split()[0] != "quick":
        return  # the lock freezes the quick profile, which the tests and the seed sweeps run
    entry = lock["chapters"].get(chapter)
    if entry is None:
        raise LockError(f"chapter {chapter!r} is not in {LOCK.name}: lock it with "
                        f"python tests/lock.py write {chapter} --reason ... --after-failed-run no|yes")
    diff = differences(entry, record)
    if diff:
        raise LockError(
            f"{chapter}: the run's claims differ from {LOCK.name} ({len(diff)} differences):\n  "
            + "\n  ".join(diff[:20])
            + "\nA design change is frozen with python tests/lock.py write, with its reason and "
              "whether it followed a failed run; it then needs a fresh validation block."
        )


def check_history(lock: dict) -> None:
    """Raise unless the newest history entry records the lock's current digest."""
    if not lock["history"]:
        raise LockError(f"{LOCK.name} has no history entry")
    last = lock["history"][-1]
    for key in ("date", "chapters", "reason", "after_failed_run", "digest"):
        if key not in last:
            raise LockError(f"the newest history entry lacks {key!r}")
    if last["digest"] != digest(lock["chapters"]):
        raise LockError(
            f"{LOCK.name} changed without a history entry: its digest is {digest(lock['chapters'])}, "
            f"the newest entry records {last['digest']}; use python tests/lock.py write"
        )


# --------------------------------------------------------------------------- validation
def next_block(lock: dict, chapter: str) -> list[int]:
    """The chapter's next fresh seed block: 10-19 first, then the block after its last one."""
    used = [max(v["seeds"]) for v in lock["validation"] if v["chapter"] == chapter]
    start = max(DESIGN_SEEDS) + 1 if not used else (max(used) // BLOCK + 1) * BLOCK
    return list(range(start, start + BLOCK))


def validated(lock: dict, chapter: str) -> dict | None:
    """The validation event of the chapter's current revision, if it has run."""
    entry = lock["chapters"].get(chapter)
    if entry is None:
        return None
    rev = revision(entry)
    return next((v for v in lock["validation"] if v["chapter"] == chapter and v["revision"] == rev), None)


def record_validation(lock: dict, chapter: str, seeds: list[int], runs: list[dict]) -> dict:
    """Append the outcome of a validation block to ``lock`` and return the event."""
    failures = sorted({f"{c['name']} (seed {r['seed']})" for r in runs for c in r["claims"]
                       if not c.get("passed")})
    errors = [f"seed {r['seed']}: {r['error'].splitlines()[0][:160]}" for r in runs if r.get("error")]
    event = {
        "chapter": chapter, "revision": revision(lock["chapters"][chapter]), "seeds": seeds,
        "date": _dt.date.today().isoformat(),
        "held_on_every_seed": not failures and not errors and all(r["ok"] for r in runs),
        "failures": failures + errors,
    }
    lock["validation"].append(event)
    return event


# --------------------------------------------------------------------------- writing
def _records(chapter: str, seeds: list[int] | None) -> list[dict]:
    """Quick-profile claims records of a chapter on disk: the seed sweep's runs, else the last run."""
    sweep = sorted((harness.BUILD / "seeds" / chapter).glob("seed-*.json"),
                   key=lambda p: int(p.stem.split("-")[1]))
    runs = [json.loads(p.read_text()) for p in sweep]
    runs = [r for r in runs if r.get("claims") and (seeds is None or r["seed"] in seeds)]
    if runs:
        return runs
    last = harness.CLAIMS / f"{chapter}.json"
    if last.exists():
        rec = json.loads(last.read_text())
        if rec.get("profile", "").split()[0] == "quick":
            return [rec]
    raise LockError(f"no quick-profile run of {chapter!r} on disk: run make seeds NAME={chapter} first")


def write(chapters: list[str], reason: str, after_failed_run: bool, seeds: list[int] | None = None,
          contract: dict[str, str] | None = None) -> dict:
    if not reason.strip():
        raise LockError("a lock change needs --reason")
    lock = load()
    for chapter in chapters:
        from nnapprox.claims import SECOND_EDITION

        default = (f"second edition: findings may lack foils until issue {SECOND_EDITION[chapter]}"
                   if chapter in SECOND_EDITION else "third edition: every finding names its foil")
        lock["chapters"][chapter] = chapter_entry(_records(chapter, seeds), (contract or {}).get(chapter, default))
    order = [p.stem for p in harness.toc_notebooks()]
    lock["chapters"] = {k: lock["chapters"][k] for k in sorted(lock["chapters"], key=lambda s: (
        order.index(s) if s in order else len(order), s))}
    lock["history"].append({
        "date": _dt.date.today().isoformat(), "chapters": chapters, "reason": reason.strip(),
        "after_failed_run": bool(after_failed_run), "digest": digest(lock["chapters"]),
    })
    save(lock)
    return lock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="freeze chapters' claims from their runs on disk")
    w.add_argument("chapters", nargs="+")
    w.add_argument("--reason", required=True, help="why the design changed")
    w.add_argument("--after-failed-run", required=True, choices=("yes", "no"),
                   help="whether this change followed a failed run (a claim that failed on some seed)")
    w.add_argument("--seeds", default=None, help="use only the runs of these seeds (default: all on disk)")
    sub.add_parser("check", help="check the history digest and that every chapter of _toc.yml is locked")
    args = parser.parse_args(argv)
    if args.command == "write":
        stems = [p.stem for p in harness.toc_notebooks()]
        bad = [c for c in args.chapters if c not in stems]
        if bad:
            parser.error(f"unknown chapters {bad}: valid chapters are {', '.join(stems)}")
        seeds = [int(s) for s in args.seeds.replace(",", " ").split()] if args.seeds else None
        lock = write(args.chapters, args.reason, args.after_failed_run == "yes", seeds)
        print(f"{LOCK}: {', '.join(args.chapters)} frozen; digest {lock['history'][-1]['digest']}")
        return 0
    lock = load()
    check_history(lock)
    missing = [p.stem for p in harness.toc_notebooks() if p.stem not in lock["chapters"]]
    if missing:
        print(f"not locked: {', '.join(missing)}")
        return 1
    print(f"{LOCK.name}: {len(lock['chapters'])} chapters, digest {digest(lock['chapters'])} recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
