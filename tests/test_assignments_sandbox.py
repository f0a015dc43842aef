"""The filesystem sandbox of the students' code (``nnapprox.assignments._sandbox``).

The kernel that runs a submission and the process that runs its functions for the tests
start inside new user, mount and PID namespaces, where the builds (solutions, autograder
zips), the submissions, the output and the temporary folders (the hidden tests) are empty
folders and no other process is visible. The wrapper's unit test and the end-to-end test
need user namespaces: they are skipped, with the probe's reason, where it says they are
unavailable. The option's checks need none.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nnapprox import assignments as asg
from nnapprox.assignments import _sandbox, static
from nnapprox.assignments.grade import notes_path

AVAILABLE, WHY = _sandbox.probe()
needs_sandbox = pytest.mark.skipif(not AVAILABLE, reason=f"the filesystem sandbox is unavailable here: {WHY}")

READER = '''import os, sys
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            print(path, "read", f.readline().strip())
    except OSError as e:
        print(path, "refused", type(e).__name__)
print("pid", os.getpid(), "parent", os.getppid())
'''


@needs_sandbox
def test_the_wrapper_hides_a_folder_and_keeps_what_it_is_told(tmp_path):
    secret, allowed = tmp_path / "build" / "master.txt", tmp_path / "work" / "mine.txt"
    for f, text in ((secret, "the solution"), (allowed, "my answer")):
        f.parent.mkdir()
        f.write_text(text)
    env_file = Path(sys.prefix) / "pyvenv.cfg"
    # the temporary folders are private (tmp_path is under one), the working folder is put back
    cmd = _sandbox.command(hide=[secret.parent], private=[str(tmp_path.parent)], keep=[allowed.parent],
                           keep_ro=[sys.prefix])
    out = subprocess.run(cmd + [sys.executable, "-c", READER, str(secret), str(allowed), str(env_file),
                                f"/proc/{__import__('os').getpid()}/cmdline"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{secret} refused FileNotFoundError"
    assert lines[1] == f"{allowed} read my answer"
    assert lines[2].startswith(f"{env_file} read")  # the environment stays readable
    assert lines[3].endswith("refused FileNotFoundError")  # the grader's process is out of sight
    assert lines[4] == "pid 1 parent 0"
    # what it may write: its own folder (the change is seen outside); not the environment
    write = ("import sys\nopen(sys.argv[1], 'w').write('changed')\ntry:\n    open(sys.argv[2], 'w')\n"
             "except OSError as e:\n    print(type(e).__name__, e.errno)\n")
    out = subprocess.run(cmd + [sys.executable, "-c", write, str(allowed), str(Path(sys.prefix) / "planted.py")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["OSError", "30"], (out.stdout, out.stderr)  # EROFS
    assert allowed.read_text() == "changed" and not (Path(sys.prefix) / "planted.py").exists()
    assert secret.read_text() == "the solution"  # nothing outside changed


@needs_sandbox
def test_a_process_writes_nothing_another_can_read_but_its_own_folder(tmp_path):
    """The seventh trial's leak: the functions' process of one question saved a file in its
    working folder (kept read-only, but entered before the mounts, so still writable) and the
    next question's process read it. And run as root, the code could write any root-owned file.
    Now the working folder is entered again through the mounts, and every other mount is
    read-only: only the kept folder and the private temporary folders take writes."""
    workdir, own = tmp_path / "clean", tmp_path / "run"
    workdir.mkdir()
    own.mkdir()
    outside = Path(sys.prefix).parent  # a folder of this machine, outside every kept path
    cmd = _sandbox.command(private=[str(tmp_path.parent)], keep=[own], keep_ro=[sys.prefix, workdir])
    write = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'w').write('x')\n"
             "        print('wrote')\n    except OSError as e:\n        print('refused', e.errno)\n")
    targets = ["leak.npy", str(workdir / "leak2.npy"), str(outside / "nnapprox-planted.txt"),
               str(own / "mine.txt"), str(tmp_path.parent / "scratch.txt")]
    out = subprocess.run(cmd + [sys.executable, "-c", write] + targets, cwd=workdir,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:5] == ["refused 30", "refused 30", "refused 30", "wrote", "wrote"], out.stdout
    assert not list(workdir.iterdir()) and not (outside / "nnapprox-planted.txt").exists()
    assert (own / "mine.txt").read_text() == "x"
    assert not (tmp_path.parent / "scratch.txt").exists()  # the private /tmp was the process's own


def _codes(path: Path) -> str:
    return "[" + ", ".join(str(ord(c)) for c in str(path)) + "]"


# what the trial's attack does, in a form static.py does not flag: paths assembled from chr()
# codes, read with numpy's memory map (the trial read them with numpy.fromfile and linecache,
# which static.py now flags: the reads here are ones it still misses); the hidden tests found
# through the parent's /proc entry (read with tokenize.open, unflagged too)
STEAL = '''import json
import os
import tokenize
import numpy as np


def _read(path):
    return np.asarray(np.memmap(path, dtype=np.uint8, mode="r")).tobytes()


def _steal(codes):
    try:
        return "LEAKED " + _read("".join(map(chr, codes)))[:40].decode(errors="replace")
    except Exception as e:
        return "BLOCKED " + type(e).__name__


def _through_parent(key, tail):
    try:
        with tokenize.open("/proc/%d/cmdline" % os.getppid()) as f:  # numpy sees size 0
            argv = f.read().split(chr(0))
        job = json.loads(_read([a for a in argv if a.endswith("job.json")][0]))
        return "LEAKED " + _read(job[key] + tail)[:40].decode(errors="replace")
    except Exception as e:
        return "BLOCKED " + type(e).__name__


def recursion_bound(Ks, epss):
    raise AssertionError("SERVER " + " | ".join([_steal(SOLUTION), _steal(ZIP), _through_parent("tests", "/q1.py")]))
'''

KERNEL = 'raise RuntimeError("KERNEL " + " | ".join([_steal(SOLUTION), _steal(ZIP), _through_parent("autograder", "")]))'


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("sandbox")
    folder = asg.build_one("intro", out / "build", check=False)
    return out, folder


def _attack(out: Path, folder: Path, stem: str) -> Path:
    solution = asg.solution_notebook(folder)
    (zip_path,) = (folder / "autograder").glob("*.zip")
    code = STEAL.replace("def _read", f"SOLUTION = {_codes(solution)}\nZIP = {_codes(zip_path)}\n\n\ndef _read")
    nb = nbformat.read(solution, as_version=4)
    (i,) = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "def recursion_bound" in c.source]
    nb.cells[i].source = code
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(KERNEL))
    subs = out / f"subs-{stem}"
    subs.mkdir()
    nbformat.write(nb, subs / f"{stem}.ipynb")
    # since the ninth instructor trial its readers (tokenize, numpy.memmap) are voiding flags;
    # the tests below grade it as accepted (an instructor's --accept), so that what stops the
    # reads is the sandbox alone
    assert static.voiding(static.flags([c.source for c in nb.cells if c.cell_type == "code"])), \
        "the static flags should catch these readers"
    return subs


def _grade(out: Path, folder: Path, subs: Path, **kw):
    stems = [p.stem for p in subs.glob("*.ipynb")]
    (row,) = asg.grade("intro", subs, timeout=300.0, build_dir=folder.parent, out=subs / "scores.csv",
                       accept=stems, **kw)
    kernel = row.message
    server = " ".join(t["message"] for t in row.tests["q1"])
    return row, kernel, server


@needs_sandbox
def test_obfuscated_reads_of_the_solution_and_tests_get_nothing_in_the_sandbox(built):
    out, folder = built
    subs = _attack(out, folder, "boxed")
    row, kernel, server = _grade(out, folder, subs, sandbox="on")
    assert "KERNEL BLOCKED" in kernel and "LEAKED" not in kernel, kernel
    assert kernel.count("BLOCKED") == 3, kernel
    assert "SERVER BLOCKED" in server and "LEAKED" not in server, server
    assert any(t["message"].count("BLOCKED") == 3 for t in row.tests["q1"] if t["hidden"]), row.tests["q1"]
    # the rest of the notebook graded as usual, in the sandbox
    assert {q: s for q, s in row.scores.items() if q != "q1"} == {q: p for q, p in row.possible.items() if q != "q1"}
    # the batch's one note is that the hand-graded questions await --manual, not the sandbox
    assert "sandbox" not in notes_path(subs / "scores.csv").read_text()


def test_without_the_sandbox_the_same_code_reads_them_and_the_batch_says_so(built, monkeypatch):
    """``auto`` where the probe fails: the attack works (so the test above tests something),
    and the batch's output and notes file say that the sandbox was unavailable."""
    out, folder = built
    monkeypatch.setattr(_sandbox, "probe", lambda: (False, "user namespaces are disabled (test)"))
    subs = _attack(out, folder, "open")
    notes: list[str] = []
    row, kernel, server = _grade(out, folder, subs, sandbox="auto", notes=notes)
    assert kernel.count("LEAKED") == 3, kernel
    assert "SERVER LEAKED" in server and server.count("LEAKED") >= 3, server
    sandbox_notes = [n for n in notes if "sandbox" in n]
    assert len(sandbox_notes) == 1 and "unavailable (user namespaces are disabled (test))" in sandbox_notes[0]
    assert "sandbox was unavailable" in notes_path(subs / "scores.csv").read_text()
    feedback = (subs / "feedback" / "open.json").read_text()
    assert "sandbox" not in feedback  # the note is the instructor's, not the student's


