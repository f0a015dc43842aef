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
    assert claims.check("x", 1.0, "<", 2.0, kind="empirical", basis="paper", source="Fig. 3: 2.0")


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
                        k=4, source="MC")
    rec = claims.records[0]
    assert (rec.se, rec.k) == (pytest.approx(0.1), 4.0) and "k = 4 s.e." in rec.text()


def test_report_writes_record_and_raises_on_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run = nnapprox.setup("demo", "quick", "cpu", 3, quick={"a": 1}, full={"a": 2})
    run.claims.check("holds", torch.tensor(0.5), "<", 1.0, kind="bound", source="a bound")
    run.claims.check("deliberately false", 2.0, "<", 1.0, kind="empirical", basis="derived", source="eq. 3")
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
    claims.check("b", 3.0, "<", 2.0, kind="empirical", basis="convention", source="5 % rule")
    table = claims.html()
    assert "holds" in table and "FAILS" in table and "✅" not in table and "❌" not in table
    assert table.index("empirical") < table.index("exact check")


def test_a_chapter_without_claims_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run = nnapprox.setup("empty", "quick", "cpu", 0, quick={}, full={})
    with pytest.raises(nnapprox.ClaimError, match="recorded no claim"):
        run.report()
    assert json.loads((tmp_path / "empty.json").read_text())["claims"] == []
