"""The main-text prose of a chapter: a word meter, and numbers typed into the text.

``make prose`` (``python tests/prose.py``) writes ``_build/reports/prose.md`` and
``prose.json``: per chapter of ``_toc.yml`` the words of main-text prose and the share of
those words that are about *checking*. The budget is at most 5,000 words and at most 5 %
about checking per chapter; the report names the chapters over it and does not fail.

What counts as main-text prose (:func:`main_text_paragraphs`), read from the MyST source:

- counted: paragraphs, list items and block quotes of the body, also inside theorem,
  proof and other boxes that are open on the page;
- not counted: the YAML front matter; code cells and every other fenced code block; their
  outputs (they are not in the source); display math (``$$``, ``{math}``, amsmath
  environments); anything folded away: a directive with ``:class: dropdown`` (whatever its
  name), ``{dropdown}`` and ``{toggle}``; exercises and solutions (``{exercise}``,
  ``{solution}``, and whole sections headed *Exercises* or *Solutions*); figures
  (``{figure}``, ``{glue:figure}``: captions are not body text); headings; Markdown tables;
  comments (``%`` lines, ``<!-- -->``), targets ``(label)=`` and directive options.

Within a paragraph (:func:`prose_text`) inline math ``$...$`` and ``{math}`` roles are
dropped, a glued value (``{glue:text}``, ``{glue:}``, ``{glue}``) counts as one word,
a cross-reference as its text (one word if it has none), a citation as nothing, a link as
its text. A word is a run of letters and digits, joined by ``'``, ``.`` or ``-``
(``s.e.``, ``k-sparse`` and ``3.2`` are one word each).

**The checking rule.** Paragraphs are split into sentences (at ``.``, ``!`` or ``?``
followed by a space and an upper-case letter, a digit or an opening bracket). A sentence
is about checking when it contains one of :data:`CHECKING_TERMS` (case-insensitive, whole
words): threshold, standard error, s.e., claim, convention, foil, seed, guard, tolerance,
confidence interval or band, check, repeats, pass rate. All its words then count as
checking words; a chapter's checking share is checking words over all words.

**Unglued decimals** (:func:`unglued_decimals`): decimal numbers (``0.75``, ``1.5 %``,
``3.2e-4``, ``1e-3``) in main-text prose outside math, outside glued values and roles, and
outside inline code, that ``book/prose-numbers.txt`` does not list for the chapter.
Numbers that name a part of a text (``Section 2.1``, ``Theorem 3.2``, ``§4.1``) are not
values and are skipped. The allowlist's format is in the file itself; its ``strict:`` line
names the chapters that must have none (``tests/test_prose.py``).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "_build" / "reports"
ALLOWLIST = ROOT / "book" / "prose-numbers.txt"
WORD_BUDGET = 5000
CHECKING_BUDGET = 0.05

# sentences that contain one of these (whole words, any case) are about checking
CHECKING_TERMS = (
    r"thresholds?",
    r"standard errors?",
    r"s\.\s?e\.",
    r"claim(?:s|ed)?",
    r"conventions?",
    r"foils?",
    r"seeds?",
    r"guard(?:s|ed)?",
    r"tolerances?",
    r"confidence (?:intervals?|bands?)",
    r"check(?:s|ed|ing)?",
    r"repeats",
    r"pass rates?",
)
CHECKING_RE = re.compile(r"(?<![\w.])(?:" + "|".join(CHECKING_TERMS) + r")(?!\w)", re.I)

# directives whose body is not prose (code, math, data) or is folded / not body text
LITERAL = {"code-cell", "code", "code-block", "sourcecode", "math", "raw", "eval-rst",
           "bibliography", "nnapprox-status", "glue:math", "list-table", "csv-table"}
FOLDED = {"exercise", "solution", "dropdown", "toggle", "figure", "glue:figure",
          "exercise-start", "solution-start"}
SKIPPED_SECTIONS = re.compile(r"^(?:\d+\.?\s*)?(?:exercises?|solutions?)\b", re.I)

FENCE = re.compile(r"^(\s{0,3})(`{3,}|:{3,})\s*(?:\{([^}\s]+)\})?(.*)$")
OPTION = re.compile(r"^\s*:[\w-]+:")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass
class Paragraph:
    """A paragraph of main-text prose: its first line (1-based) and its Markdown source."""

    line: int
    text: str


def _front_matter_end(lines: list[str]) -> int:
    if lines and lines[0].strip() == "---":
        for i in range(1, len(lines)):
            if lines[i].strip() == "---":
                return i + 1
    return 0


def _options(lines: list[str], start: int) -> tuple[dict[str, str], int]:
    """Directive options after an opening fence (``:key: value`` lines or a ``---`` block)."""
    options: dict[str, str] = {}
    i = start
    if i < len(lines) and lines[i].strip() == "---":
        j = i + 1
        while j < len(lines) and lines[j].strip() != "---":
            key, _, value = lines[j].partition(":")
            options[key.strip()] = value.strip()
            j += 1
        return options, j + 1
    while i < len(lines) and OPTION.match(lines[i]):
        key, value = lines[i].strip()[1:].split(":", 1)
        options[key.strip()] = value.strip()
        i += 1
    return options, i


def main_text_paragraphs(path: Path | str) -> list[Paragraph]:
    """The paragraphs of main-text prose of a MyST chapter (rules in the module docstring)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    paragraphs: list[Paragraph] = []
    buffer: list[str] = []
    first = 0
    # open fences: (character, length, literal body?, excluded?)
    stack: list[tuple[str, int, bool, bool]] = []
    skip_level: int | None = None  # inside an Exercises/Solutions section of this level
    in_comment = False
    math_end: str | None = None  # inside a display-math block that closes with this

    def flush() -> None:
        nonlocal buffer
        text = "\n".join(buffer).strip()
        if text:
            paragraphs.append(Paragraph(first + 1, text))
        buffer = []

    def excluded() -> bool:
        return skip_level is not None or any(entry[3] for entry in stack)

    i = _front_matter_end(lines)
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if in_comment:
            in_comment = "-->" not in line
            i += 1
            continue
        fence = FENCE.match(line)
        top = stack[-1] if stack else None
        # a closing fence: same character, at least as long, nothing after it
        if top and fence and fence.group(2)[0] == top[0] and len(fence.group(2)) >= top[1] \
                and not fence.group(3) and not fence.group(4).strip():
            stack.pop()
            flush()
            i += 1
            continue
        if top and top[2]:  # literal body (code, math): nothing opens inside it
            i += 1
            continue
        if fence and math_end is None:
            flush()
            name = (fence.group(3) or "").lower()
            options, after = _options(lines, i + 1) if name else ({}, i + 1)
            literal = not name or name in LITERAL
            folded = name in FOLDED or "dropdown" in options.get("class", "").split()
            stack.append((fence.group(2)[0], len(fence.group(2)), literal, literal or folded))
            i = after
            continue
        if math_end is not None:  # display math stays in its paragraph, as written
            if not excluded():
                buffer.append(line)
            if math_end in line:
                math_end = None
            i += 1
            continue
        heading = HEADING.match(line)
        if heading and not stack:
            flush()
            level, title = len(heading.group(1)), heading.group(2)
            if skip_level is not None and level <= skip_level:
                skip_level = None
            if SKIPPED_SECTIONS.match(title):
                skip_level = level
            i += 1
            continue
        if stripped.startswith("<!--"):
            flush()
            in_comment = "-->" not in stripped[4:]
            i += 1
            continue
        if (not stripped or stripped == "+++" or stripped.startswith("%")
                or re.match(r"^\(.+\)=$", stripped) or stripped.startswith("|")):
            flush()
            i += 1
            continue
        if stripped.startswith("$$"):
            if stripped == "$$" or "$$" not in stripped[2:]:
                math_end = "$$"
        elif stripped.startswith("\\begin{"):
            env = re.match(r"\\begin\{([^}]+)\}", stripped).group(1)
            if f"\\end{{{env}}}" not in stripped:
                math_end = f"\\end{{{env}}}"
        if excluded():
            i += 1
            continue
        if not buffer:
            first = i
        buffer.append(line)
        i += 1
    flush()
    return paragraphs


