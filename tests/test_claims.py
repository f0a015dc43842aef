"""The claims mechanism: comparisons, failure, the JSON record."""

import json

import pytest
import torch

import nnapprox
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
        claims.check("x", 1.0, "~", 1.0, source="theory")
    with pytest.raises(ValueError, match="needs a source"):
        claims.check("x", 1.0, "<", 2.0, source=" ")
    claims.check("x", 1.0, "<", 2.0, source="theory")
    with pytest.raises(ValueError, match="already recorded"):
        claims.check("x", 1.0, "<", 2.0, source="theory")


def test_report_writes_record_and_raises_on_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run = nnapprox.setup("demo", "quick", "cpu", 3, quick={"a": 1}, full={"a": 2})
    run.claims.check("holds", torch.tensor(0.5), "<", 1.0, source="a bound")
    run.claims.check("deliberately false", 2.0, "<", 1.0, source="a bound")
    with pytest.raises(nnapprox.ClaimError, match="1 of 2 claims failed.*deliberately false"):
        run.report()
    record = json.loads((tmp_path / "demo.json").read_text())
    assert {"chapter", "profile", "device", "seed", "seconds", "claims"} <= set(record)
    assert (record["chapter"], record["profile"], record["device"], record["seed"]) == ("demo", "quick", "cpu", 3)
    names = {c["name"]: c for c in record["claims"]}
    assert names["holds"]["passed"] is True and names["holds"]["value"] == 0.5
    assert names["deliberately false"]["passed"] is False
    for c in record["claims"]:
        assert {"name", "value", "op", "threshold", "source", "passed"} <= set(c)


def test_a_chapter_without_claims_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run = nnapprox.setup("empty", "quick", "cpu", 0, quick={}, full={})
    with pytest.raises(nnapprox.ClaimError, match="recorded no claim"):
        run.report()
    assert json.loads((tmp_path / "empty.json").read_text())["claims"] == []
