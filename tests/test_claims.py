"""The claims mechanism: comparisons, kinds and bases, failure, the JSON record."""

import json

import pytest
import torch

import nnapprox
from nnapprox import claims as cl
from nnapprox.claims import compare


@pytest.mark.parametrize(
    "value, op, threshold, tol, expected",
    [
        (0.1, "<", 0.2, 0, True), (0.2, "<", 0.2, 0, False), (0.2, "<=", 0.2, 0, True),
        (3, ">", 2, 0, True), (2, ">=", 2.5, 0, False), (0.5, "in", (0.4, 0.6), 0, True),
        (0.7, "in", (0.4, 0.6), 0, False), (1.0 + 1e-13, "==", 1.0, 1e-12, True),
        (1.0 + 1e-11, "==", 1.0, 1e-12, False), (True, "==", True, 0, True), (False, "==", True, 0, False),
        (float("nan"), "<", 1.0, 0, False), (float("nan"), "in", (-1e9, 1e9), 0, False),
    ],
)
def test_compare(value, op, threshold, tol, expected):
    assert compare(value, op, threshold, tol) is expected


def test_unknown_op_and_missing_source_are_errors():
    claims = nnapprox.Claims()
    with pytest.raises(ValueError, match="valid comparisons are"):
        claims.check("x", 1.0, "~", 1.0, kind="exact", source="theory")
    with pytest.raises(ValueError, match="needs a source"):
        claims.check("x", 1.0, "<", 2.0, kind="exact", source=" ")
    claims.check("x", 1.0, "<", 2.0, kind="exact", source="theory")
    with pytest.raises(ValueError, match="already recorded"):
        claims.check("x", 1.0, "<", 2.0, kind="exact", source="theory")


def test_kind_is_required_and_validated():
    claims = nnapprox.Claims()
    with pytest.raises(TypeError, match="kind"):
        claims.check("x", 1.0, "<", 2.0, source="theory")
    with pytest.raises(ValueError, match="unknown kind 'finding'.*'empirical', 'bound', 'exact'"):
        claims.check("x", 1.0, "<", 2.0, kind="finding", source="theory")
    assert not claims.records


def test_empirical_claim_needs_a_valid_basis():
    claims = nnapprox.Claims()
    with pytest.raises(ValueError, match="needs basis=.*'paper', 'derived', 'statistical', 'convention'"):
        claims.check("x", 1.0, "<", 2.0, kind="empirical", source="Fig. 3")
    with pytest.raises(ValueError, match="unknown basis 'calibration'"):
        claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="calibration", source="Fig. 3")
    assert claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3: 2.0",
                        foil=("a fixed baseline", 9.0))


def test_basis_belongs_to_empirical_claims_only():
    claims = nnapprox.Claims()
    for kind in ("exact", "bound"):
        with pytest.raises(ValueError, match="empirical claims only"):
            claims.check("x", 1.0, "<", 2.0, kind=kind, basis="paper", source="Theorem 1")
        with pytest.raises(ValueError, match="empirical claims only"):
            claims.check("x", 1.0, "<", 2.0, kind=kind, se=0.1, k=4, source="Theorem 1")


def test_statistical_claim_needs_se_and_k():
    claims = nnapprox.Claims()
    with pytest.raises(ValueError, match="records se="):
        claims.check("z", 1.0, "<=", 4.0, kind="empirical", basis="statistical", k=4, source="MC")
    with pytest.raises(ValueError, match="records se="):
        claims.check("z", 1.0, "<=", 4.0, kind="empirical", basis="statistical", se=0.1, source="MC")
    with pytest.raises(ValueError, match="too few.*3.09"):
        claims.check("z", 1.0, "<=", 2.0, kind="empirical", basis="statistical", se=0.1, k=2, source="MC")
    with pytest.raises(ValueError, match="finite non-negative"):
        claims.check("z", 1.0, "<=", 4.0, kind="empirical", basis="statistical", se=float("nan"), k=4,
                     source="MC")
    with pytest.raises(ValueError, match="statistical claims"):
        claims.check("z", 1.0, "<=", 4.0, kind="empirical", basis="paper", se=0.1, k=4, source="MC")
    assert claims.check("z", 1.0, "<=", 4.0, kind="empirical", basis="statistical", se=torch.tensor(0.1),
                        k=4, source="MC", foil=("a fixed baseline", 9.0))
    rec = claims.records[0]
    assert (rec.se, rec.k) == (pytest.approx(0.1), 4.0) and "k = 4 s.e." in rec.text()


