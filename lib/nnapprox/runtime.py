"""The runtime contract every chapter follows.

A chapter's first code cell (tagged ``parameters``) sets ``profile``, ``device`` and
``seed`` and then calls :func:`setup` once. ``setup`` validates those values *before any
work starts*, seeds torch and numpy, picks the device, and returns a :class:`Run`: the
chapter's settings for the chosen profile plus the chapter's :class:`~nnapprox.claims.Claims`.

Profiles
--------
``quick``  CPU-sized: every chapter runs in at most 150 s on a 2-core machine (the tests).
``full``   paper-sized: every chapter runs in at most 10 min on one H100 (the published book).
``auto``   ``full`` when CUDA is available, otherwise ``quick``; the environment variable
           ``NNAPPROX_PROFILE`` (``quick`` or ``full``) overrides that choice for a whole
           book build.

Changed settings
----------------
The environment variable ``NNAPPROX_SETTINGS`` (a JSON object, e.g. ``{"gpt_steps": 30}``;
``tests/harness.py --set gpt_steps=30`` writes it) replaces settings of the chosen profile.
Its use is a *smoke run*: the full profile's code paths with step counts cut, on a CPU. The
claims record then names the changed settings next to the profile, so such a run is never
mistaken for the profile itself.

Executors
---------
:func:`map_jobs` runs many independent jobs (chapter executions, seed runs, checkpoint
builds) through one of :data:`EXECUTORS`: ``local`` (a pool of processes on this machine,
``jobs`` at a time), ``slurm`` (one Slurm job each, submitted through ``submitit``, with the
resources of a :class:`Cluster`) or ``submitit-local`` (the same submission path, with
submitit's local executor: tests and dry runs without a cluster).
"""

from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch

from .claims import Claims

PROFILES = ("auto", "quick", "full")
SETTINGS_ENV = "NNAPPROX_SETTINGS"
DEVICES = ("auto", "cpu", "cuda", "mps")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_profile(profile: str) -> str:
    """Map ``auto`` to ``$NNAPPROX_PROFILE`` if set, else ``full`` (CUDA present) or ``quick``."""
    if not isinstance(profile, str) or profile not in PROFILES:
        raise ValueError(
            f"unknown profile {profile!r}: valid profiles are {', '.join(map(repr, PROFILES))}"
        )
    if profile == "auto":
        forced = os.environ.get("NNAPPROX_PROFILE", "auto") or "auto"
        if forced not in PROFILES:
            raise ValueError(
                f"unknown profile {forced!r} in NNAPPROX_PROFILE: valid profiles are {', '.join(map(repr, PROFILES))}"
            )
        if forced != "auto":
            return forced
        return "full" if torch.cuda.is_available() else "quick"
    return profile


def resolve_device(device: str) -> torch.device:
    """Map ``auto`` to the best available device; reject unknown or unavailable ones."""
    if not isinstance(device, str) or device.split(":")[0] not in DEVICES:
        raise ValueError(
            f"unknown device {device!r}: valid devices are {', '.join(map(repr, DEVICES))}"
        )
    kind = device.split(":")[0]
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": _mps_available()}
    if kind == "auto":
        return torch.device("cuda" if available["cuda"] else "cpu")
    if not available[kind]:
        usable = ", ".join(repr(k) for k in ("auto", "cpu", "cuda", "mps") if k == "auto" or available[k])
        raise ValueError(
            f"device {device!r} is not available on this machine: usable devices here are {usable}"
        )
    return torch.device(device)


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