# ---------------------------------------------------------------------- inline Markdown
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$|\\begin\{(\w+\*?)\}.*?\\end\{\1\}|\\\[.*?\\\]", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(?:\\.|[^$\\])+?\$|\\\(.*?\\\)", re.S)
ROLE = re.compile(r"\{([\w:.-]*)\}`([^`]*)`")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
URL = re.compile(r"<?https?://\S+>?")
WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*\.?")
SENTENCE_END = re.compile(r"(?<=[.!?])[)\"'’”]*\s+(?=[A-Z0-9(\[\"“])")


def _role_text(match: re.Match) -> str:
    name, content = match.group(1), match.group(2)
    if name in ("math", "eq"):
        return "" if name == "math" else "EQ"
    if name.startswith("glue") or name == "":
        return "GLUED"
    if name.startswith("cite") or name in ("footcite", "bibliography"):
        return ""
    shown = re.match(r"^(.*?)\s*<[^>]*>$", content, re.S)
    if shown:
        return shown.group(1)
    if name in ("doc", "ref", "numref", "prf:ref", "eq", "term", "download", "label"):
        return "REF"
    return content


def prose_text(markdown: str) -> str:
    """The words a reader reads in a paragraph: math and markup gone (module docstring)."""
    text = DISPLAY_MATH.sub(" ", markdown)
    text = INLINE_MATH.sub(" ", text)
    text = ROLE.sub(_role_text, text)
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = LINK.sub(lambda m: m.group(1), text)
    text = URL.sub(" ", text)
    text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", text, flags=re.M)  # list markers
    text = re.sub(r"^\s*>\s?", "", text, flags=re.M)
    text = re.sub(r"[*_]{1,3}(?=\w)|(?<=\w)[*_]{1,3}", "", text)
    return re.sub(r"\s+", " ", text).strip()