def test_report_writes_record_and_raises_on_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run = nnapprox.setup("demo", "quick", "cpu", 3, quick={"a": 1}, full={"a": 2})
    run.claims.check("holds", torch.tensor(0.5), "<", 1.0, kind="bound", source="a bound",
                     no_foil="a proven bound")
    run.claims.check("deliberately false", 2.0, "<", 1.0, kind="empirical", basis="derived", source="eq. 3",
                     foil=("a fixed baseline", 3.0))
    with pytest.raises(nnapprox.ClaimError, match="1 of 2 claims failed.*deliberately false"):
        run.report()
    record = json.loads((tmp_path / "demo.json").read_text())
    assert {"chapter", "profile", "device", "seed", "seconds", "claims"} <= set(record)
    assert (record["chapter"], record["profile"], record["device"], record["seed"]) == ("demo", "quick", "cpu", 3)
    names = {c["name"]: c for c in record["claims"]}
    assert names["holds"]["passed"] is True and names["holds"]["value"] == 0.5
    assert names["holds"]["kind"] == "bound" and "basis" not in names["holds"]
    assert names["deliberately false"]["passed"] is False
    assert (names["deliberately false"]["kind"], names["deliberately false"]["basis"]) == ("empirical", "derived")
    for c in record["claims"]:
        assert {"name", "value", "op", "threshold", "source", "passed", "kind"} <= set(c)


def test_grouping_and_summary_line():
    recs = [
        {"name": "e1", "kind": "exact", "passed": True},
        {"name": "m1", "kind": "empirical", "basis": "paper", "passed": True},
        {"name": "b1", "kind": "bound", "passed": True},
        {"name": "old", "passed": True},  # a record written before kinds existed
        {"name": "m2", "kind": "empirical", "basis": "statistical", "passed": True},
    ]
    assert [c["name"] for c in cl.sorted_claims(recs)] == ["m1", "m2", "b1", "e1", "old"]
    assert cl.summary(recs) == "2 empirical · 1 bound · 1 exact check · 1 unclassified, all hold"
    recs[0]["passed"] = False
    assert cl.summary(recs).endswith("1 of 5 fail")
    assert cl.claim_label(recs[1]) == "empirical (paper)" and cl.claim_label(recs[3]) == "unclassified"


def test_html_table_uses_words_not_glyphs():
    claims = nnapprox.Claims()
    claims.check("a", 1.0, "<", 2.0, kind="exact", source="identity")
    claims.check("b", 3.0, "<", 2.0, kind="empirical", basis="convention", source="5 % rule",
                 foil=("least squares", 4.0))
    table = claims.html()
    assert "holds" in table and "FAILS" in table and "✅" not in table and "❌" not in table
    assert table.index("Findings") < table.index("Code checks")
    assert "least squares: 4 (fails)" in table


def test_a_chapter_without_claims_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run = nnapprox.setup("empty", "quick", "cpu", 0, quick={}, full={})
    with pytest.raises(nnapprox.ClaimError, match="recorded no claim"):
        run.report()
    assert json.loads((tmp_path / "empty.json").read_text())["claims"] == []


# ------------------------------------------------------------------ foils, guards, training runs
def test_a_claim_whose_foil_passes_fails():
    claims = nnapprox.Claims()
    held = claims.check("TF closer to ridge than to LS", 0.02, "<", 0.05, kind="empirical",
                        basis="convention", source="5 % rule", foil=("a fixed ridge", 0.03))
    assert not held
    rec = claims.records[0]
    assert rec.foil_passed is True and rec.passed is False
    assert "does not discriminate: a fixed ridge also passes (0.03)" in cl._failure(rec)
    assert claims.check("TF beats LS", 0.02, "<", 0.05, kind="empirical", basis="convention",
                        source="5 % rule", foil=("least squares", 0.5))
    assert claims.records[1].foil_passed is False
    with pytest.raises(nnapprox.ClaimError, match="does not discriminate: a fixed ridge also passes"):
        claims.report(chapter="demo", profile="quick", device="cpu", seed=0, seconds=0.0)


def test_foil_uses_the_same_comparison_including_intervals():
    claims = nnapprox.Claims()
    assert not claims.check("rate", 2.0, "in", (1.9, 2.1), kind="empirical", basis="derived",
                            source="theory", foil=("a contraction", 2.05))
    assert claims.check("rate 2", 2.0, "in", (1.9, 2.1), kind="empirical", basis="derived",
                        source="theory", foil=("a contraction", 0.6))
    assert claims.check("a NaN foil counts as failing", 2.0, "in", (1.9, 2.1), kind="empirical",
                        basis="derived", source="theory", foil=("broken", float("nan")))


