"""Run an assignment's tests on a student's exported answers, in a process of their own.

    python -m nnapprox.assignments._clean_grade JOB.json RESULT.json

The student's notebook has already run in its own kernel (:mod:`._worker`), which wrote its
plain values to an answers file (:mod:`._answers`). This process never saw that kernel:
nothing the notebook did to ``sys.modules``, ``builtins``, ``torch`` or otter reaches it. It
builds the namespace the tests read from:

1. the modules and library functions the notebook had imported, by name;
2. the notebook's plain values, read back without unpickling;
3. the *trusted* cells of the handed-out notebook (imports, the ``VARIANT`` constants, the
   data each question gives), re-run here, so that editing them in the submission changes
   nothing;
4. the functions and classes the submission defines, from their source (top-level ``def``,
   ``class`` and ``name = lambda ...`` statements only, and only those the kernel had when
   the notebook finished), and, in the call server only, the top-level imports and plain
   assignments that bind a value the answers file could not carry (:func:`statements`,
   :func:`define_student_code`); no other top-level code runs.
   What a function returns to a test must be plain data (an object with rigged comparisons
   cannot pass a test); its own helpers may return anything.

Steps 1-4 also run in a third process, :mod:`._call_server`, and only there are the student's
functions defined: here each of them is a proxy that sends its arguments to that process and
returns the plain data that comes back, so the tests never run the student's code in their
own process. Each question gets a fresh server; during it, the question's forbidden library
functions raise there, and what a call changes there (``builtins``, the grader's modules)
voids the question. A reference to a forbidden function in the student's own cells
(:func:`.static.forbidden_references`) scores that question zero (unless ``accept_voided``).
Before the tests run, this process records ``builtins``, ``sys.modules`` and the dictionaries
of the modules and classes grading relies on; after each question it compares them, and a
question during which anything changed scores zero and is reported as tampering (the
originals are put back before the next question). A question that runs longer than its time
limit scores zero on the tests that did not finish, and the next call starts a fresh server.

The JOB file names ``answers``, ``tests`` (a folder of otter test files), ``sources`` (the
submission's code cells), ``trusted`` (code cells to re-run) and ``question_timeout``.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import re
import signal
import sys
import threading
import time
from pathlib import Path

from ._answerable import Recorder, answerable
from ._call_server import MESSAGE_LIMIT, CallServer
from ._answers import load
from ._snapshot import Snapshot, _import, _on_alarm, _Timeout

_MAGIC = re.compile(r"^(\s*)[%!].*$", re.M)


# CPython 3.11's ast module keeps its recursion counter per interpreter, so two threads
# parsing at once can fail with "AST constructor recursion depth mismatch" (gh-106905);
# `grade --jobs N` reads submissions in threads, so parsing is serialised
_PARSE_LOCK = threading.Lock()


def parse_source(source: str) -> ast.Module | None:
    """``ast.parse`` under :data:`_PARSE_LOCK`, or ``None`` for a syntax error."""
    try:
        with _PARSE_LOCK:
            return ast.parse(source)
    except SyntaxError:
        return None


def parse_cell(source: str) -> ast.Module | None:
    """A code cell's syntax tree (IPython ``%magic`` and ``!shell`` lines read as ``pass``), or ``None``."""
    return parse_source(_MAGIC.sub(r"\1pass", source))


_CHECKS = ("check", "export", "check_all")


def without_checks(source: str) -> str:
    """A code cell without its top-level ``grader.check(...)``/``grader.export(...)`` statements
    (a student who ends an answer cell with the check keeps the answer); the other lines as they
    were. A cell that does not parse loses only the lines that start with such a call."""
    lines = source.splitlines()
    tree = parse_cell(source)
    drop: set[int] = set()
    if tree is None:
        drop = {i for i, line in enumerate(lines) if re.match(r"\s*grader\.(check|export|check_all)\(", line)}
    else:
        for node in tree.body:
            call = node.value if isinstance(node, ast.Expr) else None
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _CHECKS
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == "grader"):
                drop |= set(range(node.lineno - 1, node.end_lineno))
    return "\n".join(line for i, line in enumerate(lines) if i not in drop)


