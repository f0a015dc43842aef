"""What a submission's source does that an honest answer never needs: flags for the CSV.

Read statically (the code is parsed, never run). The grader does not rely on these flags to
score (hidden tests run in a process the notebook cannot reach, :mod:`._clean_grade`); they
tell the instructor which submissions tried something, so that a zero is explained and a
full score is looked at. :func:`flags` reports

- reassigning, deleting or ``setattr``/``delattr``-ing an attribute of any imported module
  or of something reached from one (``otter.test_files.exception_test.ExceptionTestFile.run``),
  and any direct use of ``__setattr__`` / ``__delattr__`` (``type(m).__setattr__(m, ...)``);
- any use of ``sys.modules``, of ``builtins`` / ``__builtins__``, of ``exec``, ``eval``,
  ``compile`` or ``__import__``;
- frame access: ``sys._getframe``, ``inspect.currentframe``/``stack``/``getouterframes``, and
  the frame and code attributes (``f_back``, ``f_locals``, ``f_globals``, ``tb_frame``,
  ``__code__``, ``__globals__``, ``__closure__``);
- importing ``ctypes``, ``importlib``, ``gc``, ``linecache`` or ``otter`` (other than the
  notebook's own ``grader`` cell);
- calling a method or attribute by a computed name (``operator.methodcaller``, ``attrgetter``) and
  the registries and hooks that reach library functions without their names (:data:`HOOKS`);
- any reference to a forbidden library function (:func:`forbidden_references`): an
  attribute ``D.name``, an import ``from nnapprox.depth import name``, or the name as a
  string (``getattr(D, "name")``), wherever it appears: a call, a default argument, a dict;
  and a module's function of the same name elsewhere (``torch.linalg.lstsq`` or numpy's
  private ``np.linalg._umath_linalg.lstsq`` where ``numpy.linalg.lstsq`` is forbidden);
- reaching the grader's own state: an exception's ``__traceback__``, ``sys.exc_info``,
  ``sys.argv``, a frame attribute's name as a string (``"tb_" + "frame"``), ``getattr`` /
  ``setattr`` / ``hasattr`` / ``delattr`` with a computed name, ``vars`` / ``globals`` /
  ``locals``, opening or listing files (``open``, ``os.listdir``, ``pathlib``, ``glob``,
  ``linecache``, ``numpy.fromfile``, ``numpy.memmap``, ``numpy.load``/``loadtxt``,
  ``torch.from_file``/``load``, ``tokenize``, ``mmap``, and any ``.from_file``/``.tofile``
  attribute), starting a process (``os.system``, ``os.popen``, the
  ``os.exec*`` and ``os.spawn*`` functions, ``subprocess``). A name imported from such a
  module (``from os import system``) counts as the attribute.

The student's functions run in the grading process when the tests call them, so a function
can in principle read the test's frame (the expected value) or the test files. The flags of
:data:`VOIDING` (:func:`voiding`) therefore void every test of the submission (none of them
runs, so no message can carry what the code read): it scores no autograded points, and the
CSV says why, for the instructor to review. Such names live in :data:`FRAME_FUNCS` (per
module, the attributes that void; the module's ``uses M.`` prefix is in :data:`VOIDING`) and
:data:`VOIDING_MODULES` (modules whose import voids). A static check can be evaded by code
obfuscated enough (a file reader the lists above do not name); the
filesystem sandbox (:mod:`._sandbox`, ``grade --sandbox``) is what keeps the files out of the
code's reach.
"""

from __future__ import annotations

import ast
import re

from ._clean_grade import parse_cell

RISKY_MODULES = ("ctypes", "importlib", "gc", "otter", "builtins", "inspect", "traceback", "glob", "pathlib",
                 "io", "subprocess", "shutil", "zipfile", "tempfile", "codecs", "linecache", "pickle", "signal",
                 "multiprocessing", "runpy", "_signal", "_imp", "asyncio", "bdb", "pdb", "code", "codeop",
                 "tokenize", "mmap")