def words(text: str) -> list[str]:
    return WORD.findall(text)


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text) if s.strip()]


def is_checking(sentence: str) -> bool:
    return CHECKING_RE.search(sentence) is not None


@dataclass
class ProseCount:
    chapter: str
    source: str
    words: int
    checking_words: int
    checking_share: float
    paragraphs: int
    terms: dict[str, int]
    unglued_decimals: int
    over_budget: list[str]


def measure(path: Path) -> ProseCount:
    """Words of main-text prose and the checking share of one chapter."""
    total = checking = 0
    terms: dict[str, int] = {}
    paragraphs = main_text_paragraphs(path)
    for paragraph in paragraphs:
        for sentence in sentences(prose_text(paragraph.text)):
            n = len(words(sentence))
            total += n
            hits = CHECKING_RE.findall(sentence)
            if hits:
                checking += n
                for hit in hits:
                    terms[hit.lower()] = terms.get(hit.lower(), 0) + 1
    share = checking / total if total else 0.0
    over = []
    if total > WORD_BUDGET:
        over.append(f"{total} words > {WORD_BUDGET}")
    if share > CHECKING_BUDGET:
        over.append(f"checking {share:.1%} > {CHECKING_BUDGET:.0%}")
    try:
        n_decimals = len(unglued_decimals(path))
    except ValueError:
        n_decimals = -1
    source = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    return ProseCount(path.stem, source, total, checking, round(share, 4), len(paragraphs),
                      dict(sorted(terms.items(), key=lambda kv: -kv[1])), n_decimals, over)


# ---------------------------------------------------------------------- unglued decimals
DECIMAL = re.compile(
    r"(?<![\w.])[-−]?(?:\d+\.\d+(?:[eE][-+−]?\d+)?|\d+[eE][-+−]?\d+)(?:\s?%)?(?![\w]|\.\d)"
)
PART_OF_TEXT = re.compile(
    r"(?:§|\b(?:sections?|theorems?|lemmas?|propositions?|corollar(?:y|ies)|definitions?|"
    r"examples?|exercises?|eqs?\.?|equations?|figs?\.?|figures?|tables?|appendix|chapters?|"
    r"remarks?|algorithms?|assumptions?|version|python|torch|v)\s*)$",
    re.I,
)


@dataclass
class Decimal:
    """A decimal number typed into the prose: as written, its line, and the text around it."""

    number: str
    line: int
    context: str


@dataclass
class Allowlist:
    strict: list[str]
    entries: dict[str, set[str]]


def _normal(number: str) -> str:
    return re.sub(r"\s+", "", number).replace("−", "-")