def _definition_source(node: ast.AST, text: str) -> str:
    """The lines of a ``def``/``class`` node, decorators included, from its cell's text."""
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return "\n".join(text.splitlines()[first - 1:node.end_lineno])


def definitions(sources: list[str]) -> list[tuple[str, str]]:
    """``(name, source)`` of each top-level ``def``/``class``/``name = lambda`` of the cells, in order."""
    out = []
    for src in sources:
        text = _MAGIC.sub(r"\1pass", src)
        tree = parse_cell(src)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append((node.name, _definition_source(node, text)))
            elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name)):
                out.append((node.targets[0].id, ast.get_source_segment(text, node) or ""))
    return out


def build_namespace(job: dict, problems: list[str]) -> tuple[dict, dict[str, str], list[str]]:
    """The namespace before the student's definitions (steps 1-3), the names the answers file
    could not carry (name -> why), and the names of the functions and classes the notebook
    defined in its kernel."""
    answers = load(job["answers"])
    skipped = dict(answers["skipped"])
    ns: dict = {"__name__": "__main__", "__builtins__": builtins}
    for name, module in answers["modules"].items():
        m = _import(module)
        if m is not None:
            ns[name] = m
        else:
            skipped[name] = f"module {module} cannot be imported here"
    for name, (module, qualname) in answers["imported"].items():
        obj = _import(module)
        for part in qualname.split("."):
            obj = getattr(obj, part, None) if obj is not None and part != "<locals>" else None
        if obj is not None and callable(obj):
            ns[name] = obj
        else:
            skipped[name] = f"{module}.{qualname} cannot be found by name"
    ns.update(answers["values"])
    for i, src in enumerate(job.get("trusted") or []):
        try:
            exec(compile(_MAGIC.sub(r"\1pass", src), f"<handed-out cell {i}>", "exec"), ns)
        except Exception as e:  # noqa: BLE001 - e.g. a cell that uses the student's answers
            problems.append(f"handed-out cell {i} ({type(e).__name__}: {str(e)[:120]})")
    return ns, skipped, answers["defined"]


def _bound_names(node: ast.AST) -> list[str] | None:
    """The names a top-level import or plain assignment binds (``None`` for any other statement,
    or an assignment to anything but names: ``a.b = ...``, ``a[0] = ...``)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "otter":
            return None
        if any(a.name == "*" for a in node.names):
            return None
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    targets = (node.targets if isinstance(node, ast.Assign)
               else [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else None)
    if targets is None:
        return None
    names = []
    for t in targets:
        for sub in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
            if not isinstance(sub, ast.Name):
                return None
            names.append(sub.id)
    return names


def statements(sources: list[str]) -> list[tuple[str, list[str], str]]:
    """``(kind, names, source)`` of each top-level statement the function process re-runs, in
    order: ``"def"`` for a ``def``, ``class`` or ``name = lambda ...``, ``"import"`` for an
    import, ``"assign"`` for an assignment to plain names (``eigs = partial(...)``). Loops,
    expression statements, augmented assignments and otter's cells are never re-run."""
    out = []
    for src in sources:
        if "otter.Notebook(" in src:
            continue
        src = without_checks(src)
        text = _MAGIC.sub(r"\1pass", src)
        tree = parse_cell(src)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.append(("def", [node.name], _definition_source(node, text)))
            elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name)):
                out.append(("def", [node.targets[0].id], ast.get_source_segment(text, node) or ""))
            else:
                names = _bound_names(node)
                if names:
                    kind = "import" if isinstance(node, (ast.Import, ast.ImportFrom)) else "assign"
                    out.append((kind, names, ast.get_source_segment(text, node) or ""))
    return out


def _run_limited(code, ns: dict, limit: float | None) -> None:
    """``exec(code, ns)``, stopped with :class:`._snapshot._Timeout` after ``limit`` s."""
    if not limit:
        exec(code, ns)
        return
    # the function process installs the handler once and then refuses signal.signal to the code
    installed = signal.getsignal(signal.SIGALRM) is _on_alarm
    old = None if installed else signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        exec(code, ns)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if not installed:
            signal.signal(signal.SIGALRM, old)


