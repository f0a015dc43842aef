"""The submission's functions, run in a process of their own and called from the tests by message.

    python -P -m nnapprox.assignments._call_server JOB.json

Part of the clean grading process (:mod:`._clean_grade`). The grading process never runs the
student's code: it starts this server, which builds the notebook's namespace exactly as the
grader does (modules, plain values, trusted handed-out cells, the submission's definitions)
and then answers calls. The grading process holds, under each function's name, a *proxy*
that sends the arguments, waits for the result and returns it. Whatever the student's code
does here (patching ``builtins``, ``sys.modules``, torch or the test's frames) happens in a
process the tests do not run in.

Before any of the student's code is defined here, every function that any question forbids
(the job's ``guarded``) is replaced wherever a module or the namespace holds it by a guard
(:func:`_guards`) that refuses while the current question forbids it: a reference the code
stashes (a class body, a default, a list) is the guard. ``builtins``, ``sys.modules``,
``json`` and the grader's modules are recorded then too (:func:`_watch`), and checked after
the definitions and after every call; what changed is reported (``"tampered"``) and put back
before anything else runs. The grader starts a new server for each question
(:meth:`CallServer.begin`), so nothing carries from one question's calls to the next.

Messages are one JSON object per line, values in the tagged form of :mod:`._answers`, which is
read back without executing anything (no pickle):

- server to grader, once at the start: ``{"defined": [names], "problems": [...], "missing":
  {name: why}, "tampered": [...]}`` (``missing``: top-level names the functions read that
  could not be carried over; ``tampered``: what defining the code changed);
- grader to server: ``{"forbidden": ["module.name", ...]}`` sets the functions (the
  project's library, or another package's: ``numpy.linalg.lstsq``) that raise
  ``AssertionError`` during the question's calls, or
  ``{"call": name, "args": [...], "kwargs": [...]}``;
- server to grader: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": type, "message": ...}``,
  each with ``"tampered"`` (what the call changed), ``"refused"`` (the guards that refused)
  and ``"generators"``: the states that the call left its ``torch.Generator`` arguments in
  (they travel as copies of their state), which the proxy gives to the caller's generators.

When the job has a ``sandbox_cmd`` (:mod:`._sandbox`), the server runs inside that wrapper:
it cannot read the hidden tests, the builds or the other submissions.

The server writes its messages on a duplicate of its standard output taken before any student
code runs; what the student's code prints goes to standard error.
"""

from __future__ import annotations

import builtins
import json
import os
import subprocess
import sys
import types
from pathlib import Path

from ._answers import _decode, _encode

#: Built-in exception types a proxy re-raises by name; any other is raised as ``RuntimeError``.
_REBUILT = {name: obj for name, obj in vars(builtins).items()
            if isinstance(obj, type) and issubclass(obj, Exception)}


def _encode_call(value):
    try:
        return _encode(value)
    except Exception as e:  # noqa: BLE001 - not plain data, too large: the call cannot be made
        raise TypeError(f"the grader cannot pass these arguments to the submission's function: "
                        f"{e}") from None