DYNAMIC = ("exec", "eval", "compile", "__import__")
FRAME_ATTRS = ("f_back", "f_locals", "f_globals", "f_builtins", "f_code", "tb_frame", "tb_next", "gi_frame",
               "cr_frame", "__code__", "__globals__", "__closure__", "__builtins__", "__subclasses__",
               "__traceback__", "tb_lasti", "gi_code", "f_trace", "__dict__")
FRAME_FUNCS = {"sys": ("_getframe", "settrace", "setprofile", "modules", "exc_info", "exception", "argv",
                       "_current_frames", "last_traceback", "orig_argv"),
               "os": ("listdir", "scandir", "walk", "environ", "getcwd", "open", "fdopen", "popen", "system",
                      "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe",
                      "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe",
                      "posix_spawn", "posix_spawnp"),
               "numpy": ("fromfile", "load", "save", "savez", "savez_compressed", "savetxt", "DataSource"),
               "torch": ("load", "save"),
               "inspect": ("currentframe", "stack", "getouterframes", "getinnerframes", "trace", "getframeinfo")}
#: attribute names that read or write a file whatever they hang on (``np.memmap``,
#: ``np.lib.format.open_memmap``, ``torch.UntypedStorage.from_file``, ``array.tofile``): flagged,
#: and voiding. Names that read a file only under numpy or torch (``load``) are in FRAME_FUNCS
FILE_ATTRS = ("memmap", "open_memmap", "from_file", "fromfile", "tofile", "loadtxt", "genfromtxt", "fromregex")
OTTER_CELL = "otter.Notebook("
ATTRIBUTE_FUNCS = ("getattr", "setattr", "hasattr", "delattr")
NAMESPACE_FUNCS = ("vars", "globals", "locals", "open")
# flags that void every test (the code could read the grader's frames or files): imports of
# these modules, and the flag prefixes after them
VOIDING_MODULES = ("inspect", "traceback", "gc", "glob", "pathlib", "ctypes", "io", "subprocess", "shutil",
                   "zipfile", "tempfile", "codecs", "linecache",
                   # a signal handler is called with the interrupted frame; importlib makes a fresh
                   # copy of a built-in module (``module_from_spec``), with no audit event
                   "signal", "_signal", "importlib", "_imp",
                   # asyncio hands out coroutine stacks (Task.get_stack), the debuggers trace frames
                   "asyncio", "bdb", "pdb", "code", "codeop",
                   # more ways to read a file: tokenize.open, memory maps
                   "tokenize", "mmap")
VOIDING = (tuple(f"imports {m}" for m in VOIDING_MODULES)
           + ("uses .", "uses sys.", "uses inspect.", "uses os.", "uses numpy.", "uses builtins",
              "computed attribute name", "reads or writes a file",
              *(f"uses torch.{f}" for f in FRAME_FUNCS["torch"]),
              "frame attribute named in a string")
           + tuple(f"uses {f}" for f in DYNAMIC) + tuple(f"calls {f}" for f in NAMESPACE_FUNCS))


#: registries and hooks that reach library functions without their names (a set of every
#: overridable numpy function; torch's function modes and operator library): flagged, not voiding
HOOKS = ("numpy.testing.overrides", "torch.overrides", "torch.library", "torch.utils._python_dispatch")
#: ``operator``'s callables that take an attribute or method name as text
NAME_CALLERS = ("operator.attrgetter", "operator.methodcaller")


#: packages whose private (``_``-prefixed) names reach forbidden routines by other names
#: (``numpy.linalg._umath_linalg.lstsq``): a use of one is flagged for the instructor to read
PRIVATE_CHECKED = ("numpy", "scipy", "torch")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def voiding(found: list[str]) -> list[str]:
    """The flags among ``found`` that void a submission's hidden tests (:data:`VOIDING`)."""
    return [f for f in found if f.startswith(VOIDING)]


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Subscript):  # sys.modules["x"].attr
        inner = _dotted(node.value)
        if inner:
            key = node.slice.value if isinstance(node.slice, ast.Constant) else "?"
            parts.append(f"{inner}[{key!r}]")
            return ".".join(reversed(parts))
    return None


