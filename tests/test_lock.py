"""The claims lock (book/claims.lock): frozen designs, their history, validation blocks."""

import copy

import pytest

import harness
import lock


def _record(seed=0, threshold=1.0, foil="least squares", op="<", name="a", se=None):
    claim = {"name": name, "value": 0.5, "op": op, "threshold": threshold, "source": "eq. 3",
             "passed": True, "kind": "empirical", "basis": "derived", "foil": foil, "foil_value": 2.0}
    if se is not None:
        claim.update(basis="statistical", se=se, k=4.0)
    guard = {"name": "g", "value": 0.0, "op": "<=", "threshold": 1e-12, "source": "identity",
             "passed": True, "kind": "guard"}
    return {"chapter": "demo", "profile": "quick", "seed": seed, "claims": [claim, guard]}


def test_a_run_that_matches_its_lock_passes():
    entry = lock.chapter_entry([_record(0), _record(1)], "third edition")
    lock.assert_matches("demo", _record(2), {"chapters": {"demo": entry}})


@pytest.mark.parametrize("change, message", [
    (dict(threshold=1.5), "threshold is 1.5 in this run, 1.0 in the lock"),
    (dict(foil="a fixed ridge"), "foil is 'a fixed ridge' in this run, 'least squares' in the lock"),
    (dict(op="<="), "op is '<=' in this run"),
    (dict(name="b"), "not in the lock: 'b'"),
])
def test_a_lock_mismatch_fails(change, message):
    entry = lock.chapter_entry([_record(0)], "third edition")
    with pytest.raises(lock.LockError, match=message):
        lock.assert_matches("demo", _record(**change), {"chapters": {"demo": entry}})


def test_thresholds_computed_by_the_run_are_locked_as_formulas():
    varying = lock.chapter_entry([_record(0, threshold=1.0), _record(1, threshold=1.2)], "x")
    assert varying["claims"][0]["threshold"] == "from the run: eq. 3"
    statistical = lock.chapter_entry([_record(0, se=0.1)], "x")
    assert statistical["claims"][0]["threshold"].startswith("from the run")
    computed = lock.chapter_entry([_record(0, threshold=0.8245340415538094)], "x")
    assert computed["claims"][0]["threshold"].startswith("from the run")
    typed = lock.chapter_entry([_record(0, threshold=[-0.5, 0.5])], "x")
    assert typed["claims"][0]["threshold"] == [-0.5, 0.5]
    lock.assert_matches("demo", _record(5, threshold=7.0), {"chapters": {"demo": varying}})
    with pytest.raises(lock.LockError, match="different claim names"):
        lock.chapter_entry([_record(0), _record(1, name="a at seed 1")], "x")


def test_other_profiles_and_unlocked_chapters():
    full = dict(_record(), profile="full")
    lock.assert_matches("demo", full, {"chapters": {}})  # the lock freezes the quick profile only
    with pytest.raises(lock.LockError, match="not in claims.lock"):
        lock.assert_matches("demo", _record(), {"chapters": {}})


def test_every_change_needs_a_history_entry():
    chapters = {"demo": lock.chapter_entry([_record()], "x")}
    data = {"chapters": chapters, "validation": [], "history": [
        {"date": "2026-11-28", "chapters": ["demo"], "reason": "first design", "after_failed_run": False,
         "digest": lock.digest(chapters)}]}
    lock.check_history(data)
    edited = copy.deepcopy(data)
    edited["chapters"]["demo"]["claims"][0]["threshold"] = 2.0  # an edit by hand
    with pytest.raises(lock.LockError, match="changed without a history entry"):
        lock.check_history(edited)
    with pytest.raises(lock.LockError, match="no history entry"):
        lock.check_history(dict(data, history=[]))


def test_validation_blocks_are_fresh_and_run_once_per_revision():
    chapters = {"demo": lock.chapter_entry([_record()], "x")}
    data = {"chapters": chapters, "history": [], "validation": []}
    assert lock.next_block(data, "demo") == list(range(10, 20))
    assert lock.validated(data, "demo") is None
    runs = [dict(_record(s), ok=True, error="") for s in range(10, 20)]
    runs[3]["claims"][0]["passed"] = False
    event = lock.record_validation(data, "demo", list(range(10, 20)), runs)
    assert not event["held_on_every_seed"] and event["failures"] == ["a (seed 13)"]
    assert lock.validated(data, "demo") is event  # this revision is done: it is not rerun
    assert lock.next_block(data, "demo") == list(range(20, 30))
    data["chapters"]["demo"]["claims"][0]["threshold"] = 0.9  # a redesign is a new revision
    assert lock.validated(data, "demo") is None


def test_the_book_lock_covers_every_chapter_and_records_its_history():
    data = lock.load()
    lock.check_history(data)
    stems = [p.stem for p in harness.toc_notebooks()]
    assert sorted(data["chapters"]) == sorted(stems)
    for entry in data["chapters"].values():
        assert entry["claims"], "a locked chapter has claims"
    for event in data["validation"]:
        assert min(event["seeds"]) >= 10, "validation seeds are disjoint from the design seeds 0-9"


