"""The prose meter (``make prose``) and numbers typed into the text (``tests/prose.py``)."""

import json

import pytest

import harness
import prose

SYNTHETIC = """---
kernelspec:
  name: python3
---

# A chapter

The loss fell to 0.75 after training, and the rate is {glue:text}`rate:.2f` as measured.
In math the value $p = 0.25$ is fine, and so is {math}`q = 0.5`, and

$$
r = 0.125
$$

and the paper reports 0.873 (allowlisted), while Section 2.1 names a section.
The learning rate 3e-4 and 1.5 % and a code span `lr = 0.1` remain.

```{code-cell} ipython3
x = 0.33
```

```{admonition} How this is checked
:class: dropdown

The threshold 0.99 is folded away.
```

## Exercises

```{exercise}
:label: ex-a

Show that 0.66 is a number.
```

Prose after the exercises heading is part of that section: 0.42.

## Next section

Back in the main text: 2.5 standard errors.
"""


def _write(tmp_path, text=SYNTHETIC, allow=""):
    chapter = tmp_path / "toy.md"
    chapter.write_text(text)
    allowlist = tmp_path / "allow.txt"
    allowlist.write_text(allow)
    return chapter, allowlist


def test_unglued_decimal_is_flagged_and_glued_math_allowlisted_are_not(tmp_path):
    chapter, allowlist = _write(
        tmp_path, allow="# comment\nstrict: toy\ntoy | 0.873 | the paper's value, Table 2\n")
    found = [d.number for d in prose.unglued_decimals(chapter, allowlist)]
    assert found == ["0.75", "3e-4", "1.5 %", "2.5"]
    first = prose.unglued_decimals(chapter, allowlist)[0]
    assert first.line == 8 and "fell to 0.75" in first.context
    assert prose.read_allowlist(allowlist).strict == ["toy"]


def test_allowlist_entry_without_a_reason_is_an_error(tmp_path):
    chapter, allowlist = _write(tmp_path, allow="toy | 0.873 |\n")
    with pytest.raises(ValueError, match="citation or reason"):
        prose.unglued_decimals(chapter, allowlist)


def test_main_text_leaves_out_code_dropdowns_exercises_and_math(tmp_path):
    chapter, _ = _write(tmp_path)
    text = " ".join(prose.prose_text(p.text) for p in prose.main_text_paragraphs(chapter))
    assert "fell to 0.75" in text and "Back in the main text" in text
    for absent in ("kernelspec", "x = 0.33", "0.99", "0.66", "0.42", "0.125", "p = 0.25"):
        assert absent not in text, absent


def test_checking_sentences_are_counted_by_the_documented_terms(tmp_path):
    chapter, _ = _write(tmp_path, text="Networks approximate functions well. The claim holds "
                        "at four standard errors.\n\nA seed is fixed.\n")
    count = prose.measure(chapter)
    assert count.words == 4 + 7 + 4
    assert count.checking_words == 7 + 4
    assert count.terms == {"claim": 1, "standard errors": 1, "seed": 1}


def test_strict_chapters_have_no_unglued_decimals():
    """Chapters on the allowlist's ``strict:`` line type no result into their prose."""
    allow = prose.read_allowlist()
    chapters = {p.stem: p for p in harness.toc_notebooks()}
    assert allow.strict, "book/prose-numbers.txt names no strict chapter"
    problems = []
    for stem in allow.strict:
        assert stem in chapters, f"strict chapter {stem!r} is not a chapter of _toc.yml"
        problems += [f"{chapters[stem].relative_to(harness.ROOT)}:{d.line}: {d.number} "
                     f"in '...{d.context}...'" for d in prose.unglued_decimals(chapters[stem])]
    assert not problems, ("decimals typed into the prose (glue them from the run, or list them "
                          "in book/prose-numbers.txt with a citation):\n" + "\n".join(problems))


def test_prose_meter_reports_every_chapter(tmp_path):
    data = prose.report(out=tmp_path)
    stems = [p.stem for p in harness.toc_notebooks()]
    assert [c["chapter"] for c in data["chapters"]] == stems
    assert all(c["words"] > 0 for c in data["chapters"])
    assert json.loads((tmp_path / "prose.json").read_text())["chapters"]
    table = (tmp_path / "prose.md").read_text()
    assert all(f"| {stem} |" in table for stem in stems)