def _aliases(trees: list[ast.Module]) -> dict[str, str]:
    """Local name -> module (or ``module.name``) for every import of the cells."""
    aliases: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _resolve(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    if head in aliases:
        return aliases[head] + ("." + rest if rest else "")
    return dotted


def _trees(sources: list[str]) -> list[ast.Module]:
    out = []
    for src in sources:
        if OTTER_CELL in src:
            continue  # the notebook's own ``import otter; grader = otter.Notebook(...)``
        tree = parse_cell(src)
        if tree is not None:
            out.append(tree)
    return out


def flags(sources: list[str], forbidden: dict[str, list[str]] | None = None, given: list[str] = ()) -> list[str]:
    """Flags (sorted, without duplicates) for the code cells ``sources`` of a submission.

    ``forbidden`` maps a question to the dotted names of the library functions it forbids
    (``{"q1": ["nnapprox.depth.min_errors_with_switches"]}``). Cells identical to one of
    ``given`` (the handed-out notebook's own cells) are trusted: their imports name the
    modules, but nothing in them is flagged.
    """
    aliases = _aliases(_trees(sources))
    modules = set(aliases)
    found: set[str] = set()
    for tree in _trees(_own(sources, given)):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                for n in names:
                    if n.split(".")[0] in RISKY_MODULES:
                        found.add(f"imports {n}")
                dotted_imports = (names if isinstance(node, ast.Import)
                                  else [f"{node.module or ''}.{a.name}" for a in node.names])
                for n in dotted_imports:
                    hook = next((h for h in HOOKS if n == h or n.startswith(h + ".")), None)
                    if hook:
                        found.add(f"reaches library functions without their names ({hook})")
            targets = []
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == "VARIANT":
                    found.add("reassigns VARIANT (graded with the handed-out constants)")
                for sub in ast.walk(t) if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                    dotted = _dotted(sub) if isinstance(sub, ast.Attribute) else None
                    if dotted and dotted.split(".")[0] in modules:
                        found.add(f"{'deletes' if isinstance(node, ast.Delete) else 'reassigns'} "
                                  f"{_resolve(dotted, aliases)}")
            if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Constant):
                callee = _dotted(node.func) if isinstance(node.func, ast.Attribute) else (
                    node.func.id if isinstance(node.func, ast.Name) else None)
                callee = _resolve(callee, aliases) if callee else None
                if callee in NAME_CALLERS:
                    found.add(f"names an attribute in computed text ({callee})")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                fn = node.func.id
                if (fn in ATTRIBUTE_FUNCS and fn not in aliases and len(node.args) > 1
                        and not isinstance(node.args[1], ast.Constant)):
                    found.add(f"computed attribute name ({fn})")
                if fn in NAMESPACE_FUNCS and fn not in aliases:
                    found.add(f"calls {fn}")
                if fn in ("setattr", "delattr") and node.args:
                    dotted = _dotted(node.args[0])
                    if dotted and (dotted.split(".")[0] in modules or "modules[" in dotted):
                        attr = (node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                                else "?")
                        found.add(f"{fn} on {_resolve(dotted, aliases)}.{attr}")
            if isinstance(node, ast.Name) and node.id in ("__builtins__", "builtins") and node.id not in aliases:
                found.add("uses builtins")
            if isinstance(node, ast.Name) and node.id in DYNAMIC:
                found.add(f"uses {node.id}")
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and (node.value in FRAME_ATTRS or node.value.startswith(("tb_", "f_back", "f_loc", "f_glob"))
                         or node.value in ("tb", "f_", "__trace", "traceback__"))):
                found.add(f"frame attribute named in a string ({node.value!r})")
            if isinstance(node, ast.Name) and node.id in aliases:  # from os import system
                root, _, attr = aliases[node.id].partition(".")
                if root in FRAME_FUNCS and attr.split(".")[0] in FRAME_FUNCS[root]:
                    found.add(f"uses {root}.{attr.split('.')[0]}")
                if attr.split(".")[-1] in FILE_ATTRS:  # from numpy import memmap
                    found.add(f"reads or writes a file (.{attr.split('.')[-1]})")
            if isinstance(node, ast.Attribute):
                if node.attr in ("__setattr__", "__delattr__"):  # type(module).__setattr__(module, ...)
                    found.add(f"calls {node.attr} directly")
                if node.attr in FRAME_ATTRS:
                    found.add(f"uses .{node.attr}")
                if node.attr in FILE_ATTRS:
                    found.add(f"reads or writes a file (.{node.attr})")
                dotted = _dotted(node)
                if dotted:
                    full = _resolve(dotted, aliases)
                    root, _, attr = full.partition(".")
                    # numpy's and torch's readers also sit deeper down (numpy.lib.npyio.load)
                    names = attr.split(".") if root in ("numpy", "torch") else attr.split(".")[:1]
                    hit = next((a for a in names if a in FRAME_FUNCS.get(root, ())), None)
                    if hit:
                        found.add(f"uses {root}.{hit}")
                    if full.startswith("builtins."):
                        found.add("uses builtins")
                    parts = full.split(".")
                    first = next((i for i, a in enumerate(parts) if i and _private(a)), None)
                    if root in PRIVATE_CHECKED and first is not None:
                        found.add(f"uses a private name of {root}: {'.'.join(parts[:first + 1])}")
                    hook = next((h for h in HOOKS if full == h or full.startswith(h + ".")), None)
                    if hook:
                        found.add(f"reaches library functions without their names ({hook})")
                    if full.startswith("torch.ops."):
                        found.add("uses torch.ops (the operator registry: forbidden routines by other names)")
    found |= {f"{q}: refers to forbidden {name}" for q, names in forbidden_references(sources, forbidden, given).items()
              for name in names}
    return sorted(found)


