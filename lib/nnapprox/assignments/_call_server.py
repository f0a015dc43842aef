"""The submission's functions, run in a process of their own and called from the tests by message.

    python -P -m nnapprox.assignments._call_server JOB.json

Part of the clean grading process (:mod:`._clean_grade`). The grading process never runs the
student's code: it starts this server, which builds the notebook's namespace exactly as the
grader does (modules, plain values, trusted handed-out cells, the submission's definitions)
and then answers calls. The grading process holds, under each function's name, a *proxy*
that sends the arguments, waits for the result and returns it. Whatever the student's code
does here (patching ``builtins``, ``sys.modules``, torch or the test's frames) happens in a
process the tests do not run in.

Each server serves one question (:meth:`CallServer.begin` starts a fresh one), so nothing
carries from one question's calls to the next, and the question's forbidden helpers (the
job's ``question_forbids``) are fixed for the life of the process. Before any of the
student's code is defined here, each of them is replaced wherever a module or the namespace
holds it by a guard (:func:`_guards`) that only refuses: a reference the code stashes (a
class body, a default, a list) is the guard, and the guard does not hold the real function.
An audit hook (:func:`_protect`) refuses making a fresh copy of one (running its module's
code again, compiling a copy of its source, searching the garbage collector's objects).
``builtins``, ``sys.modules``, ``json`` and the grader's modules are recorded then too
(:func:`_watch`), and checked after the definitions and after every call; what changed, and
what the hook refused, is reported (``"tampered"``) and put back before anything else runs.

Messages are one JSON object per line, values in the tagged form of :mod:`._answers`, which is
read back without executing anything (no pickle):

- server to grader, once at the start: ``{"defined": [names], "problems": [...], "missing":
  {name: why}, "tampered": [...]}`` (``missing``: top-level names the functions read that
  could not be carried over; ``tampered``: what defining the code changed);
- grader to server: ``{"call": name, "args": [...], "kwargs": [...]}`` (the forbidden
  helpers, the project's or another package's such as ``numpy.linalg.lstsq``, which raise
  ``AssertionError``, are in the job file);
- server to grader: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": type, "message": ...}``,
  each with ``"tampered"`` (what the call changed), ``"refused"`` (the guards that refused)
  and ``"generators"``: the states that the call left its ``torch.Generator`` arguments in
  (they travel as copies of their state), which the proxy gives to the caller's generators.

When the job has a ``sandbox_cmd`` (:mod:`._sandbox`), the server runs inside that wrapper:
it cannot read the hidden tests, the builds or the other submissions.

The server writes its messages on a duplicate of its standard output taken before any student
code runs; what the student's code prints goes to standard error. The student's code could still
write on that duplicate (``os.write`` to its descriptor) a reply of its own, one that reports no
tampering. So every message carries an ``"id"``: a random token that the grader sends (the first
line it writes, before any student code runs, names the greeting's token; each call names its
own), that the server holds only in a frame the code cannot read, and that the grader checks. A
line with another token is a forged reply: the process is killed and the question is void.
"""

from __future__ import annotations

import builtins
import json
import os
import secrets
import subprocess
import sys
import types
from pathlib import Path

from ._answers import _decode, _encode

#: The longest error message of the student's code that reaches a test message (and the feedback)
MESSAGE_LIMIT = 300

#: What a forged reply counts as (a line on the grader's channel that its server did not write)
FORGED = "a reply on the grader's channel that the submission's server did not write (a forged message)"

