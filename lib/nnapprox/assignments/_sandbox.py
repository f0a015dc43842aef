"""Run a command with some folders hidden from it: the filesystem sandbox of student code.

    python -I -S .../_sandbox.py [--hide PATH]... [--private PATH]... [--keep PATH]...
                                 [--keep-ro PATH]... -- CMD ARG...

Linux only, and no privileges needed where unprivileged user namespaces are enabled. The
wrapper enters new user, mount and PID namespaces (``unshare(2)`` through ``ctypes``; Python
3.11 has no ``os.unshare``), then, before ``CMD`` runs:

- ``--keep-ro PATH`` (the Python environment, the library) is made read-only;
- ``--hide PATH`` is covered by an empty, read-only ``tmpfs`` (a file by an empty file);
- ``--private PATH`` (``/tmp``) is covered by an empty, writable ``tmpfs`` of its own;
- ``--keep PATH`` / ``--keep-ro PATH`` under a hidden or private folder is put back
  (the submission's own working folder under ``/tmp``, an environment inside a hidden folder);
- every other mount is made read-only (but ``/proc``, ``/sys``, ``/dev``), so the command can
  write only in ``--keep`` and ``--private`` folders, even when the grader runs as root; and
  its working folder is entered again through the new mounts;
- the command runs as PID 1 of its PID namespace with a fresh ``/proc``, so it sees no other
  process (no ``/proc/<pid>/root``, ``cwd``, ``fd`` or ``cmdline`` of the grader), and every
  process it starts dies with it;
- a second, nested user and mount namespace maps the user back to its own uid: the command
  holds no capability, and the mounts above are locked (it cannot unmount them).

The wrapper stays as the command's parent: it waits, exits with the command's status, kills
it when it is itself terminated (and the kernel kills it when the wrapper dies). The network,
CPU, memory and the rest of the filesystem are untouched.

:func:`probe` says, cheaply, whether the sandbox works on this machine, and why not.
:func:`command` is the prefix that wraps a command. This file imports nothing of the library,
so it starts fast (``-I -S``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
# the per-mount flags a read-only remount must repeat (the kernel refuses to clear locked ones)
_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024,
                "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
# mounts left as they are: the kernel's own filesystems (devices, terminals, /proc is replaced)
_LIVE = ("/proc", "/sys", "/dev")
PR_SET_PDEATHSIG = 1
_LIBC = None


class SandboxError(OSError):
    pass


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return _LIBC


def _call(what: str, ret: int) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags, data=None) -> None:
    enc = (lambda s: None if s is None else os.fsencode(s))
    _call(f"mount {target}", _libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)))


def _enter(flags: int, inside: tuple[int, int], outside: tuple[int, int]) -> None:
    """unshare(flags) with a new user namespace, mapping the uid and gid ``outside`` to ``inside``."""
    _call("unshare", _libc().unshare(flags))
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inside[0]} {outside[0]} 1"),
                       ("gid_map", f"{inside[1]} {outside[1]} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _under(path: str, parent: str) -> bool:
    return path != parent and path.startswith(parent.rstrip("/") + "/")


def _depth(path: str) -> int:
    return len([p for p in path.split("/") if p])


def _mounts() -> list[tuple[str, set[str]]]:
    """Every mount point of this mount namespace with its per-mount options, parents first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # octal escapes: \040 is a space
            found.append((point, set(fields[5].split(","))))
    return found


def _read_only_everywhere(writable: list[str]) -> None:
    """Remount every mount read-only but ``writable`` (bound onto themselves first, so they stay
    writable) and the kernel's live filesystems (:data:`_LIVE`). The code then has no file to
    write outside its own folder and the private temporary folders, even when the grader runs as
    root (a root-owned file is writable by its owner without any capability)."""
    for k in writable:
        _mount(k, k, None, MS_BIND | MS_REC)
    for point, options in _mounts():
        if "ro" in options or any(point == p or _under(point, p) for p in [*_LIVE, *writable]):
            continue  # already read-only, live, or a writable folder or inside one: stays as it is
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in _MOUNT_FLAGS.items():
            if name in options:
                flags |= bit
        _mount(None, point, None, flags)


