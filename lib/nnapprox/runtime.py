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
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

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
