"""The seed sweep's arithmetic: margins, pass rates, worst seeds (no chapter is executed)."""

import json
import math

import pytest

import seeds


@pytest.mark.parametrize(
    "claim, expected",
    [
        ({"value": 0.8, "op": "<", "threshold": 1.0}, 0.2),
        ({"value": 1.2, "op": "<=", "threshold": 1.0}, -0.2),
        ({"value": 3.0, "op": ">", "threshold": 2.0}, 0.5),
        ({"value": 0.5, "op": "in", "threshold": [0.0, 2.0]}, 0.25),
        ({"value": 5e-13, "op": "==", "threshold": 0.0, "tol": 1e-12}, 0.5),
        ({"value": -0.1, "op": "<", "threshold": 0.0}, 0.1),
        ({"value": True, "op": "==", "threshold": True}, None),
        ({"value": 1.0, "op": "==", "threshold": 1.0}, None),
    ],
)
def test_margin(claim, expected):
    m = seeds.margin(claim)
    assert m == pytest.approx(expected) if expected is not None else m is None


def test_nan_has_the_worst_margin():
    assert seeds.margin({"value": float("nan"), "op": "<", "threshold": 1.0}) == -math.inf


def test_summary_reports_pass_rates_and_the_worst_seed():
    def run(seed, value, ok=True):
        return {"chapter": "demo", "seed": seed, "ok": ok, "error": "" if ok else "failed claims: c",
                "wall_seconds": 10.0 + seed,
                "claims": [{"name": "c", "kind": "empirical", "basis": "statistical", "value": value, "op": "<",
                            "threshold": 1.0, "passed": value < 1.0},
                           {"name": "e", "kind": "exact", "value": True, "op": "==", "threshold": True,
                            "passed": True}]}

    summary = seeds.summarise([run(0, 0.5), run(1, 0.9), run(2, 1.1, ok=False)], ["demo"])
    ch = summary["chapters"]["demo"]
    assert ch["seeds"] == [0, 1, 2] and ch["seeds_ok"] == [0, 1] and ch["wall_seconds_max"] == 12.0
    c, e = ch["claims"]
    assert (c["passed"], c["runs"], c["failed_seeds"], c["worst_seed"]) == (2, 3, [2], 2)
    assert c["worst_margin"] == pytest.approx(-0.1) and c["worst_value"] == 1.1
    assert (e["passed"], e["worst_margin"]) == (3, None)
    text = seeds.markdown(summary)
    assert "| demo | 3 | 2/3 | 12 |" in text and "| c | empirical (statistical) | 2/3 | -0.1 (2) | 2 |" in text


def test_a_run_that_timed_out_is_run_again_but_a_failed_claim_is_kept(tmp_path, monkeypatch):
    chapter = tmp_path / "demo.md"
    chapter.write_text("# demo")
    monkeypatch.setattr(seeds, "SWEEP", tmp_path / "sweep")
    monkeypatch.setattr(seeds, "source_key", lambda path: "k")
    calls = []

    class Result:
        ok, error, wall_seconds = True, "", 1.0

    monkeypatch.setattr(seeds.harness, "run_chapter", lambda *a, **k: calls.append(k["work_dir"]) or Result())
    out = tmp_path / "sweep" / "demo" / "seed-0.json"
    out.parent.mkdir(parents=True)
    for error, reruns in [("timed out after 300 s (budget 150 s)", 1),
                          ("a cell ran past the per-cell timeout of 300 s: cell 4", 1),
                          ("failed claims: c", 0)]:
        out.write_text(json.dumps({"chapter": "demo", "seed": 0, "key": "k", "ok": False, "error": error,
                                   "wall_seconds": 300.0, "claims": []}))
        before = len(calls)
        seeds.run_one(chapter, 0)
        assert len(calls) - before == reruns, error


def test_bad_seed_lists_are_refused():
    with pytest.raises(SystemExit):
        seeds.main(["--seeds", "0 x"])
    with pytest.raises(SystemExit):
        seeds.main(["--seeds", "-1"])


def test_chapter_dependencies_follow_imports_and_stay_within_the_chapter(tmp_path):
    import harness

    chapters = {p.stem: p for p in harness.toc_notebooks()}
    deps = {stem: {str(d.relative_to(seeds.LIB)) for d in seeds.chapter_dependencies(p)}
            for stem, p in chapters.items()}
    assert "nnapprox/composition.py" in deps["intro"] and "nnapprox/ista.py" in deps["intro"]
    assert not any(d.startswith("nnapprox/icl/") for d in deps["intro"])
    assert any(d.startswith("nnapprox/icl/") for d in deps["icl"])
    assert all("nnapprox/claims.py" in d for d in deps.values())  # every chapter reports claims
    assert not any(d.startswith("nnapprox/depth/") for d in deps["universal"])


def test_runs_made_on_many_machines_merge_into_one_report(tmp_path, monkeypatch):
    """The CI matrix runs each chapter × seed block in its own job; the last job files their
    records into one sweep and writes the report, running nothing itself."""
    import harness

    monkeypatch.setattr(seeds, "SWEEP", tmp_path / "sweep")
    monkeypatch.setattr(harness, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(harness, "run_chapter", lambda *a, **k: pytest.fail("the report ran a chapter"))
    intro = harness.find_chapter("intro")
    key = seeds.source_key(intro)
    claim = {"name": "c", "kind": "empirical", "value": 0.5, "op": "<", "threshold": 1.0}
    for job, seed, passed in [("seeds-intro-0", 0, True), ("seeds-intro-1", 5, True), ("seeds-intro-1", 6, False)]:
        folder = tmp_path / "artifacts" / job
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"seed-{seed}.json").write_text(json.dumps({
            "chapter": "intro", "seed": seed, "key": key, "ok": passed, "wall_seconds": 1.0,
            "error": "" if passed else "failed claims: c", "claims": [{**claim, "passed": passed}]}))
    (tmp_path / "artifacts" / "stale").mkdir()
    (tmp_path / "artifacts" / "stale" / "seed-7.json").write_text(json.dumps({
        "chapter": "intro", "seed": 7, "key": "an older revision", "ok": True, "wall_seconds": 1.0, "error": "",
        "claims": [{**claim, "passed": True}]}))
    assert seeds.main(["--report-only", "--merge", str(tmp_path / "artifacts")]) == 1  # seed 6 failed
    summary = json.loads((tmp_path / "reports" / "seeds.json").read_text())
    assert list(summary["chapters"]) == ["intro"]  # the stale run is filed but not reported
    intro_summary = summary["chapters"]["intro"]
    assert intro_summary["seeds"] == [0, 5, 6] and intro_summary["seeds_ok"] == [0, 5]
    assert sorted(p.name for p in (tmp_path / "sweep" / "intro").iterdir()) == [
        "seed-0.json", "seed-5.json", "seed-6.json", "seed-7.json"]
    assert "| intro | 3 | 2/3 |" in (tmp_path / "reports" / "seeds.md").read_text()


def test_merge_refuses_what_is_not_a_run(tmp_path, monkeypatch):
    monkeypatch.setattr(seeds, "SWEEP", tmp_path / "sweep")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "seed-1.json").write_text(json.dumps({"chapter": "intro"}))
    with pytest.raises(SystemExit, match="not a seed run record"):
        seeds.merge(tmp_path / "in")
    with pytest.raises(SystemExit):
        seeds.main(["--report-only", "--merge", str(tmp_path / "missing")])