@dataclass
class Run:
    """Resolved settings of one chapter execution.

    Settings of the chosen profile are readable as attributes (``run.n_steps``) or items
    (``run["n_steps"]``).
    """

    chapter: str
    profile: str
    device: torch.device
    seed: int
    settings: dict[str, Any]
    claims: Claims
    changed: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def __getattr__(self, name: str) -> Any:
        settings = self.__dict__.get("settings", {})
        if name in settings:
            return settings[name]
        raise AttributeError(
            f"{name!r} is neither a Run field nor a setting of profile "
            f"{self.__dict__.get('profile')!r} (settings: {', '.join(sorted(settings))})"
        )

    def __getitem__(self, name: str) -> Any:
        return self.settings[name]

    def generator(self, stream: int = 0, device: torch.device | str | None = None) -> torch.Generator:
        """A fresh ``torch.Generator`` seeded from ``(seed, stream)``, on the CPU unless ``device`` is given.

        Give each independent experiment of a chapter its own ``stream`` so that
        re-running one cell does not shift the random numbers of another. A CPU generator
        draws the same numbers on every machine; the library's samplers (through
        :mod:`nnapprox.rng`) move the draws to whatever device they compute on. Pass
        ``device=run.device`` where large batches are drawn inside a GPU training loop.
        """
        dev = torch.device(device) if device is not None else torch.device("cpu")
        g = torch.Generator(device=dev.type if dev.type != "mps" else "cpu")
        g.manual_seed(self.seed * 1_000_003 + int(stream))
        return g

    def elapsed(self) -> float:
        """Seconds since :func:`setup`."""
        return time.perf_counter() - self.started

    def __repr__(self) -> str:  # short, for the notebook
        items = ", ".join(f"{k}={v!r}" for k, v in self.settings.items())
        return (
            f"Run(chapter={self.chapter!r}, profile={self.profile_label()!r}, device={str(self.device)!r}, "
            f"seed={self.seed}, {items})"
        )

    def profile_label(self) -> str:
        """The profile's name, followed by the settings changed through ``NNAPPROX_SETTINGS`` if any."""
        if not self.changed:
            return self.profile
        return f"{self.profile} (changed: {', '.join(f'{k}={v!r}' for k, v in self.changed.items())})"

    def report(self) -> None:
        """Show the claims table, write the JSON record, raise if any claim failed."""
        self.claims.report(
            chapter=self.chapter,
            profile=self.profile_label(),
            device=str(self.device),
            seed=self.seed,
            seconds=self.elapsed(),
        )


def setup(
    chapter: str,
    profile: str = "auto",
    device: str = "auto",
    seed: int = 0,
    *,
    quick: Mapping[str, Any],
    full: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
) -> Run:
    """Validate the runtime parameters, seed, pick the device and return the profile's settings.

    Parameters
    ----------
    chapter : the chapter file's stem (``"intro"``); names the claims record.
    profile : ``"auto"``, ``"quick"`` or ``"full"``.
    device : ``"auto"``, ``"cpu"``, ``"cuda"`` (or ``"cuda:1"``) or ``"mps"``.
    seed : non-negative integer; seeds ``torch``, ``numpy`` and ``random``.
    quick, full : the settings of each profile; both must have the same keys.
    overrides : values from the parameters cell that replace a profile setting when not
        ``None`` (e.g. ``{"n_steps": n_steps}``); unknown keys are an error.

    Raises
    ------
    ValueError
        for an unknown profile, an unknown or unavailable device, a bad seed, profiles
        with different keys or an unknown override — before anything is computed.
    """
    resolved_profile = resolve_profile(profile)
    resolved_device = resolve_device(device)
    seed = _check_seed(seed)
    if set(quick) != set(full):
        raise ValueError(
            f"chapter {chapter!r}: quick and full settings must have the same keys; "
            f"only in quick: {sorted(set(quick) - set(full))}, only in full: {sorted(set(full) - set(quick))}"
        )
    settings = dict(quick if resolved_profile == "quick" else full)
    for key, value in (overrides or {}).items():
        if key not in settings:
            raise ValueError(
                f"unknown override {key!r} for chapter {chapter!r}: valid settings are {', '.join(sorted(settings))}"
            )
        if value is not None:
            settings[key] = value
    changed = _env_settings(chapter, settings)
    settings.update(changed)

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    return Run(
        chapter=chapter,
        profile=resolved_profile,
        device=resolved_device,
        seed=seed,
        settings=settings,
        claims=Claims(chapter),
        changed=changed,
    )