def test_a_bad_sandbox_value_is_refused_before_any_work(tmp_path):
    with pytest.raises(asg.AssignmentError, match="sandbox must be one of auto, on, off, got 'yes'"):
        asg.grade("intro", tmp_path / "none", sandbox="yes", build_dir=tmp_path / "build")
    assert not (tmp_path / "build").exists()
    from nnapprox.assignments.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["grade", "intro", str(tmp_path), "--sandbox", "maybe"])
    assert exit_.value.code == 2


def test_sandbox_on_refuses_when_the_probe_says_unavailable(tmp_path, monkeypatch, capsys):
    calls = []

    def unavailable():
        calls.append(1)
        return False, "unshare: Operation not permitted (unprivileged user namespaces are disabled)"

    monkeypatch.setattr(_sandbox, "probe", unavailable)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.ipynb").write_text("{}")
    with pytest.raises(asg.AssignmentError) as err:
        asg.grade("intro", subs, sandbox="on", build_dir=tmp_path / "build")
    message = str(err.value)
    assert "--sandbox on: the filesystem sandbox cannot be set up here" in message
    assert "Operation not permitted" in message and "auto" in message and "off" in message
    assert calls == [1] and not (tmp_path / "build").exists()  # probed once, nothing built
    from nnapprox.assignments.__main__ import main

    assert main(["grade", "intro", str(subs), "--sandbox", "on", "--build-dir", str(tmp_path / "build")]) == 2
    assert "cannot be set up here" in capsys.readouterr().err
    # off never probes
    monkeypatch.setattr(_sandbox, "probe", lambda: pytest.fail("probed with --sandbox off"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(asg.AssignmentError, match="no submissions"):
        asg.grade("intro", tmp_path / "empty", sandbox="off", build_dir=tmp_path / "build")


def test_the_home_folder_is_hidden_whole_and_the_environment_kept(monkeypatch, tmp_path):
    """The fifth trial: hiding a list of known secret files leaves every other file of the
    home folder readable. The whole home folder is hidden; Python's folders are put back."""
    from nnapprox.assignments import _worker
    from nnapprox.assignments.grade import sandbox_hides

    home = tmp_path / "home"
    site = home / ".local" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (home / "notes.txt").write_text("private")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(sys, "path", [*sys.path, str(site), str(home)])
    assert str(home.resolve()) in sandbox_hides([])
    cmd = _worker._box({"hide": sandbox_hides([])}, hide=[])
    kept = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--keep-ro"]
    assert str(site.resolve()) in kept and str(home.resolve()) not in kept and sys.prefix in kept