def test_a_finding_without_a_foil_is_refused():
    claims = nnapprox.Claims()
    with pytest.raises(ValueError, match="needs foil=.*only 'bound', 'exact' and 'guard'"):
        claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3")
    with pytest.raises(ValueError, match="needs foil=.*only 'bound', 'exact' and 'guard'"):
        claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3",
                     no_foil="none comes to mind")
    with pytest.raises(ValueError, match="a bound needs foil=.*or no_foil="):
        claims.check("b", 1.0, "<", 2.0, kind="bound", source="Theorem 1")
    with pytest.raises(ValueError, match=r"takes \(label, value\)"):
        claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3", foil=3.0)
    with pytest.raises(ValueError, match="not both"):
        claims.check("b", 1.0, "<", 2.0, kind="bound", source="Theorem 1", foil=("x", 3.0), no_foil="y")
    assert not claims.records
    assert claims.check("b", 1.0, "<", 2.0, kind="bound", source="Theorem 1", no_foil="proven for all inputs")


def test_guards_and_exact_checks_take_no_foil_and_are_not_findings():
    claims = nnapprox.Claims()
    for kind in ("guard", "exact"):
        with pytest.raises(ValueError, match="takes no foil"):
            claims.check("g", 1.0, "<=", 1.0, kind=kind, source="certificate", foil=("x", 2.0))
        with pytest.raises(ValueError, match="takes no foil"):
            claims.check("g", 1.0, "<=", 1.0, kind=kind, source="certificate", no_foil="why")
    claims.check("certificate", 0.5, "<=", 1.0, kind="guard", source="a-posteriori")
    claims.check("finding", 0.5, "<=", 1.0, kind="empirical", basis="derived", source="eq. 2",
                 foil=("untrained network", 3.0))
    recs = [c.__dict__ for c in claims.records]
    assert [cl.is_finding(c) for c in recs] == [False, True]
    assert cl.status_line(recs) == "1 finding holds; its foil fails; 1 code check passes"
    html = claims.html()
    assert html.index("untrained network") < html.index("Code checks") < html.index("certificate")
    assert "<details" in html and " open" not in html  # collapsed when everything holds


def test_section_status_covers_the_claims_since_the_last_call():
    claims = nnapprox.Claims()
    for i in range(2):
        claims.check(f"f{i}", 0.1, "<", 1.0, kind="empirical", basis="convention", source="c",
                     foil=("baseline", 2.0))
    assert claims.section_status(display=False) == "Status: 2 findings hold; their foils fail."
    claims.check("g", 1.0, "<=", 1.0, kind="guard", source="identity")
    assert claims.section_status(display=False) == "Status: 1 code check passes."


def test_second_edition_chapters_may_still_omit_foils():
    claims = nnapprox.Claims("depth")
    assert claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3")
    assert claims.records[0].no_foil == "not yet named (second edition; issue 38)"
    strict = nnapprox.Claims("universal")
    with pytest.raises(ValueError, match="needs foil="):
        strict.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3")


def test_training_claims_need_five_runs_or_say_one_run():
    claims = nnapprox.Claims()
    foil = ("a shallow network of equal size", 0.0)
    with pytest.raises(ValueError, match="too few for a standard error"):
        claims.check("deep beats shallow", 4.0, ">", 3.09, kind="empirical", basis="statistical", se=1.0,
                     k=3.09, source="runs", foil=foil, training_runs=3)
    with pytest.raises(ValueError, match="must say so \\('one training run'\\)"):
        claims.check("deep beats shallow", 0.8, "<", 1.0, kind="empirical", basis="convention",
                     source="ratio", foil=foil, training_runs=1)
    with pytest.raises(ValueError, match="must say so \\('3 training runs'\\)"):
        claims.check("prediction holds", 0.8, "<=", 1.0, kind="bound", source="case 3",
                     foil=foil, training_runs=3)
    with pytest.raises(ValueError, match="positive integer"):
        claims.check("deep beats shallow", 0.8, "<", 1.0, kind="empirical", basis="convention",
                     source="ratio", foil=foil, training_runs=0)
    assert claims.check("deep beats shallow (one training run)", 0.8, "<", 1.0, kind="empirical",
                        basis="convention", source="ratio", foil=("shallow", 1.2), training_runs=1)
    assert claims.check("deep beats shallow over runs", 4.0, ">", 3.09, kind="empirical", basis="statistical",
                        se=1.0, k=3.09, source="runs", foil=foil, training_runs=5)
    assert claims.records[-1].training_runs == 5