def _setup(hide: list[str], private: list[str], keep: list[str], keep_ro: list[str]) -> None:
    """The mounts, inside the first namespaces (the caller is root there)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here shows outside
    _read_only_everywhere([k for k in keep if os.path.exists(k)])
    keeps = [(k, False) for k in keep] + [(k, True) for k in keep_ro]
    keeps = [(k, ro) for k, ro in keeps if os.path.exists(k)]
    for k, ro in keeps:
        if ro:
            _mount(k, k, None, MS_BIND | MS_REC)
            _mount(None, k, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    fds = {k: os.open(k, os.O_PATH) for k, _ in keeps}  # what the covers below put back
    kept = {k for k, _ in keeps}
    covers = sorted([(p, False) for p in hide] + [(p, True) for p in private], key=lambda c: _depth(c[0]))
    for path, writable in covers:
        if path in kept or _depth(path) == 0 or not os.path.lexists(path):
            continue  # a kept path is never hidden; nor is "/"; a path under a cover is gone already
        if not os.path.isdir(path):
            _hide_file(path)
            continue
        _mount("none", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m" if writable else "mode=0755,size=1m")
        for k in sorted((k for k in kept if _under(k, path)), key=_depth):
            if os.path.isdir(f"/proc/self/fd/{fds[k]}"):
                os.makedirs(k, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(k), exist_ok=True)
                open(k, "a").close()
            _mount(f"/proc/self/fd/{fds[k]}", k, None, MS_BIND | MS_REC)
        if not writable:
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in fds.values():
        os.close(fd)


def _hide_file(path: str) -> None:
    """Cover one file with an empty one (``/dev/null``, read-only)."""
    _mount("/dev/null", path, None, MS_BIND)
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def run(hide: list[str], private: list[str], keep: list[str], keep_ro: list[str], cmd: list[str]) -> int:
    """Set up the namespaces and mounts, then run ``cmd`` in them; its exit status."""
    if not sys.platform.startswith("linux"):
        raise SandboxError(0, "the sandbox needs Linux")
    real = lambda p: os.path.realpath(os.path.abspath(p))  # noqa: E731
    hide, private, keep, keep_ro = ([real(p) for p in group] for group in (hide, private, keep, keep_ro))
    ids = (os.geteuid(), os.getegid())
    cwd = os.getcwd()
    _enter(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID, (0, 0), ids)
    _setup(hide, private, keep, keep_ro)
    # the working folder was entered before the mounts: enter it again, through them (else
    # relative paths still reach the folder as it was, writable and unhidden)
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # PID 1 of the new PID namespace
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            _enter(CLONE_NEWUSER | CLONE_NEWNS, ids, (0, 0))  # back to our own uid, mounts locked
            _call("prctl", _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0))
            os.execvp(cmd[0], cmd)
        except BaseException as e:  # noqa: BLE001 - reported, and the child ends here
            print(f"sandbox: {e}", file=sys.stderr, flush=True)
            os._exit(126)
    # the wrapper: an interrupt is for the command (it gets it from its process group)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def stop(signum, frame):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, stop)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the command's pipes close when it ends, not when the wrapper does
        os.dup2(null, fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def command(hide=(), private=(), keep=(), keep_ro=()) -> list[str]:
    """The prefix that runs a command in the sandbox: ``command(...) + [cmd, args...]``."""
    out = [sys.executable, "-I", "-S", os.path.abspath(__file__)]
    for flag, group in (("--hide", hide), ("--private", private), ("--keep", keep), ("--keep-ro", keep_ro)):
        for p in group:
            out += [flag, str(p)]
    return out + ["--"]


_CHECK = ("import os,sys\n"
          "try:\n    open(sys.argv[1]).read(); print('readable')\nexcept OSError:\n    pass\n"
          "print('pid', os.getpid())\n")


def probe(timeout: float = 20.0) -> tuple[bool, str]:
    """``(True, "")`` when the sandbox works here (a file under a hidden folder cannot be read,
    the command is PID 1), else ``(False, why)``. Costs two short Python starts."""
    if not sys.platform.startswith("linux"):
        return False, f"the sandbox needs Linux (this is {sys.platform})"
    with tempfile.TemporaryDirectory(prefix="nnapprox-probe-") as tmp:
        secret = os.path.join(tmp, "hidden", "secret")
        os.makedirs(os.path.dirname(secret))
        with open(secret, "w") as f:
            f.write("x")
        try:
            done = subprocess.run(command(hide=[os.path.dirname(secret)]) + [sys.executable, "-I", "-S", "-c",
                                                                             _CHECK, secret],
                                  capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"the probe did not run ({e})"
    if done.returncode == 0 and done.stdout.split() == ["pid", "1"]:
        return True, ""
    why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}, output {done.stdout.strip()!r}"])[-1]
    if "unshare" in why and ("not permitted" in why or "No space left" in why or "Invalid argument" in why):
        why += (" (unprivileged user namespaces are disabled or restricted here: see "
                "/proc/sys/kernel/unprivileged_userns_clone, user.max_user_namespaces, "
                "kernel.apparmor_restrict_unprivileged_userns, or the container's seccomp profile)")
    return False, why.removeprefix("sandbox: ")


def main(argv: list[str]) -> int:
    groups: dict[str, list[str]] = {"--hide": [], "--private": [], "--keep": [], "--keep-ro": []}
    if "--" not in argv:
        print("usage: _sandbox.py [--hide|--private|--keep|--keep-ro PATH]... -- CMD ARG...", file=sys.stderr)
        return 2
    split = argv.index("--")
    opts, cmd = argv[:split], argv[split + 1:]
    if len(opts) % 2 or not cmd or any(flag not in groups for flag in opts[::2]):
        print("usage: _sandbox.py [--hide|--private|--keep|--keep-ro PATH]... -- CMD ARG...", file=sys.stderr)
        return 2
    for flag, path in zip(opts[::2], opts[1::2]):
        groups[flag].append(path)
    try:
        return run(groups["--hide"], groups["--private"], groups["--keep"], groups["--keep-ro"], cmd)
    except OSError as e:
        print(f"sandbox: {e.strerror if isinstance(e, SandboxError) else e}", file=sys.stderr, flush=True)
        return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