#: the longest one re-run top-level statement may take in the function process (seconds)
STATEMENT_LIMIT = 10.0


def define_student_code(ns: dict, sources: list[str], problems: list[str],
                        existed: list[str] | None = None, skipped: dict[str, str] | None = None,
                        limit: float | None = STATEMENT_LIMIT) -> list[str]:
    """Execute the submission's definitions in ``ns`` (only those of names in ``existed``,
    the functions the kernel had, when given); return their names. What a function returns to
    a test must be plain data (:func:`._snapshot.plain`); that is checked where the tests call
    it (:mod:`._call_server`), not when the submission's functions call each other.

    With ``skipped`` (the names the kernel had but the answers file could not carry, and
    why), the imports and plain assignments that bind one of them are re-run too, in the
    notebook's order, each within ``limit`` s: a module-level helper that is not plain data
    (``eigs = functools.partial(torch.linalg.eigvals)``) then exists where the functions run.
    A name that still cannot be made keeps its entry in ``skipped``, with the reason."""
    import types

    from ._answers import ipython_name

    names = []
    todo = statements(sources)
    by_def = {b[0] for kind, b, _ in todo if kind == "def"}
    # a def is re-run when the kernel had its name as a function, or had it as something the
    # answers file could not carry (``@lru_cache`` makes a wrapper), or when the name is one
    # of IPython's (``def _(x)``: the kernel's ``_`` is the last output, not the function)
    keep = (None if existed is None
            else set(existed) | set(skipped or {}) | {n for n in by_def if ipython_name(n)})
    wanted = dict(skipped or {})
    # a function the kernel had that no def makes was made by a top-level statement
    # (``triple = make_scale(3)``, a closure): that statement is re-run too
    made = set(existed or []) - by_def
    wanted.update({n: "a function the notebook made at top level" for n in made if n not in wanted})
    for kind, bound, src in todo:
        if kind == "def":
            if keep is not None and bound[0] not in keep:
                continue
        elif not any(n in wanted for n in bound) or (kind == "import" and all(n in ns for n in bound)):
            continue
        label = bound[0] if kind == "def" else ", ".join(bound)
        try:
            _run_limited(compile(src, f"<submission: {label}>", "exec"), ns, limit)
            if kind == "def":
                names.append(bound[0])
            names.extend(n for n in bound if kind == "assign" and n in made)
            for n in bound:
                if skipped is not None and n in wanted:
                    skipped.pop(n, None)
        except (Exception, _Timeout) as e:  # noqa: BLE001 - reported, its name left undefined
            why = (f"stopped after {limit:g} s" if isinstance(e, _Timeout)
                   else f"{type(e).__name__}: {str(e)[:120]}")
            if kind == "def":
                problems.append(f"definition of {label} failed ({why})")
            else:  # the kernel's value came from this statement: an older one would be wrong
                for n in bound:
                    if skipped is not None and n in wanted:
                        ns.pop(n, None)
                        skipped[n] = f"{wanted[n]}; re-running its statement failed ({why})"
    for n in sorted(made):
        if n not in ns and skipped is not None:
            skipped.setdefault(n, f"{wanted[n]}, by code the grader does not re-run (it re-runs top-level "
                                  "def, class, import and plain assignment statements only)")
    return names


def is_function(value) -> bool:
    """A function the tests may call: a plain function, or a callable that is not a class (what
    a decorator such as ``functools.lru_cache`` or a closure factory returns)."""
    import types

    return isinstance(value, types.FunctionType) or (callable(value) and not isinstance(value, type))


def used_globals(ns: dict, names: list[str]) -> set[str]:
    """The global names the code of the functions and classes ``names`` in ``ns`` reads."""
    import types

    found: set[str] = set()
    todo = []
    for name in names:
        obj = ns.get(name)
        obj = getattr(obj, "__wrapped__", obj)
        if isinstance(obj, types.FunctionType):
            todo.append(obj.__code__)
        elif isinstance(obj, type):
            todo.extend(getattr(getattr(v, "__func__", v), "__code__", None) for v in vars(obj).values())
    seen = set()
    while todo:
        code = todo.pop()
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        seen.add(id(code))
        found.update(code.co_names)
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return found


