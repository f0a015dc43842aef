"""The submission's functions, run in a process of their own and called from the tests by message.

    python -P -m nnapprox.assignments._call_server JOB.json

Part of the clean grading process (:mod:`._clean_grade`). The grading process never runs the
student's code: it starts this server, which builds the notebook's namespace exactly as the
grader does (modules, plain values, trusted handed-out cells, the submission's definitions)
and then answers calls. The grading process holds, under each function's name, a *proxy*
that sends the arguments, waits for the result and returns it. Whatever the student's code
does here (patching ``builtins``, ``sys.modules``, torch or the test's frames) happens in a
process the tests do not run in.

Messages are one JSON object per line, values in the tagged form of :mod:`._answers`, which is
read back without executing anything (no pickle):

- server to grader, once at the start: ``{"defined": [names], "problems": [...]}``;
- grader to server: ``{"forbidden": ["module.name", ...]}`` sets the functions (the
  project's library, or another package's: ``numpy.linalg.lstsq``) that raise
  ``AssertionError`` during the question's calls, or
  ``{"call": name, "args": [...], "kwargs": [...]}``;
- server to grader: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": type, "message": ...}``,
  each with ``"generators"``: the states that the call left its ``torch.Generator`` arguments in
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
        self.job_path.write_text(json.dumps({k: job.get(k) for k in ("answers", "sources", "trusted", "existed")}))
        self.cwd = Path(cwd)
        # the sandbox wrapper (:mod:`._sandbox`) the server runs in, when grading uses one
        self.prefix: list[str] = [str(a) for a in job.get("sandbox_cmd") or []]
        self.proc: subprocess.Popen | None = None
        self.busy = False
        self.forbidden: list[str] = []
        self.defined: list[str] = []
        self.problems: list[str] = []
        self._start()

    def _start(self) -> None:
        self.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_"))}
        self.proc = subprocess.Popen(self.prefix + [sys.executable, "-P", "-m", "nnapprox.assignments._call_server",
                                      str(self.job_path)], cwd=self.cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        hello = self._read()
        self.defined = [str(n) for n in hello.get("defined", [])]
        self.problems = [str(p) for p in hello.get("problems", [])]
        self.busy = False
        if self.forbidden:
            self._send({"forbidden": self.forbidden})
            self._read()

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
        if self.busy or self.proc is None or self.proc.poll() is not None:
            self._start()
            return
        self._send({"forbidden": self.forbidden})
        self._read()

    def call(self, name: str, args: tuple, kwargs: dict):
        if self.busy or self.proc is None or self.proc.poll() is not None:
            self._start()  # the last call was interrupted, or the process ended: a fresh one
        request = {"call": name, "args": _encode_call(list(args)), "kwargs": _encode_call(dict(kwargs))}
        self.busy = True
        self._send(request)
        reply = self._read()  # an alarm here leaves busy set
        self.busy = False
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


def _forbid(names: list[str], ns: dict, saved: dict) -> None:
    """Make each function in ``names`` raise wherever the notebook, the project's library or
    the name's own package (``numpy`` for ``numpy.linalg.lstsq``) holds it: under any name in
    the notebook, as an attribute of any of those modules (so ``np.linalg.lstsq`` and
    ``scipy.stats.linregress`` refuse as well as ``from numpy.linalg import lstsq``), and in a
    default argument of the submission's functions. The previous question's set is put back first."""
    from ._snapshot import _import

    for key, (space, value) in list(saved.items()):
        if key[0] == "defaults":
            key[1].__defaults__, key[1].__kwdefaults__ = value  # a function's defaults, put back
        else:
            space[key[1]] = value  # the previous question's set, put back
    saved.clear()
    for full in names:
        module, _, attr = full.rpartition(".")
        target = _import(module)
        real = getattr(target, attr, None) if target is not None else None
        if real is None:
            continue

        def refuse(*args, _name=full, **kwargs):
            raise AssertionError(f"this question forbids {_name}")

        # the notebook, the library, and the package the name comes from: ``np.linalg.lstsq``
        # is reached through the module ``numpy.linalg``, whose attribute then refuses too
        roots = {"nnapprox", module.split(".")[0]}
        spaces = [ns] + [space for n, m in list(sys.modules.items())
                         if m is not None and n.split(".")[0] in roots
                         and isinstance(space := getattr(m, "__dict__", None), dict)]
        for space in spaces:
            for key, value in list(space.items()):
                if value is real:
                    saved.setdefault((id(space), key), (space, value))
                    space[key] = refuse
        for f in [v for v in ns.values() if isinstance(v, types.FunctionType)]:
            inner = getattr(f, "__wrapped__", f)  # the guard wraps the submission's function
            defaults, kw = inner.__defaults__ or (), inner.__kwdefaults__ or {}
            if any(v is real for v in defaults) or any(v is real for v in kw.values()):
                saved.setdefault(("defaults", inner), (None, (inner.__defaults__, inner.__kwdefaults__)))
                inner.__defaults__ = tuple(refuse if v is real else v for v in defaults) or None
                inner.__kwdefaults__ = {k: refuse if v is real else v for k, v in kw.items()} or None


def serve(job_path: str) -> int:
    out = os.fdopen(os.dup(1), "w", buffering=1)  # the replies; fd 1 now goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from ._clean_grade import build_namespace, define_student_code

    job = json.loads(Path(job_path).read_text())
    problems: list[str] = []
    ns, _, existed = build_namespace(job, problems)
    names = define_student_code(ns, job.get("sources") or [], problems, job.get("existed") or existed)
    defined = sorted({n for n in names if isinstance(ns.get(n), types.FunctionType)})
    out.write(json.dumps({"defined": defined, "problems": problems}) + "\n")
    saved: dict = {}
    for line in sys.stdin:
        states: dict = {}
        try:
            request = json.loads(line)
            if "forbidden" in request:
                _forbid([str(n) for n in request["forbidden"]], ns, saved)
                reply = {"ok": True, "result": _encode(None)}
            else:
                name = str(request["call"])
                if name not in defined:
                    raise NameError(f"the submission defines no function {name}")
                args, kwargs = _decode(request["args"]), _decode(request["kwargs"])
                try:
                    reply = {"ok": True, "result": _encode(ns[name](*args, **kwargs))}
                finally:
                    states = {k: _encode(g.get_state()) for k, g in _generators(args, kwargs).items()}
                reply["generators"] = states
        except BaseException as e:  # noqa: BLE001 - reported to the test as the call's error
            if isinstance(e, KeyboardInterrupt):
                raise
            reply = {"ok": False, "error": type(e).__name__, "message": str(e)[:1000],
                     "generators": states}
        try:
            out.write(json.dumps(reply) + "\n")
        except (TypeError, ValueError):
            out.write(json.dumps({"ok": False, "error": "TypeError", "message": "unreadable result"}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
