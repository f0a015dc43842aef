r"""Trained models shipped with the book: train once (full profile), check everywhere (quick profile).

A chapter whose claims are about *trained* models evaluates committed weights on freshly
drawn data at the quick profile, and retrains them from scratch at the full profile with the
same code. The weights live in this package's data folder ``nnapprox/checkpoints/``:

- ``NAME.safetensors``: the model's ``state_dict`` (safetensors: loading never executes
  code), stored in ``spec.dtype`` (``"float16"`` or ``"float32"``) and cast back to float32
  when loaded;
- ``NAME.curve.json``: the training-loss curve (``{"every": k, "loss": [...]}``: the mean
  loss of each block of ``k`` steps);
- ``manifest.json``: one entry per checkpoint with its sha256 and size, the model class and
  configuration, the training settings, seed, steps, final training loss, the device, wall
  time and thread count of the run that produced it, the library version and commit, and the
  command that reproduces it.

Registration contract (for every chapter's subpackage)
------------------------------------------------------
A subpackage listed in :data:`SUBPACKAGES` exposes a module-level dict

.. code-block:: python

    CHECKPOINTS: dict[str, nnapprox.checkpoints.Spec]

mapping a checkpoint name (globally unique, lower case, ``[a-z0-9_]``; prefix it with the
chapter stem, e.g. ``"icl_garg"``, ``"sequential_..."``) to a :class:`Spec`:

``Spec(chapter, model, config, train, settings, seed=0, dtype="float32")``

- ``chapter``: the chapter stem that uses it (``"icl"``);
- ``model``: a callable (usually the class) with ``model(**config) -> nn.Module``; it is
  called right after ``torch.manual_seed(seed)``, so default initialisations are seeded;
- ``config``: JSON-serialisable keyword arguments of ``model``;
- ``train``: ``train(model, settings, generator) -> list[float]`` trains ``model`` in place
  and returns one loss per step. It must be *the* function the chapter's full profile calls
  (through :func:`train`), so a checkpoint is exactly what the full profile computes;
- ``settings``: JSON-serialisable training settings, the same dict object the chapter's
  full profile uses (keep it in the subpackage, e.g. ``PROFILES["full"]``): loading compares
  the manifest's copy with it, so editing the settings makes the checkpoint stale;
- ``seed``: seeds ``torch.manual_seed`` before ``model(**config)`` and the generator handed to
  ``train``;
- ``dtype``: storage precision; claims are always evaluated in float32.

To add a subpackage, append its dotted name to :data:`SUBPACKAGES` (one line in this file;
a name that cannot be imported yet is skipped, any other import error propagates).

In a chapter::

    from nnapprox import checkpoints
    model = checkpoints.load("icl_garg")              # quick: verified, float32, eval mode
    model, curve = checkpoints.train("icl_garg")      # full: retrain with the same settings
    model, curve = checkpoints.train("icl_garg", seed=1, state_dir="_build/state")  # kept, reused
    curve = checkpoints.curve("icl_garg")             # stored training curve (block means)

:func:`save_tensors` and :func:`load_tensors` are the file format of such kept runs (and of
the universal chapter's resumable training state): safetensors with the run's settings as JSON
in the metadata, refused when read back for other settings.

Command line (``make checkpoints [NAME=...]``, ``make checkpoints-verify``)::

    python -m nnapprox.checkpoints build [--name NAME] [--threads 1] [--jobs 2]
    python -m nnapprox.checkpoints build --executor slurm --cpus 8 --time-min 240   # one Slurm job each
    python -m nnapprox.checkpoints verify
    python -m nnapprox.checkpoints list

``verify`` checks every registered checkpoint (file present, sha256 and size, settings equal
to the registered ones) and exits 1 with one line per problem.

Loading raises :class:`StaleCheckpointError` whose message names the file and the command
that rebuilds it, whenever the file is missing, its hash or size differs from the manifest, or
the manifest's model class, configuration, settings or seed differ from the registered spec.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

#: Subpackages whose ``CHECKPOINTS`` dicts are registered, in this order.
SUBPACKAGES: tuple[str, ...] = ("nnapprox.icl", "nnapprox.sequential", "nnapprox.algorithms")

#: The data folder (package data: ``checkpoints/*.safetensors``, ``checkpoints/*.json``).
DIRECTORY = Path(__file__).resolve().parent / "checkpoints"
MANIFEST = DIRECTORY / "manifest.json"
_DTYPES = {"float16": torch.float16, "float32": torch.float32}


class StaleCheckpointError(RuntimeError):
    """A checkpoint is missing, corrupted, or was trained with settings other than the current ones."""


@dataclass(frozen=True)
class Spec:
    """How to build and train one registered checkpoint (see the module docstring)."""

    chapter: str
    model: Callable[..., nn.Module]
    config: dict[str, Any]
    train: Callable[[nn.Module, dict[str, Any], torch.Generator], list[float]]
    settings: dict[str, Any]
    seed: int = 0
    dtype: str = "float32"
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {self.dtype!r}")
        for what, value in (("config", self.config), ("settings", self.settings)):
            try:
                json.dumps(value)
            except TypeError as e:
                raise ValueError(f"Spec.{what} must be JSON-serialisable: {e}") from None


def rebuild_command(name: str) -> str:
    return f"make checkpoints NAME={name}  (or: python -m nnapprox.checkpoints build --name {name})"


def specs() -> dict[str, Spec]:
    """Every registered checkpoint, name -> :class:`Spec`, from the subpackages in :data:`SUBPACKAGES`."""
    out: dict[str, Spec] = {}
    for pkg in SUBPACKAGES:
        try:
            module = importlib.import_module(pkg)
        except ModuleNotFoundError as e:
            if e.name == pkg:
                continue
            raise
        for name, spec in getattr(module, "CHECKPOINTS", {}).items():
            if not isinstance(spec, Spec):
                raise TypeError(f"{pkg}.CHECKPOINTS[{name!r}] must be a nnapprox.checkpoints.Spec")
            if name in out:
                raise ValueError(f"checkpoint name {name!r} is registered twice (again by {pkg})")
            if not name.replace("_", "").isalnum() or name.lower() != name:
                raise ValueError(f"checkpoint name {name!r} must be lower case letters, digits and _")
            out[name] = spec
    return out


def spec(name: str) -> Spec:
    registered = specs()
    if name not in registered:
        raise KeyError(f"no checkpoint {name!r}; registered: {sorted(registered)}")
    return registered[name]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _qualname(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def read_manifest(path: Path | None = None) -> dict[str, dict[str, Any]]:
    path = MANIFEST if path is None else path
    return json.loads(path.read_text()) if path.exists() else {}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def check(name: str, *, directory: Path | None = None) -> dict[str, Any]:
    """Verify checkpoint ``name`` against the manifest and the registered spec; return its manifest entry."""
    directory = DIRECTORY if directory is None else directory
    s = spec(name)
    path = directory / f"{name}.safetensors"
    how = f"rebuild it with: {rebuild_command(name)}"
    entry = read_manifest(directory / "manifest.json").get(name)
    if entry is None or not path.exists():
        raise StaleCheckpointError(f"checkpoint {path} is missing or not in the manifest; {how}")
    size, digest = path.stat().st_size, _sha256(path)
    if size != entry["size"] or digest != entry["sha256"]:
        raise StaleCheckpointError(
            f"checkpoint {path} is stale: its sha256/size ({digest[:12]}…, {size} B) differ from the "
            f"manifest's ({entry['sha256'][:12]}…, {entry['size']} B); {how}")
    for key, current in (("config", s.config), ("settings", s.settings), ("seed", s.seed), ("dtype", s.dtype)):
        if entry.get(key) != _jsonable(current):
            raise StaleCheckpointError(
                f"checkpoint {path} is stale: it was trained with {key} {entry.get(key)!r}, the chapter's "
                f"full profile now uses {_jsonable(current)!r}; {how}")
    return entry


def _new_model(s: Spec) -> nn.Module:
    torch.manual_seed(s.seed)
    return s.model(**s.config)


def load(name: str, *, device: str | torch.device = "cpu", directory: Path | None = None) -> nn.Module:
    """The committed model ``name`` after :func:`check`, in float32 and eval mode, on ``device``."""
    from safetensors.torch import load_file

    directory = DIRECTORY if directory is None else directory
    entry = check(name, directory=directory)
    s = spec(name)
    model = _new_model(s)
    if _qualname(model) != entry["model_class"]:
        raise StaleCheckpointError(f"checkpoint {name} holds a {entry['model_class']}, the spec now builds a "
                                   f"{_qualname(model)}; rebuild it with: {rebuild_command(name)}")
    state = {k: v.float() for k, v in load_file(directory / f"{name}.safetensors").items()}
    model.load_state_dict(state)
    return model.to(device).eval()


def curve(name: str, *, directory: Path | None = None) -> dict[str, Any]:
    """The stored training curve ``{"every": k, "loss": [block means]}`` of checkpoint ``name``."""
    directory = DIRECTORY if directory is None else directory
    path = directory / f"{name}.curve.json"
    if not path.exists():
        raise StaleCheckpointError(f"training curve {path} is missing; rebuild it with: {rebuild_command(name)}")
    return json.loads(path.read_text())


def train(
    name: str, *, seed: int | None = None, device: str | torch.device = "cpu",
    state_dir: str | Path | None = None,
) -> tuple[nn.Module, list[float]]:
    """Train checkpoint ``name`` from scratch with its registered settings (the full profile's code path).

    ``seed`` replaces the registered seed (the full profile passes the run's seed).
    With ``state_dir`` the trained model and its losses are kept there
    (``NAME-seedS.safetensors``, the model class, configuration, settings and seed in its
    metadata), and a later call with the same name, seed and settings loads them instead of
    training again: a full profile that trains several models can be completed over several
    runs. A file written with anything else is refused, naming what differs; the file does not
    record the training code, so delete it after changing that code.
    """
    s = spec(name)
    if seed is not None:
        s = Spec(**{**s.__dict__, "seed": seed})
    model = _new_model(s).to(device)
    record = _jsonable({"model_class": _qualname(model), "config": s.config, "settings": s.settings,
                        "seed": s.seed})
    path = None if state_dir is None else Path(state_dir) / f"{name}-seed{s.seed}.safetensors"
    if path is not None and path.exists():
        return _load_trained(path, record, model)
    g = torch.Generator(device="cpu").manual_seed(s.seed)
    losses = s.train(model, s.settings, g)
    if path is not None:
        _save_trained(path, record, model, losses)
    return model.eval(), losses


def _save_trained(path: Path, record: dict[str, Any], model: nn.Module, losses: list[float]) -> None:
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_tensors(path, {**tensors, "losses": torch.tensor(losses, dtype=torch.float64)}, record)


def _load_trained(path: Path, record: dict[str, Any], model: nn.Module) -> tuple[nn.Module, list[float]]:
    tensors = load_tensors(path, record)
    device = next(model.parameters()).device
    model.load_state_dict({k[len("model."):]: v.to(device) for k, v in tensors.items() if k.startswith("model.")})
    return model.eval(), tensors["losses"].tolist()


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], record: dict[str, Any]) -> None:
    """``tensors`` to safetensors at ``path`` (no pickles), ``record`` (JSON) in its metadata.

    Written to a temporary file first and renamed, so an interrupted write never leaves a
    half-written file behind. :func:`load_tensors` reads it back for the same ``record`` only.
    """
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"record": json.dumps(record)})
    tmp.replace(path)


def load_tensors(path: str | Path, record: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors :func:`save_tensors` wrote at ``path`` for ``record``; any other record is refused.

    The error names the keys of the record that differ (for a training run, its settings).
    """
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata() or {}
        saved = json.loads(meta["record"]) if "record" in meta else {}
        if saved != record:
            differ = sorted(k for k in set(record) | set(saved) if saved.get(k) != record.get(k))
            raise ValueError(f"{path} was written for another run (it differs in: {', '.join(differ)}); "
                             "delete it to start afresh")
        return {key: fh.get_tensor(key) for key in fh.keys()}


def _block_means(losses: list[float], every: int) -> list[float]:
    out = []
    for i in range(0, len(losses), every):
        block = [v for v in losses[i:i + every] if v == v and abs(v) != float("inf")]
        out.append(sum(block) / len(block) if block else float("nan"))
    return out


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build(name: str, *, directory: Path | None = None, threads: int | None = None,
          write_manifest: bool = True) -> dict[str, Any]:
    """Retrain ``name``, write its safetensors file and curve, and rewrite its manifest entry.

    With ``write_manifest=False`` the entry is only returned: builds running at once (see
    :func:`build_many`) leave the manifest to the process that started them."""
    from safetensors.torch import save_file

    from . import __version__

    directory = DIRECTORY if directory is None else directory
    directory.mkdir(parents=True, exist_ok=True)
    if threads is not None:
        torch.set_num_threads(threads)
    s = spec(name)
    commit = _git_commit()  # the code that trains, not whatever is checked out when training ends
    t0 = time.perf_counter()
    model, losses = train(name)
    wall = time.perf_counter() - t0
    path = directory / f"{name}.safetensors"
    state = {k: v.detach().to(_DTYPES[s.dtype]).contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(path))
    every = max(1, len(losses) // 500)
    (directory / f"{name}.curve.json").write_text(
        json.dumps({"every": every, "loss": [round(v, 6) for v in _block_means(losses, every)]}) + "\n")
    finite = [v for v in losses[-100:] if v == v and abs(v) != float("inf")]
    entry = {
        "file": path.name,
        "sha256": _sha256(path),
        "size": path.stat().st_size,
        "chapter": s.chapter,
        "model_class": _qualname(model),
        "config": _jsonable(s.config),
        "settings": _jsonable(s.settings),
        "seed": s.seed,
        "dtype": s.dtype,
        "steps": len(losses),
        "skipped_steps": sum(1 for v in losses if not (v == v and abs(v) != float("inf"))),
        "final_loss": sum(finite) / len(finite) if finite else None,
        "final_loss_over": "mean training loss of the last 100 steps",
        "device": f"cpu ({platform.processor() or platform.machine()})",
        "threads": torch.get_num_threads(),
        "wall_seconds": round(wall, 1),
        "torch": torch.__version__,
        "nnapprox": __version__,
        "commit": commit,
        "reproduce": f"python -m nnapprox.checkpoints build --name {name}",
    }
    if write_manifest:
        _write_entries(directory, {name: entry})
    return entry


def _write_entries(directory: Path, entries: dict[str, dict[str, Any]]) -> None:
    manifest = read_manifest(directory / "manifest.json")  # re-read: other builds may have finished meanwhile
    manifest.update(entries)
    (directory / "manifest.json").write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


def build_job(name: str, directory: str | None = None, threads: int | None = None) -> dict[str, Any]:
    """:func:`build` as an executor's job: writes the weights and curve, returns the manifest entry."""
    return build(name, directory=Path(directory) if directory else None, threads=threads, write_manifest=False)


def build_many(names: list[str], *, directory: Path | None = None, jobs: int = 1, executor: str = "local",
               cluster: Any = None, threads: int | None = None) -> dict[str, Any]:
    """Build ``names`` ``jobs`` at a time on this machine or as one Slurm job each
    (:func:`nnapprox.runtime.map_jobs`); each finished build's entry goes into the manifest as
    it arrives. Returns ``{name: entry or the exception of a failed job}``."""
    from . import runtime

    directory = DIRECTORY if directory is None else directory
    cluster = cluster or runtime.Cluster()
    if threads is None:
        threads = runtime.threads_per_job(jobs) if executor == "local" else cluster.cpus
    calls = [dict(name=n, directory=str(directory), threads=threads) for n in names]
    outcomes: dict[str, Any] = {}
    for i, outcome in runtime.map_jobs("nnapprox.checkpoints:build_job", calls, executor=executor, jobs=jobs,
                                       folder=Path("_build") / "submitit" / "checkpoints", cluster=cluster,
                                       name="nnapprox-checkpoints"):
        outcomes[names[i]] = outcome
        if not isinstance(outcome, BaseException):
            _write_entries(directory, {names[i]: outcome})
    return outcomes


def verify(directory: Path | None = None) -> list[str]:
    """One message per registered checkpoint that fails :func:`check` (empty when all are current)."""
    problems = []
    for name in specs():
        try:
            check(name, directory=directory)
        except StaleCheckpointError as e:
            problems.append(str(e))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnapprox.checkpoints", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="retrain checkpoints (all, or --name NAME) and rewrite the manifest")
    b.add_argument("--name", action="append", help="checkpoint to build (repeatable); default: all")
    b.add_argument("--threads", type=int, default=None,
                   help="torch threads per build (default: torch's; cores/jobs with --jobs, the job's CPUs on Slurm)")
    from . import runtime

    runtime.add_executor_arguments(b)
    sub.add_parser("verify", help="check every registered checkpoint's hash and settings")
    sub.add_parser("list", help="list registered checkpoints")
    args = parser.parse_args(argv)
    registered = specs()
    if args.command == "list":
        for name, s in registered.items():
            print(f"{name}  ({s.chapter}, {_qualname_of(s)})")
        return 0
    if args.command == "verify":
        problems = verify()
        for p in problems:
            print(p, file=sys.stderr)
        if not problems:
            print(f"{len(registered)} checkpoints verified")
        return 1 if problems else 0
    names = args.name or list(registered)
    unknown = [n for n in names if n not in registered]
    if unknown:
        parser.error(f"unknown checkpoint(s) {unknown}; registered: {sorted(registered)}")
    jobs, executor, cluster = runtime.executor_settings(parser, args)
    if executor == "local" and jobs == 1:  # one after another in this process, as before
        for name in names:
            _print_built(name, build(name, threads=args.threads))
        return 0
    failed = []
    for name, outcome in build_many(names, jobs=jobs, executor=executor, cluster=cluster,
                                    threads=args.threads).items():
        if isinstance(outcome, BaseException):
            failed.append(name)
            print(f"{name}: FAILED: {str(outcome).strip().splitlines()[-1] if str(outcome).strip() else outcome!r}")
        else:
            _print_built(name, outcome)
    return 1 if failed else 0


def _print_built(name: str, entry: dict[str, Any]) -> None:
    print(f"{name}: {entry['steps']} steps, final loss {entry['final_loss']:.4g}, "
          f"{entry['wall_seconds']:.0f} s, {entry['size'] / 1e6:.2f} MB", flush=True)


def _qualname_of(s: Spec) -> str:
    m = s.model
    return f"{m.__module__}.{m.__qualname__}" if hasattr(m, "__qualname__") else repr(m)


if __name__ == "__main__":  # run the imported module, so that Spec is the class the subpackages use
    from nnapprox.checkpoints import main as _main

    sys.exit(_main())