class ForgedReply(RuntimeError):
    """A line on the grader's channel without the token it sent: :data:`FORGED`."""


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
        self.cwd = Path(cwd)
        # the sandbox wrapper (:mod:`._sandbox`) the server runs in, when grading uses one
        self.prefix: list[str] = [str(a) for a in job.get("sandbox_cmd") or []]
        self.proc: subprocess.Popen | None = None
        self.busy = False
        self.used = False  # a call has been made to this process: the next question needs a fresh one
        self.forbidden: list[str] = []  # the helpers this process refuses, fixed when it starts
        self.defined: list[str] = []
        self.problems: list[str] = []
        self.missing: dict[str, str] = {}
        self.at_definition: list[str] = []  # what defining the submission's code changed there
        self.tampered: list[str] = []  # what the calls since :meth:`begin` changed there
        self.refused: list[str] = []  # the forbidden helpers those calls tried
        self._start()

    def _start(self) -> None:
        self.close()
        self.job_path.write_text(json.dumps({**self.job, "question_forbids": self.forbidden}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "JUPYTER_"))}
        self.proc = subprocess.Popen(self.prefix + [sys.executable, "-P", "-m", "nnapprox.assignments._call_server",
                                      str(self.job_path)], cwd=self.cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        token = secrets.token_hex(16)
        self._send({"id": token})  # the greeting's token, read before any student code runs there
        self.busy = False
        self.used = False
        try:
            hello = self._read(token)
        except ForgedReply:
            self.defined, self.problems, self.missing, self.at_definition = [], [FORGED], {}, [FORGED]
            return
        self.defined = [str(n) for n in hello.get("defined", [])]
        self.problems = [str(p) for p in hello.get("problems", [])]
        self.missing = {str(k): str(v) for k, v in (hello.get("missing") or {}).items()}
        self.at_definition = [str(t) for t in hello.get("tampered") or []]

    def begin(self, names: list[str]) -> None:
        """A new question: a process that no earlier question's calls have touched (nothing its
        code stored or patched carries over), whose forbidden helpers are ``names``."""
        self.tampered, self.refused = [], []
        self.set_forbidden(names)

    def set_forbidden(self, names: list[str]) -> None:
        """The library functions that raise during the next calls (a question's forbidden
        helpers). They are fixed for the life of a process, so other ones mean a new process
        (and so does one that calls have already been made to)."""
        names = sorted({str(n) for n in names})
        if names != self.forbidden or self.used or self.busy or self.proc is None or self.proc.poll() is not None:
            self.forbidden = names
            self._start()

    def _send(self, message: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def _read(self, token: str) -> dict:
        """The next message, which must carry ``token``; a line with another one (or none) is
        forged: the process is killed and :data:`FORGED` raised (the caller voids the question)."""
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the submission's process ended (its code exited or crashed)")
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            message = None
        if not isinstance(message, dict) or message.get("id") != token:
            self.close()
            raise ForgedReply(FORGED)
        return message

    def call(self, name: str, args: tuple, kwargs: dict):
        if self.busy or self.proc is None or self.proc.poll() is not None:
            self._start()  # the last call was interrupted, or the process ended: a fresh one
        token = secrets.token_hex(16)
        request = {"call": name, "args": _encode_call(list(args)), "kwargs": _encode_call(dict(kwargs)),
                   "id": token}
        self.busy = self.used = True
        self._send(request)
        try:
            reply = self._read(token)  # an alarm here leaves busy set
        except ForgedReply:
            self.tampered.append(FORGED)
            raise
        self.busy = False
        self.tampered.extend(str(t) for t in reply.get("tampered") or [])
        self.refused.extend(str(t) for t in reply.get("refused") or [])
        _advance(args, kwargs, reply.get("generators") or {})
        if reply.get("ok") is True:
            return _decode(reply["result"])
        kind, message = str(reply.get("error", "RuntimeError")), str(reply.get("message", ""))[:MESSAGE_LIMIT]
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


def _guards(names: list[str], ns: dict) -> tuple[list, list]:
    """Replace each function of ``names`` (the question's forbidden helpers), everywhere a
    module or the notebook's namespace holds it, by a guard that raises ``AssertionError``.
    Run before any of the student's code is defined: whatever the code then looks up or
    stashes (in a class body, a default argument, a list, under any name, through
    ``operator.attrgetter``) is the guard. A library function that calls a forbidden one
    through its module (numpy's ``polyfit`` calls ``lstsq``) reaches the guard too.

    The guard does not hold the real function (the process serves one question, whose
    forbidden helpers never change), so nothing in it (``__closure__``, its frame) leads
    back to the real one. Returns the real functions (for :func:`_protect`) and the list of
    the names whose guard refused a call (for the flag)."""
    from ._snapshot import _import

    refused: list = []
    reals: list = []
    replacements: list = []
    for full in names:
        module, _, attr = full.rpartition(".")
        target = _import(module)
        real = vars(target).get(attr) if isinstance(getattr(target, "__dict__", None), dict) else None
        if real is None or not callable(real):
            continue
        reals.append((full, target, real))
        replacements.append((real, _guard(real, full, refused)))
    _replace_everywhere(replacements, ns)
    return reals, refused


def _disarm_in_place(reals: list, refused: list) -> list[str]:
    """Make the forbidden functions themselves raise, however the code reaches them.

    :func:`_guards` replaces the names; a function object can also be held where no name is,
    a set (``numpy.testing.overrides.get_overridable_numpy_array_functions()``), a closure, a
    registry. So each forbidden *Python* function (and a numpy dispatcher's
    ``_implementation``, and what ``functools.wraps`` wrapped) gets a new ``__code__`` that
    records the refusal and raises: every route to the object runs it. A forbidden torch
    built-in (``torch.pinverse``, also reachable as the method ``Tensor.pinverse`` and as
    ``torch.ops.aten.pinverse``) is refused by a torch function mode that sees every call
    of that name, and the ways of switching torch function modes off raise (a breach).
    Returns the modules whose dictionaries received the recorder (to be watched)."""
    import inspect
    import types

    record = refused.append
    modules: list[str] = []
    torch_names: dict[str, str] = {}
    seen: set = set()
    for full, _target, real in reals:
        objects = [real, getattr(real, "_implementation", None)]
        try:
            objects.append(inspect.unwrap(real))
        except ValueError:
            pass
        patched = False
        for obj in objects:
            if type(obj) is not types.FunctionType or id(obj) in seen or obj.__code__.co_freevars:
                continue
            seen.add(id(obj))
            code = obj.__code__
            text = (f"def {code.co_name}(*args, **kwargs):\n"
                    f"    __nnapprox_refused__({full!r})\n"
                    f"    raise AssertionError({('this question forbids ' + full)!r})\n")
            space: dict = {}
            exec(compile(text, code.co_filename, "exec"), space)  # noqa: S102 - the grader's own text
            obj.__globals__["__nnapprox_refused__"] = record
            obj.__code__ = space[code.co_name].__code__
            if isinstance(obj.__module__, str):
                modules.append(obj.__module__)
            patched = True
        from_torch = full.startswith("torch.") or (getattr(real, "__module__", None) or "").startswith("torch")
        if not patched and from_torch and isinstance(getattr(real, "__name__", None), str):
            torch_names[real.__name__] = full
    if torch_names:
        _refuse_torch_names(torch_names, record)
    return modules


def _refuse_torch_names(names: dict[str, str], record) -> None:
    """A torch function mode, pushed for the life of the process, that refuses every call whose
    function is named as one of ``names`` (``linalg_pinv``, ``pinverse``: the function, the
    Tensor method and the ``torch.ops.aten`` operator share the name). Turning modes off
    (``DisableTorchFunction``, popping the mode stack, setting the torch-function state,
    ``_skip_one_hop_torch_function``) raises ``PermissionError`` and voids the question."""
    import torch
    from torch.overrides import TorchFunctionMode

    frozen = dict(names)
    refuse = AssertionError

    class RefuseForbidden(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", None)
            key = name.partition(".")[0] if type(name) is str else None
            if key in frozen:
                record(frozen[key])
                raise refuse(f"this question forbids {frozen[key]}")
            return func(*args, **(kwargs or {}))

    RefuseForbidden().__enter__()
    escapes = []
    for attr in ("DisableTorchFunction", "_pop_torch_function_stack", "_set_torch_function_state",
                 "_skip_one_hop_torch_function"):
        real = getattr(torch._C, attr, None)
        if real is None:
            continue

        def refused(*args, _attr=attr, **kwargs):
            _BREACHES[0](f"switches torch's function modes off (torch._C.{_attr})")
            raise PermissionError("grading refuses switching torch's function modes off")

        escapes.append((real, refused))
    _replace_everywhere(escapes, {})


#: where the torch mode's refusals report a breach (set by :func:`serve` to its breach list)
_BREACHES: list = [lambda what: None]


def _replace_everywhere(replacements: list, ns: dict) -> None:
    """For each ``(real, new)`` of ``replacements``, put ``new`` wherever ``ns`` or a loaded
    module's namespace holds ``real`` (one pass over the namespaces for all of them)."""
    by_id = {id(real): new for real, new in replacements}
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
            new = by_id.get(id(value))
            if new is not None:
                space[key] = new


def _refuse_signal_handlers(breaches: list, ns: dict) -> None:
    """Replace ``signal.signal`` everywhere by a refusal that counts as tampering: a handler is
    called with the interrupted frame, whose ``f_back`` leads to the server's own (which holds
    the reply channel and the call's token), and no audit event covers installing one. The
    server's own statement time limit uses the ``SIGALRM`` handler installed before this. A
    fresh copy of the built-in ``_signal`` (``importlib.util.module_from_spec``, no audit
    event) still has the real one; importing ``signal``, ``_signal`` or ``importlib`` voids
    the submission's tests (:data:`.static.VOIDING_MODULES`)."""
    import _signal
    import signal

    record, refuse = breaches.append, PermissionError

    def refused_signal(signalnum, handler):
        record("installs a signal handler (signal.signal: it would receive the grader's frames)")
        raise refuse("grading refuses installing a signal handler")

    # signal.signal is a Python wrapper of the built-in _signal.signal: both are replaced
    _replace_everywhere([(signal.signal, refused_signal), (_signal.signal, refused_signal)], ns)


def _guard(real, full: str, refused: list):
    refuse, record = AssertionError, refused.append
    message = f"this question forbids {full}"

    def guard(*args, **kwargs):
        record(full)
        raise refuse(message)

    for key in ("__name__", "__qualname__", "__doc__", "__module__"):
        value = getattr(real, key, None)
        if isinstance(value, str):
            setattr(guard, key, value)
    return guard


def _files(full: str, target, real) -> set:
    """The source files a forbidden function's code comes from (its own module's, the module
    it was imported from)."""
    import inspect

    found = set()
    objects = [real, getattr(real, "_implementation", None), getattr(real, "__wrapped__", None)]
    try:
        objects.append(inspect.unwrap(real))
    except ValueError:
        pass
    for obj in objects:
        code = getattr(obj, "__code__", None)
        if code is not None and isinstance(code.co_filename, str):
            found.add(code.co_filename)
    for module in (target, sys.modules.get(getattr(real, "__module__", None) or "")):
        f = getattr(module, "__file__", None)
        if isinstance(f, str):
            found.add(f)
    return {f for f in found if not f.startswith("<")}


def _protect(reals: list, allowed: list[str]) -> list:
    """An audit hook (:func:`sys.addaudithook`, which code cannot remove) that refuses what
    would make a second, unguarded copy of a forbidden function: running the code of the
    module that defines it again (``runpy.run_module``, ``importlib.reload``, a module made
    from its file), compiling source text that defines a function of its name (other than the
    submission's own statements, ``allowed``), and reading the garbage collector's object
    lists (``gc.get_objects``, ``get_referrers``, ``get_referents``), where the real function
    may still be found. Each refusal raises ``PermissionError`` in the code that tried it and
    is returned in the list (the question is void: it counts as tampering).

    Whatever the question forbids, the hook also refuses what a graded function never needs
    and what reaches past the guards: starting a process (``subprocess``, ``os.system``,
    ``os.exec*``, ``os.posix_spawn``, ``os.fork``, ``multiprocessing``: a fresh interpreter has
    the real functions), unpickling a name (``pickle.loads(b"cos\\nsystem\\n.")`` fetches any
    function without naming it in the code), ``ctypes``, sockets, and, when the submission's own
    code asks (directly, or through ``inspect``/``traceback``), the interpreter's frames
    (``sys._getframe``, ``tb_frame``, ``gi_frame``: the grader's frames hold its state) and
    ``exec``/``compile``."""
    files: set = set()
    defs: list = []
    for full, target, real in reals:
        files |= _files(full, target, real)
        defs.append(f"def {full.rpartition('.')[2]}(")
    breaches: list = []
    record, refuse = breaches.append, PermissionError
    allowed_text = frozenset(a for a in allowed if type(a) is str)
    gc_events = frozenset(("gc.get_objects", "gc.get_referrers", "gc.get_referents"))
    frozen_files, frozen_defs = frozenset(files), tuple(defs)
    process_events = ("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty")
    always = {"os.system": "starts a process", "pty.spawn": "starts a process",
              "pickle.find_class": "unpickles a name", "ctypes.dlopen": "uses ctypes",
              "ctypes.dlsym": "uses ctypes", "ctypes.cdata": "uses ctypes", "ctypes.call_function": "uses ctypes",
              "ctypes.addressof": "uses ctypes", "ctypes.string_at": "uses ctypes",
              "socket.connect": "opens a network connection", "socket.bind": "opens a network connection"}
    frame_events = frozenset(("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile"))
    frame_attrs = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
    str_type, bytes_type = str, bytes
    # modules that hand their caller a frame (``logging.currentframe()`` is ``sys._getframe(1)``)
    # (and asyncio's: ``Task.get_stack()``), debuggers, the interactive interpreter's compiler
    frame_libraries = ("inspect.py", "traceback.py", os.path.join("logging", "__init__.py"), "bdb.py", "pdb.py",
                       "code.py", "codeop.py")
    frame_packages = (os.sep + "asyncio" + os.sep,)

    getframe = sys._getframe
    busy = [False]

    def from_submission() -> bool:
        """The code that raised the event is the submission's (or inspect/traceback called
        from it); read with the hook's own frame access, not re-audited."""
        busy[0] = True
        try:
            frame = getframe(2)  # 0: here, 1: the hook, 2: the code the event comes from
            for _ in range(4):
                name = frame.f_code.co_filename if frame is not None else ""
                if type(name) is str_type and name.startswith("<submission: "):
                    return True
                if not (type(name) is str_type and (name.endswith(frame_libraries)
                                                    or any(f in name for f in frame_packages))):
                    return False
                frame = frame.f_back
            return False
        finally:
            busy[0] = False

    def hook(event, args):
        if type(event) is not str_type or busy[0]:
            return
        if event.startswith(process_events) or event in always:
            record(f"{always.get(event, 'starts a process')} ({event})")
            raise refuse("grading refuses " + event)
        if event in frame_events or (event == "object.__getattr__" and len(args) > 1
                                     and type(args[1]) is str_type and args[1] in frame_attrs):
            if from_submission():
                what = args[1] if event == "object.__getattr__" else event
                record(f"reads the interpreter's frames ({what})")
                raise refuse("grading refuses reading frames")
            return
        if event in ("exec", "compile") and from_submission():
            record(f"runs code it builds ({event})")
            raise refuse("grading refuses " + event)
        if event in gc_events:
            record(f"reads the garbage collector's objects ({event})")
            raise refuse("grading refuses " + event)
        if event == "exec" and args:
            code = args[0]
            name = getattr(code, "co_filename", None) if type(code).__name__ == "code" else None
            if type(name) is str_type and name in frozen_files:
                record(f"runs the code of {name} again (a fresh copy of a forbidden helper's module)")
                raise refuse("grading refuses running a forbidden helper's module again")
        elif event == "compile" and len(args) > 1:
            source, name = args[0], args[1]
            if type(name) is str_type and name in frozen_files:
                record(f"compiles {name} again (a fresh copy of a forbidden helper's module)")
                raise refuse("grading refuses compiling a forbidden helper's module again")
            if type(source) is bytes_type:
                source = source.decode("latin-1")
            if type(source) is str_type and source not in allowed_text:
                for d in frozen_defs:
                    if d in source:
                        record(f"compiles source that defines {d[4:-1]} (a copy of a forbidden helper)")
                        raise refuse("grading refuses compiling a copy of a forbidden helper")

    sys.addaudithook(hook)
    try:  # multiprocessing starts its processes through this, with no audit event in 3.11
        import _posixsubprocess
    except ImportError:
        pass
    else:
        def fork_exec(*args, **kwargs):
            record("starts a process (_posixsubprocess.fork_exec)")
            raise refuse("grading refuses starting a process")

        _posixsubprocess.fork_exec = fork_exec
    return breaches


#: modules whose dictionaries the function process checks after every call, besides
#: ``builtins``: what it relies on to answer (the grader's own modules, ``json``) and where
#: the forbidden helpers' guards live
_WATCHED = ("builtins", "sys", "json", "json.encoder", "json.decoder", "json.scanner", "base64", "operator",
            "functools", "types", "_posixsubprocess")


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
    greeting = json.loads(sys.stdin.readline())  # the grader's token, before any student code runs
    token = str(greeting.get("id")) if isinstance(greeting, dict) else ""
    from ._clean_grade import (STATEMENT_LIMIT, build_namespace, define_student_code, is_function, statements,
                               used_globals)

    import signal

    from ._snapshot import _on_alarm, plain

    signal.signal(signal.SIGALRM, _on_alarm)  # the statements' time limit (_run_limited), set once
    job = json.loads(Path(job_path).read_text())
    problems: list[str] = []
    ns, skipped, existed = build_namespace(job, problems)
    forbidden = [str(n) for n in job.get("question_forbids") or []]
    reals, refused = _guards(forbidden, ns)  # before any of the student's code runs here
    disarmed = _disarm_in_place(reals, refused)  # the guard code keeps the real code's file name
    breaches = _protect(reals, [src for _, _, src in statements(job.get("sources") or [])])
    _BREACHES[0] = breaches.append
    _refuse_signal_handlers(breaches, ns)
    check = _watch(forbidden + [m + ".x" for m in disarmed])  # after the hook's own replacements
    del reals  # the real functions: no frame of this process holds them from here on
    write, dumps, loads, clear = out.write, json.dumps, json.loads, list.clear

    def changed() -> list:
        found = check() + breaches[:]
        clear(breaches)
        return found

    names = define_student_code(ns, job.get("sources") or [], problems, job.get("existed") or existed,
                                skipped=skipped, limit=job.get("statement_limit") or STATEMENT_LIMIT)
    at_definition = changed()  # a class body or a re-run statement that patched the grader
    defined = sorted({n for n in names if is_function(ns.get(n))})
    used = used_globals(ns, names)
    missing = {n: why for n, why in skipped.items() if n in used and n not in ns}
    write(dumps({"defined": defined, "problems": problems, "missing": missing, "tampered": at_definition,
                 "id": token}) + "\n")
    del token, greeting
    for line in sys.stdin:
        states: dict = {}
        tampered: list = []
        request = None
        try:
            request = loads(line)
            name = str(request["call"])
            if name not in defined:
                raise NameError(f"the submission defines no function {name}")
            args, kwargs = _decode(request["args"]), _decode(request["kwargs"])
            try:
                result = ns[name](*args, **kwargs)
            except NameError as e:
                tampered = changed()
                gone = getattr(e, "name", None)
                if gone in missing:
                    raise NameError(f"{e} (the grader could not carry the notebook's top-level "
                                    f"{gone} over: {missing[gone]})") from None
                raise
            except BaseException:
                tampered = changed()
                raise
            tampered = changed()  # before anything below runs with what the call may have replaced
            try:
                reply = {"ok": True, "result": _encode(plain(result, f"{name}()"))}
            finally:
                states = {k: _encode(g.get_state()) for k, g in _generators(args, kwargs).items()}
            reply["generators"] = states
        except BaseException as e:  # noqa: BLE001 - reported to the test as the call's error
            if isinstance(e, KeyboardInterrupt):
                raise
            reply = {"ok": False, "error": type(e).__name__, "message": str(e)[:MESSAGE_LIMIT],
                     "generators": states}
        reply["tampered"], reply["refused"] = tampered, refused[:]
        reply["id"] = request.get("id") if isinstance(request, dict) else None
        clear(refused)
        try:
            write(dumps(reply) + "\n")
        except (TypeError, ValueError):
            write(dumps({"ok": False, "error": "TypeError", "message": "unreadable result",
                         "tampered": tampered, "id": reply["id"]}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