class CallServer:
    """The server process and its proxies. ``call`` blocks until the result arrives; a call
    interrupted (the question's time limit) leaves the server busy, and the next call restarts
    it, so a question never waits on the previous one's computation."""

    def __init__(self, job: dict, cwd: Path):
        self.job_path = Path(cwd) / "server-job.json"
        self.job = {k: job.get(k) for k in ("answers", "sources", "trusted", "existed", "statement_limit")}
        # every question's forbidden helpers: guarded before any of the student's code is defined
        self.guarded: list[str] = sorted({str(n) for names in (job.get("forbid") or job.get("forbidden") or {}).values() for n in names})
        self._write_job()
        self.cwd = Path(cwd)
        # the sandbox wrapper (:mod:`._sandbox`) the server runs in, when grading uses one
        self.prefix: list[str] = [str(a) for a in job.get("sandbox_cmd") or []]
        self.proc: subprocess.Popen | None = None
        self.busy = False
        self.used = False  # a call has been made to this process: the next question needs a fresh one
        self.forbidden: list[str] = []
        self.defined: list[str] = []
        self.problems: list[str] = []
        self.missing: dict[str, str] = {}
        self.at_definition: list[str] = []  # what defining the submission's code changed there
        self.tampered: list[str] = []  # what the calls since :meth:`begin` changed there
        self.refused: list[str] = []  # the forbidden helpers those calls tried
        self._start()

    def _write_job(self) -> None:
        self.job_path.write_text(json.dumps({**self.job, "guarded": self.guarded}))

    def _start(self) -> None:
        self.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_"))}
        self.proc = subprocess.Popen(self.prefix + [sys.executable, "-P", "-m", "nnapprox.assignments._call_server",
                                      str(self.job_path)], cwd=self.cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        hello = self._read()
        self.defined = [str(n) for n in hello.get("defined", [])]
        self.problems = [str(p) for p in hello.get("problems", [])]
        self.missing = {str(k): str(v) for k, v in (hello.get("missing") or {}).items()}
        self.at_definition = [str(t) for t in hello.get("tampered") or []]
        self.busy = False
        self.used = False
        if self.forbidden:
            self._send({"forbidden": self.forbidden})
            self._read()

    def begin(self, names: list[str]) -> None:
        """A new question: a process that no earlier question's calls have touched (nothing its
        code stored or patched carries over), whose forbidden helpers are ``names``."""
        self.tampered, self.refused = [], []
        if self.used:
            self.close()
        self.set_forbidden(names)

    def _send(self, message: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def _read(self) -> dict:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the submission's process ended (its code exited or crashed)")
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            raise RuntimeError("the submission's process sent a malformed reply") from None
        if not isinstance(message, dict):
            raise RuntimeError("the submission's process sent a malformed reply")
        return message

    def set_forbidden(self, names: list[str]) -> None:
        """Library functions that raise during the next calls (a question's forbidden helpers)."""
        self.forbidden = list(names)
        if not set(self.forbidden) <= set(self.guarded):  # not guarded in this process: a new one
            self.guarded = sorted(set(self.guarded) | set(self.forbidden))
            self._write_job()
            self.close()
        if self.busy or self.proc is None or self.proc.poll() is not None:
            self._start()
            return
        self._send({"forbidden": self.forbidden})
        self._read()

    def call(self, name: str, args: tuple, kwargs: dict):
        if self.busy or self.proc is None or self.proc.poll() is not None:
            self._start()  # the last call was interrupted, or the process ended: a fresh one
        request = {"call": name, "args": _encode_call(list(args)), "kwargs": _encode_call(dict(kwargs))}
        self.busy = self.used = True
        self._send(request)
        reply = self._read()  # an alarm here leaves busy set
        self.busy = False
        self.tampered.extend(str(t) for t in reply.get("tampered") or [])
        self.refused.extend(str(t) for t in reply.get("refused") or [])
        _advance(args, kwargs, reply.get("generators") or {})
        if reply.get("ok") is True:
            return _decode(reply["result"])
        kind, message = str(reply.get("error", "RuntimeError")), str(reply.get("message", ""))[:1000]
        error: Exception = RuntimeError(f"{kind}: {message}")
        if kind in _REBUILT:
            try:
                error = _REBUILT[kind](message)
            except TypeError:  # an exception type that takes other arguments
                pass
        raise error

    def proxy(self, name: str):
        server = self

        def call(*args, **kwargs):
            return server.call(name, args, kwargs)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = f"the submission's {name}, run in its own process"
        return call

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            self.proc = None


def _generators(args, kwargs) -> dict:
    """The ``torch.Generator`` arguments of a call, by position (``"0"``) or keyword."""
    import torch

    found = {str(i): a for i, a in enumerate(args) if isinstance(a, torch.Generator)}
    found.update({k: v for k, v in kwargs.items() if isinstance(v, torch.Generator)})
    return found


def _advance(args, kwargs, states: dict) -> None:
    """Give the caller's generators the states their copies reached in the server, so that a
    generator passed to the student's function has drawn what the function drew."""
    import torch

    for key, g in _generators(args, kwargs).items():
        state = _decode(states[key]) if key in states else None
        if isinstance(state, torch.Tensor) and state.dtype == torch.uint8:
            try:
                g.set_state(state)
            except (RuntimeError, ValueError):
                pass


def _guards(names: list[str], ns: dict) -> tuple[set, dict]:
    """Replace each function of ``names`` (every question's forbidden helpers), everywhere a
    module or the notebook's namespace holds it, by a guard that raises ``AssertionError``
    while the returned set names it (the question being graded forbids it) and otherwise
    calls the real one. Run before any of the student's code is defined: whatever the code
    then looks up or stashes (in a class body, a default argument, a list, under any name,
    through ``operator.attrgetter``) is the guard. A library function that calls a forbidden
    one through its module (numpy's ``polyfit`` calls ``lstsq``) reaches the guard too.

    The guard holds the real function in its closure only (no ``__wrapped__``), and uses no
    name the student's code could replace: ``in`` on a set, and an exception class bound here.
    Returns the set (the question's forbidden names go in it) and the list of the names whose
    guard refused a call (for the flag)."""
    from ._snapshot import _import

    active: set = set()
    refused: list = []
    for full in names:
        module, _, attr = full.rpartition(".")
        target = _import(module)
        real = vars(target).get(attr) if isinstance(getattr(target, "__dict__", None), dict) else None
        if real is None or not callable(real):
            continue
        guard = _guard(real, full, active, refused)
        spaces = [ns]
        for m in list(sys.modules.values()):
            try:
                space = getattr(m, "__dict__", None) if m is not None else None
            except Exception:  # noqa: BLE001 - a lazy module that cannot say
                space = None
            if isinstance(space, dict):
                spaces.append(space)
        for space in spaces:
            for key, value in list(space.items()):
                if value is real:
                    space[key] = guard
    return active, refused


def _guard(real, full: str, active: set, refused: list):
    refuse, record = AssertionError, refused.append
    message = f"this question forbids {full}"

    def guard(*args, **kwargs):
        if full in active:
            record(full)
            raise refuse(message)
        return real(*args, **kwargs)

    for key in ("__name__", "__qualname__", "__doc__", "__module__"):
        value = getattr(real, key, None)
        if isinstance(value, str):
            setattr(guard, key, value)
    return guard


#: modules whose dictionaries the function process checks after every call, besides
#: ``builtins``: what it relies on to answer (the grader's own modules, ``json``) and where
#: the forbidden helpers' guards live
_WATCHED = ("builtins", "sys", "json", "json.encoder", "json.decoder", "json.scanner", "base64", "operator",
            "functools", "types")


def _watch(extra: list[str]):
    """A check of ``builtins``, ``sys.modules`` and the dictionaries of :data:`_WATCHED`, the
    grader's modules (``nnapprox.assignments.*``) and the modules of ``extra`` (dotted names
    of the guarded helpers), recorded now: ``check()`` returns what changed since (a changed,
    added or removed entry of ``builtins`` or of the grader's modules, a changed or removed
    one elsewhere) and puts it back. It uses only what it bound here, not a builtin the
    student's code could have replaced since."""
    roots = set(_WATCHED) | {m for m in sys.modules if m.startswith("nnapprox.assignments")}
    roots |= {n.rpartition(".")[0] for n in extra}
    strict = {"builtins"} | {m for m in roots if m.startswith("nnapprox.assignments")}
    modules = sys.modules
    saved = [(key, key in strict, space, dict(space)) for key in sorted(roots)
             if (m := modules.get(key)) is not None and isinstance(space := getattr(m, "__dict__", None), dict)]
    entries = [(key, modules[key]) for key in sorted(roots) if key in modules]
    missing = object()
    get, setitem, delitem, append = dict.get, dict.__setitem__, dict.__delitem__, list.append
    keys, listed = dict.keys, list

    def check() -> list:
        changed: list = []
        for key, module in entries:
            if get(modules, key, missing) is not module:
                append(changed, f"sys.modules[{key!r}]")
                setitem(modules, key, module)
        for key, strictly, space, before in saved:
            for name in listed(keys(before)):
                if get(space, name, missing) is not get(before, name):
                    append(changed, f"{key}.{name}")
                    setitem(space, name, get(before, name))
            if strictly:
                for name in listed(keys(space)):
                    if get(before, name, missing) is missing:
                        append(changed, f"{key}.{name} (added)")
                        delitem(space, name)
        return changed

    return check


def serve(job_path: str) -> int:
    out = os.fdopen(os.dup(1), "w", buffering=1)  # the replies; fd 1 now goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from ._clean_grade import STATEMENT_LIMIT, build_namespace, define_student_code, used_globals

    job = json.loads(Path(job_path).read_text())
    problems: list[str] = []
    ns, skipped, existed = build_namespace(job, problems)
    guarded = [str(n) for n in job.get("guarded") or []]
    active, refused = _guards(guarded, ns)  # before any of the student's code runs here
    check = _watch(guarded)
    write, dumps, loads, clear = out.write, json.dumps, json.loads, list.clear
    names = define_student_code(ns, job.get("sources") or [], problems, job.get("existed") or existed,
                                skipped=skipped, limit=job.get("statement_limit") or STATEMENT_LIMIT)
    at_definition = check()  # a class body or a re-run statement that patched the grader
    defined = sorted({n for n in names if isinstance(ns.get(n), types.FunctionType)})
    used = used_globals(ns, names)
    missing = {n: why for n, why in skipped.items() if n in used and n not in ns}
    write(dumps({"defined": defined, "problems": problems, "missing": missing, "tampered": at_definition}) + "\n")
    for line in sys.stdin:
        states: dict = {}
        tampered: list = []
        try:
            request = loads(line)
            if "forbidden" in request:
                active.clear()
                active.update(str(n) for n in request["forbidden"])
                reply = {"ok": True, "result": _encode(None)}
            else:
                name = str(request["call"])
                if name not in defined:
                    raise NameError(f"the submission defines no function {name}")
                args, kwargs = _decode(request["args"]), _decode(request["kwargs"])
                try:
                    result = ns[name](*args, **kwargs)
                except NameError as e:
                    tampered = check()
                    gone = getattr(e, "name", None)
                    if gone in missing:
                        raise NameError(f"{e} (the grader could not carry the notebook's top-level "
                                        f"{gone} over: {missing[gone]})") from None
                    raise
                except BaseException:
                    tampered = check()
                    raise
                tampered = check()  # before anything below runs with what the call may have replaced
                try:
                    reply = {"ok": True, "result": _encode(result)}
                finally:
                    states = {k: _encode(g.get_state()) for k, g in _generators(args, kwargs).items()}
                reply["generators"] = states
        except BaseException as e:  # noqa: BLE001 - reported to the test as the call's error
            if isinstance(e, KeyboardInterrupt):
                raise
            reply = {"ok": False, "error": type(e).__name__, "message": str(e)[:1000],
                     "generators": states}
        reply["tampered"], reply["refused"] = tampered, refused[:]
        clear(refused)
        try:
            write(dumps(reply) + "\n")
        except (TypeError, ValueError):
            write(dumps({"ok": False, "error": "TypeError", "message": "unreadable result",
                         "tampered": tampered}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