def test_the_design_source_is_part_of_the_revision():
    # the same claims table from runs of two versions of a chapter (a changed setting, say):
    # two revisions, so the second design gets its own validation block
    old = lock.chapter_entry([dict(_record(s), key="k-old") for s in range(3)], "x")
    new = lock.chapter_entry([dict(_record(s), key="k-new") for s in range(3)], "x")
    assert old["source"] == "k-old" and old["claims"] == new["claims"]
    assert lock.revision(old) != lock.revision(new)
    data = {"chapters": {"demo": new}, "history": [], "validation": [
        {"chapter": "demo", "revision": lock.revision(old), "seeds": list(range(10, 20)),
         "date": "2026-11-28", "held_on_every_seed": True, "failures": []}]}
    assert lock.validated(data, "demo") is None
    assert lock.next_block(data, "demo") == list(range(20, 30))
    with pytest.raises(lock.LockError, match="different versions"):
        lock.chapter_entry([dict(_record(0), key="k-old"), dict(_record(1), key="k-new")], "x")
    assert "source" not in lock.chapter_entry([_record()], "x")  # a run without a key


def test_validation_refuses_a_chapter_changed_since_its_lock(tmp_path, monkeypatch):
    import seeds

    chapter = tmp_path / "demo.md"
    chapter.write_text("# demo\n")
    entry = lock.chapter_entry([dict(_record(s), key="k-locked") for s in range(3)], "x")
    chapters = {"demo": entry}
    data = {"chapters": chapters, "validation": [], "history": [
        {"date": "2026-11-28", "chapters": ["demo"], "reason": "r", "after_failed_run": False,
         "digest": lock.digest(chapters)}]}
    monkeypatch.setattr(seeds.claims_lock, "load", lambda: copy.deepcopy(data))
    monkeypatch.setattr(seeds, "source_key", lambda path: "k-edited")
    ran = []
    monkeypatch.setattr(seeds, "run_many", lambda *a, **k: ran.append(a) or [])
    with pytest.raises(SystemExit, match="changed since its design was frozen"):
        seeds.validate([chapter])
    assert not ran  # refused before any run started
    # also when the locked revision was validated already: the edited chapter is not that revision
    data["validation"].append({"chapter": "demo", "revision": lock.revision(entry), "seeds": list(range(10, 20)),
                               "date": "2026-11-28", "held_on_every_seed": True, "failures": []})
    with pytest.raises(SystemExit, match="changed since its design was frozen"):
        seeds.validate([chapter])
    assert not ran


def test_a_seed_whose_kernel_never_started_runs_again_before_recording(tmp_path, monkeypatch):
    import seeds

    chapter = tmp_path / "demo.md"
    chapter.write_text("# demo\n")
    entry = lock.chapter_entry([dict(_record(s), key="k") for s in range(3)], "x")
    chapters = {"demo": entry}
    data = {"chapters": chapters, "validation": [], "history": [
        {"date": "2026-12-01", "chapters": ["demo"], "reason": "r", "after_failed_run": False,
         "digest": lock.digest(chapters)}]}
    monkeypatch.setattr(seeds.claims_lock, "load", lambda: copy.deepcopy(data))
    monkeypatch.setattr(seeds, "source_key", lambda path: "k")
    saved = []
    monkeypatch.setattr(seeds.claims_lock, "save", lambda d: saved.append(d))
    dead = {"key": "k", "ok": False, "claims": [], "wall_seconds": 60.0,
            "error": "RuntimeError: Kernel didn't respond in 60 seconds"}
    assert seeds.never_started(dead) and not seeds.never_started(dict(dead, claims=[{"name": "a"}]))
    calls = []

    def run_many(jobs_list, **kw):
        calls.append([seed for _, seed in jobs_list])
        if len(calls) == 1:  # the first pass: seed 11's kernel does not start
            return [dict(dead) if seed == 11 else dict(_record(seed), key="k", ok=True, error="", wall_seconds=1.0)
                    for _, seed in jobs_list]
        return [dict(_record(seed), key="k", ok=True, error="", wall_seconds=1.0) for _, seed in jobs_list]

    monkeypatch.setattr(seeds, "run_many", run_many)
    assert seeds.validate([chapter]) == 0
    assert calls == [list(range(10, 20)), [11]]  # the same seed again, no other
    event = saved[-1]["validation"][-1]
    assert event["seeds"] == list(range(10, 20)) and event["held_on_every_seed"]
    calls.clear()
    saved.clear()
    monkeypatch.setattr(seeds, "run_many", lambda jobs_list, **kw: calls.append(1) or [dict(dead) for _ in jobs_list])
    with pytest.raises(SystemExit, match="did not start twice"):
        seeds.validate([chapter])
    assert not saved  # nothing recorded