def run_question(test_file, ns: dict, snapshot: Snapshot, timeout: float, void: str = "",
                 server: CallServer | None = None) -> dict:
    """Run one otter test file's cases against ``ns``; scores from otter's point rules.

    With ``server``, what the calls changed in the submission's process (``builtins``, the
    grader's modules there, checked after every call) voids the question too.
    With ``void`` (the reason), no case runs (a public case's message could carry what the
    student's code read) and every case scores zero."""
    from otter.test_files.abstract_test import TestCaseResult

    results, status = [], []
    ends = time.monotonic() + timeout  # the limit is the question's, shared by its test cases
    stopped = False
    for tc in test_file.test_cases:
        left = ends - time.monotonic()
        if not void and left <= 0.05:
            stopped = True
            message = f"not run: the question's time limit ({timeout:g} s) was used up by the tests before it"
            results.append(TestCaseResult(test_case=tc, message=message, passed=False))
            status.append((tc, False, message))
            continue
        if void:
            message = f"voided: {void}"
            results.append(TestCaseResult(test_case=tc, message=message, passed=False))
            status.append((tc, False, message))
            continue
        func = tc.body.test_func
        params = list(inspect.signature(func).parameters)
        kwargs = {p: (ns if p == "env" else ns.get(p)) for p in params}
        passed, message = True, "passed"
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, left)
        try:
            func(**kwargs)
        except _Timeout:
            stopped = True
            passed, message = False, (f"stopped: no result within the question's time limit ({timeout:g} s); "
                                      "an infinite loop or a very slow function?")
        except BaseException as e:  # noqa: BLE001 - SystemExit or KeyboardInterrupt from student code too
            passed, message = False, f"{type(e).__name__}: {str(e)[:MESSAGE_LIMIT]}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        results.append(TestCaseResult(test_case=tc, message=message, passed=passed))
        status.append((tc, passed, message))
    tampered = snapshot.changes()
    if tampered:
        snapshot.restore()
    if server is not None:  # what the calls changed in the submission's process (put back there)
        tampered += [f"{t} (in the submission's process)" for t in dict.fromkeys(server.tampered)]
    if tampered:
        results = [TestCaseResult(test_case=tc, message="voided: the code tampered: " + ", ".join(tampered[:5])
                                  + " while it was graded", passed=False) for tc, _, _ in status]
    test_file.test_case_results = results
    return {
        "score": float(test_file.score), "possible": float(test_file.possible), "tampered": tampered,
        "stopped": stopped,
        "tests": [{"test": r.test_case.name, "hidden": bool(r.test_case.hidden), "passed": bool(r.passed),
                   "points": None if r.test_case.points is None else float(r.test_case.points),
                   "message": r.message} for r in results],
    }


def _warm_up() -> None:
    """One round trip of the data a call carries (a tensor, a generator's state)."""
    import torch

    from ._answers import _decode, _encode

    g = _decode(_encode(torch.Generator().manual_seed(0)))
    g.set_state(_decode(_encode(g.get_state())))
    _decode(_encode([torch.zeros(2, dtype=torch.float64), torch.randn(1, generator=g)]))
    opaque = getattr(getattr(torch, "_opaque_base", None), "OpaqueBase", None)
    if isinstance(opaque, type):  # its metaclass caches a class on the first failed isinstance
        isinstance(0, type("_Probe", (opaque,), {}))