def _env_settings(chapter: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings replaced through ``NNAPPROX_SETTINGS`` (a JSON object), validated against ``settings``."""
    raw = os.environ.get(SETTINGS_ENV, "").strip()
    if not raw:
        return {}
    try:
        changed = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ValueError(f"{SETTINGS_ENV} must be a JSON object such as '{{\"n_steps\": 10}}', got {raw!r} ({err})") from None
    if not isinstance(changed, dict):
        raise ValueError(f"{SETTINGS_ENV} must be a JSON object such as '{{\"n_steps\": 10}}', got {raw!r}")
    unknown = sorted(set(changed) - set(settings))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {', '.join(map(repr, unknown))} in {SETTINGS_ENV} for chapter {chapter!r}: "
            f"valid settings are {', '.join(sorted(settings))}"
        )
    # JSON has no tuples: a list replaces a tuple-valued setting as a tuple
    return {k: tuple(v) if isinstance(v, list) and isinstance(settings[k], tuple) else v for k, v in changed.items()}


def claims_dir() -> str | None:
    """Directory named by ``NNAPPROX_CLAIMS_DIR``, or ``None``."""
    value = os.environ.get("NNAPPROX_CLAIMS_DIR")
    return value or None


# --------------------------------------------------------------------------- executors
EXECUTORS = ("local", "slurm", "submitit-local")


def check_executor(executor: Any) -> str:
    """``executor`` if it is one of :data:`EXECUTORS`, else a ``ValueError`` naming them."""
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}: valid executors are {', '.join(map(repr, EXECUTORS))}")
    return executor


def check_jobs(jobs: Any) -> int:
    """``jobs`` as a positive integer (how many run at once), else a ``ValueError``."""
    try:
        value = int(str(jobs).strip())
    except ValueError:
        value = 0
    if value < 1 or str(value) != str(jobs).strip():
        raise ValueError(f"jobs must be a positive integer (how many run at once, e.g. 2), got {jobs!r}")
    return value


def threads_per_job(jobs: int, cores: int | None = None) -> int:
    """CPU threads each of ``jobs`` concurrent jobs gets: ``cores // jobs``, at least one."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // check_jobs(jobs))


@dataclass(frozen=True)
class Cluster:
    """Resources of each Slurm job (``EXECUTOR=slurm``): partition, time limit, GPUs, CPUs.

    ``extra`` holds any other ``sbatch`` option by its long name without dashes
    (``{"account": "lab", "qos": "high"}``); ``cpus`` is also the thread count of the job.
    """

    partition: str = ""
    time_min: int = 60
    gpus: int = 0
    cpus: int = 1
    mem_gb: float | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("time_min", "cpus"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"Cluster.{name} must be a positive integer, got {getattr(self, name)!r}")
        if not isinstance(self.gpus, int) or self.gpus < 0:
            raise ValueError(f"Cluster.gpus must be a non-negative integer, got {self.gpus!r}")


def add_executor_arguments(parser) -> None:
    """``--jobs``, ``--executor`` and the Slurm resources, for every command line that runs jobs
    (the chapter harness, the seed sweep, the checkpoint builds)."""
    parser.add_argument("--jobs", default="1", help="how many run at once with --executor local (default 1)")
    parser.add_argument("--executor", default="local",
                        help="local (this machine), slurm (one job each, through submitit) or submitit-local "
                             "(the Slurm path with submitit's local executor)")
    slurm = parser.add_argument_group("Slurm (--executor slurm)")
    slurm.add_argument("--partition", default="", help="partition (default: the cluster's)")
    slurm.add_argument("--time-min", type=int, default=60, help="time limit of each job in minutes (default 60)")
    slurm.add_argument("--gpus", type=int, default=None, help="GPUs per job (default 1 with --device cuda, else 0)")
    slurm.add_argument("--cpus", type=int, default=4, help="CPUs per job, also its thread count (default 4)")
    slurm.add_argument("--mem-gb", type=float, default=None, help="memory per job in GB (default: the cluster's)")
    slurm.add_argument("--sbatch", action="append", default=[], metavar="KEY=VALUE",
                       help="any other sbatch option, e.g. --sbatch account=lab --sbatch qos=high")


def executor_settings(parser, args, device: str = "cpu") -> tuple[int, str, "Cluster"]:
    """``(jobs, executor, cluster)`` from the parsed arguments; bad values stop with ``parser.error``
    (exit 2) naming what is valid, before anything runs."""
    try:
        jobs = check_jobs(args.jobs)
        executor = check_executor(args.executor)
        extra = {}
        for item in args.sbatch:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ValueError(f"--sbatch takes KEY=VALUE, got {item!r}")
            extra[key] = value
        gpus = args.gpus if args.gpus is not None else (1 if device.startswith("cuda") else 0)
        cluster = Cluster(partition=args.partition, time_min=args.time_min, gpus=gpus, cpus=args.cpus,
                          mem_gb=args.mem_gb, extra=extra)
    except ValueError as error:
        parser.error(str(error))
    return jobs, executor, cluster


def call(target: str, kwargs: Mapping[str, Any], path: Sequence[str] = ()) -> Any:
    """Import ``"module:function"`` (after putting ``path`` first on ``sys.path``) and call it.

    What an executor's job runs: the job pickles only this function (from the installed
    library) and plain data, so a script's helpers such as ``tests/harness.py`` need not be
    importable by name where the job was submitted from.
    """
    for folder in reversed(list(path)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(**kwargs)


def map_jobs(
    target: str,
    calls: Sequence[Mapping[str, Any]],
    *,
    executor: str = "local",
    jobs: int = 1,
    folder: str | Path = "_build/submitit",
    cluster: Cluster | None = None,
    name: str = "nnapprox",
    path: Sequence[str] = (),
) -> Iterator[tuple[int, Any]]:
    """Run ``target(**kwargs)`` for every ``kwargs`` of ``calls``; yield ``(index, result)`` as each ends.

    A job that raised yields its exception as the result (the others go on). ``local`` runs
    ``jobs`` processes at a time on this machine; ``slurm`` and ``submitit-local`` submit one
    job per call through submitit (an array job where the cluster allows), logs and pickles
    under ``folder``, and wait for all of them.
    """
    check_executor(executor)
    jobs = check_jobs(jobs)
    if executor == "local":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=min(jobs, max(1, len(calls))),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(call, target, dict(kw), list(path)): i for i, kw in enumerate(calls)}
            try:
                for future in as_completed(futures):
                    error = future.exception()
                    yield futures[future], error if error is not None else future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return
    yield from _submitit_jobs(target, calls, executor=executor, folder=Path(folder), cluster=cluster or Cluster(),
                              name=name, path=path)


def _submitit_jobs(target, calls, *, executor, folder, cluster, name, path):
    try:
        import submitit
    except ImportError:
        raise RuntimeError(f"executor {executor!r} needs submitit: pip install 'nnapprox[cluster]'") from None
    if executor == "slurm" and shutil.which("sbatch") is None:
        raise RuntimeError("executor 'slurm' needs Slurm's sbatch on PATH: submit from a login node of the "
                           "cluster, or use EXECUTOR=local")
    ex = submitit.AutoExecutor(folder=folder, cluster="slurm" if executor == "slurm" else "local")
    params: dict[str, Any] = {"name": name, "timeout_min": cluster.time_min, "cpus_per_task": cluster.cpus,
                              "gpus_per_node": cluster.gpus, "tasks_per_node": 1, "nodes": 1}
    if cluster.mem_gb is not None:
        params["mem_gb"] = cluster.mem_gb
    if executor == "slurm":
        if cluster.partition:
            params["slurm_partition"] = cluster.partition
        if cluster.extra:
            params["slurm_additional_parameters"] = dict(cluster.extra)
    ex.update_parameters(**params)
    if executor == "slurm":
        with ex.batch():  # one array job
            submitted = [ex.submit(call, target, dict(kw), list(path)) for kw in calls]
    else:
        submitted = [ex.submit(call, target, dict(kw), list(path)) for kw in calls]
    index = {id(job): i for i, job in enumerate(submitted)}
    print(f"submitted {len(submitted)} {executor} job(s) ({name}); logs under {folder}", flush=True)
    for job in submitit.helpers.as_completed(submitted, poll_frequency=2 if executor != "slurm" else 30):
        try:
            yield index[id(job)], job.result()
        except Exception as error:  # noqa: BLE001 - a failed job is that job's result
            yield index[id(job)], error