def _own(sources: list[str], given: list[str]) -> list[str]:
    """The cells of ``sources`` that are not one of the handed-out cells ``given``."""
    handed = {g.strip() for g in given}
    return [s for s in sources if s.strip() not in handed]


def owners(sources: list[str]) -> list[str | None]:
    """The question each code cell answers: the one whose ``grader.check("qN")`` comes next
    (``None`` after the last check)."""
    out: list[str | None] = [None] * len(sources)
    owner = None
    for i in range(len(sources) - 1, -1, -1):
        m = re.search(r"grader\.check\(\s*['\"](\w+)['\"]", sources[i])
        if m:
            owner = m.group(1)
        out[i] = owner
    return out


def forbidden_references(sources: list[str], forbidden: dict[str, list[str]] | None,
                         given: list[str] = ()) -> dict[str, list[str]]:
    """Per question, the forbidden names (dotted) that the student's own cells refer to in any way.

    A reference counts for every question that forbids the name, except when it sits in the
    cells of another question that allows it (``unroll_with_errors`` may be forbidden in q1
    and asked for in q2).
    """
    if not forbidden:
        return {}
    aliases = _aliases(_trees(sources))
    handed = {g.strip() for g in given}
    out: dict[str, set[str]] = {}
    for src, owner in zip(sources, owners(sources)):
        if src.strip() in handed or OTTER_CELL in src:
            continue
        tree = parse_cell(src)
        if tree is None:
            continue
        used: set[str] = set(_aliases([tree]).values())
        strings: set[str] = set()
        # attributes of an imported module (``np.linalg._umath_linalg.lstsq``,
        # ``torch.linalg.lstsq``): a library function named like a forbidden one counts as it
        reached: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                dotted = _dotted(node)
                if dotted:
                    used.add(_resolve(dotted, aliases))
                    if isinstance(node, ast.Attribute) and dotted.split(".")[0] in aliases:
                        reached.add(_resolve(dotted, aliases))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
        for q, names in forbidden.items():
            for full in names:
                short = full.rsplit(".", 1)[-1]
                alike = sorted(r for r in reached if r != full and r.rsplit(".", 1)[-1] == short)
                if not (full in used or alike or short in strings or any(s.endswith("." + short) for s in strings)):
                    continue
                if owner is not None and owner != q and full not in forbidden.get(owner, []):
                    continue  # allowed (or asked for) in the question this cell answers
                out.setdefault(q, set()).add(full if full in used or not alike else f"{full} (as {', '.join(alike)})")
    return {q: sorted(v) for q, v in sorted(out.items())}