def main(argv: list[str]) -> int:
    job_path, result_path = argv
    job = json.loads(Path(job_path).read_text())
    problems: list[str] = []
    ns, skipped, existed = build_namespace(job, problems)
    skipped = sorted(skipped)
    # everything grading uses is loaded before any of the student's code runs here
    import otter.test_files
    import otter.test_files.abstract_test as abstract_test
    import otter.test_files.exception_test as exception_test
    import torch

    from otter.test_files import create_test_file

    from . import static

    # the test files are read, and the submission's code checked, before any of it runs here
    test_files = {path.stem: create_test_file(str(path), None) for path in sorted(Path(job["tests"]).glob("*.py"))}
    voids = static.voiding(static.flags(job.get("sources") or [], None, job.get("trusted") or []))
    accepted = bool(voids) and bool(job.get("accept_voided"))  # reviewed by the instructor
    void = ("the submission's code " + "; ".join(voids[:3])
            + " (it could read the grader's frames or files); the instructor reviews it") if voids and not accepted else ""
    watched = [exception_test.ExceptionTestFile, exception_test.test_case, abstract_test.TestFile,
               abstract_test.TestCaseResult, torch.Tensor, torch._C.TensorBase, Snapshot, _Timeout]
    _warm_up()  # torch sets some attributes lazily, on first use: before the snapshot, not during
    snapshot = Snapshot(watched)
    # the submission's functions run in a server process; here each name is a proxy to it
    timeout = float(job.get("question_timeout", 120))
    server = CallServer({**job, "statement_limit": min(STATEMENT_LIMIT, timeout)}, Path.cwd())
    problems.extend(server.problems)
    for name in server.defined:
        ns[name] = server.proxy(name)
    tampered_at_definition = snapshot.changes()
    if tampered_at_definition:
        snapshot.restore()
    summary = {"questions": {}, "tests": {}, "tampered": {}, "problems": problems, "skipped": skipped,
               "answerable": {}, "missing": dict(server.missing), "forbidden_used": {},
               "forbidden_called": {}}
    if void:
        summary["voided"] = voids
    elif accepted:
        summary["voided_accepted"] = voids
    banned = job.get("forbidden") or {}
    forbid = job.get("forbid") or banned
    # a reference to a forbidden helper in the student's own cells costs that question (the
    # guard below stops a call of it; this stops an answer that names it and gets it anyway)
    refers = static.forbidden_references(job.get("sources") or [], forbid,
                                         job.get("given") or job.get("trusted") or [])
    defined = [n for n, _ in definitions(job.get("sources") or [])]
    summary["stopped"] = {}
    deadline = job.get("deadline")  # when the whole submission is killed (time.time())
    progress = job.get("progress")  # partial results, kept if the submission is killed anyway

    def report(current: str | None) -> None:
        if progress:
            tmp = Path(progress + ".tmp")
            tmp.write_text(json.dumps({**summary, "phase": "questions", "current": current}))
            tmp.replace(progress)

    for i, (q, test_file) in enumerate(test_files.items()):
        limit = timeout
        if deadline is not None:  # one loop may not use the time the questions after it need
            limit = min(timeout, max(1.0, (float(deadline) - time.time()) / (len(test_files) - i)))
        report(q)
        recorder = Recorder(ns, defined) if banned.get(q) else None
        server.begin(list(forbid.get(q) or []))  # a fresh process: nothing carries over from the last question
        why = void
        if not why and refers.get(q) and not job.get("accept_voided"):
            why = f"the answer refers to {', '.join(refers[q])}, which this question forbids"
            summary["forbidden_used"][q] = refers[q]
        out = run_question(test_file, ns, snapshot, limit, why, server)
        if out.get("stopped"):
            summary["stopped"][q] = limit
        if server.refused:
            summary["forbidden_called"][q] = sorted(set(server.refused))
        if recorder is not None:
            recorder.restore(ns)
            hits = answerable(recorder.calls, banned[q])
            if hits:
                summary["answerable"][q] = hits
        at_definition = tampered_at_definition + [f"{t} (in the submission's process)" for t in server.at_definition]
        if at_definition:
            out["tampered"] = at_definition + out["tampered"]
            out["score"] = 0.0
            for t in out["tests"]:
                t["passed"] = False
                t["message"] = "voided: defining the submission's functions changed " + ", ".join(at_definition[:5])
        summary["questions"][q] = [out["score"], out["possible"]]
        summary["tests"][q] = out["tests"]
        if out["tampered"]:
            summary["tampered"][q] = out["tampered"]
        report(None)
    server.close()
    Path(result_path).write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