def read_allowlist(path: Path = ALLOWLIST) -> Allowlist:
    """``strict: a b`` and ``<chapter> | <number> | <citation or reason>`` lines; ``#`` comments.

    An entry without a citation or reason, or a line in neither form, is a ``ValueError``.
    """
    strict: list[str] = []
    entries: dict[str, set[str]] = {}
    if not Path(path).exists():
        return Allowlist(strict, entries)
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if raw.lstrip().startswith("#") else raw.strip()
        if not line:
            continue
        if line.lower().startswith("strict:"):
            strict += [s for s in re.split(r"[\s,]+", line.split(":", 1)[1]) if s]
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 3 or not fields[0] or not fields[1] or not "|".join(fields[2:]).strip():
            raise ValueError(f"{path}:{n}: expected '<chapter> | <number> | <citation or reason>'"
                             f" with a citation or reason, got {raw!r}")
        entries.setdefault(fields[0], set()).add(_normal(fields[1]))
    return Allowlist(strict, entries)


def _mask(markdown: str) -> str:
    """The paragraph with math, roles, code spans and link targets blanked (same length)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    text = DISPLAY_MATH.sub(blank, markdown)
    text = INLINE_MATH.sub(blank, text)
    text = ROLE.sub(blank, text)
    text = CODE_SPAN.sub(blank, text)
    text = re.sub(r"\]\([^)]*\)", blank, text)
    return URL.sub(blank, text)


def unglued_decimals(path: Path | str, allowlist: Path | str = ALLOWLIST) -> list[Decimal]:
    """Decimal numbers in the chapter's main-text prose that are neither math, glued, nor
    listed for this chapter in the allowlist (module docstring)."""
    path = Path(path)
    allowed = read_allowlist(Path(allowlist)).entries.get(path.stem, set())
    found = []
    for paragraph in main_text_paragraphs(path):
        masked = _mask(paragraph.text)
        for match in DECIMAL.finditer(masked):
            if PART_OF_TEXT.search(masked[max(0, match.start() - 20):match.start()]):
                continue
            number = match.group(0)
            if _normal(number) in allowed or _normal(number).lstrip("-") in allowed:
                continue
            line = paragraph.line + paragraph.text.count("\n", 0, match.start())
            context = re.sub(r"\s+", " ",
                             paragraph.text[max(0, match.start() - 40):match.end() + 40])
            found.append(Decimal(number, line, context.strip()))
    return found


# ---------------------------------------------------------------------- the report
def chapters() -> list[Path]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import harness

    return harness.toc_notebooks()


def report(paths: list[Path] | None = None, out: Path = REPORTS) -> dict:
    """Measure every chapter and write ``prose.json`` and ``prose.md`` under ``out``."""
    counts = [measure(p) for p in (paths if paths is not None else chapters())]
    data = {
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "budget": {"words": WORD_BUDGET, "checking_share": CHECKING_BUDGET},
        "checking_terms": list(CHECKING_TERMS),
        "chapters": [asdict(c) for c in counts],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "prose.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Prose budget",
        "",
        f"Main-text words per chapter (budget {WORD_BUDGET:,}) and the share of them in sentences",
        f"about checking (budget {CHECKING_BUDGET:.0%}); rules in `tests/prose.py`.",
        "",
        "| chapter | words | checking words | checking share | unglued decimals | over budget |",
        "|---|---|---|---|---|---|",
    ]
    for c in counts:
        lines.append(f"| {c.chapter} | {c.words:,} | {c.checking_words:,} | {c.checking_share:.1%} "
                     f"| {c.unglued_decimals} | {'; '.join(c.over_budget) or 'within'} |")
    lines += ["", "Checking terms found, per chapter (sentences that contain them):", ""]
    for c in counts:
        terms = ", ".join(f"{t} {n}" for t, n in list(c.terms.items())[:8]) or "none"
        lines.append(f"- {c.chapter}: {terms}")
    (out / "prose.md").write_text("\n".join(lines) + "\n")
    return data


def main(argv: list[str]) -> int:
    data = report()
    for c in data["chapters"]:
        flag = "; ".join(c["over_budget"]) or "within budget"
        print(f"{c['chapter']:<12} {c['words']:>6} words  checking {c['checking_share']:6.1%}"
              f"  unglued decimals {c['unglued_decimals']:>3}  {flag}")
    print(f"written: {(REPORTS / 'prose.md').relative_to(ROOT)}, prose.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
