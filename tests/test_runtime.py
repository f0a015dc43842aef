"""The runtime contract: profiles, devices, seeds, settings."""

import pytest
import torch

import nnapprox
from nnapprox.runtime import resolve_device, resolve_profile

QUICK = {"n": 3, "width": 8}
FULL = {"n": 30, "width": 256}


def test_quick_profile_settings_and_attributes():
    run = nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full=FULL)
    assert (run.profile, str(run.device), run.seed) == ("quick", "cpu", 0)
    assert run.n == 3 and run["width"] == 8
    with pytest.raises(AttributeError, match="width"):
        run.not_a_setting


def test_auto_profile_follows_cuda(monkeypatch):
    monkeypatch.delenv("NNAPPROX_PROFILE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_profile("auto") == "quick"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_profile("auto") == "full"


def test_nnapprox_profile_overrides_auto_only(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("NNAPPROX_PROFILE", "full")
    assert resolve_profile("auto") == "full" and resolve_profile("quick") == "quick"
    monkeypatch.setenv("NNAPPROX_PROFILE", "huge")
    with pytest.raises(ValueError, match="NNAPPROX_PROFILE: valid profiles are"):
        resolve_profile("auto")


@pytest.mark.parametrize("profile", ["fast", "QUICK", "", None, 1])
def test_unknown_profile_is_a_clear_error(profile):
    with pytest.raises(ValueError, match=r"valid profiles are 'auto', 'quick', 'full'"):
        nnapprox.setup("t", profile, "cpu", 0, quick=QUICK, full=FULL)


@pytest.mark.parametrize("device", ["gpu", "tpu", "", "cuda0"])
def test_unknown_device_is_a_clear_error(device):
    with pytest.raises(ValueError, match=r"valid devices are 'auto', 'cpu', 'cuda', 'mps'"):
        resolve_device(device)


def test_unavailable_device_names_the_usable_ones(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"not available.*usable devices here are 'auto', 'cpu'"):
        nnapprox.setup("t", "quick", "cuda", 0, quick=QUICK, full=FULL)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
def test_bad_seed(seed):
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        nnapprox.setup("t", "quick", "cpu", seed, quick=QUICK, full=FULL)


def test_profiles_must_agree_and_overrides_must_exist():
    with pytest.raises(ValueError, match="same keys"):
        nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full={"n": 1})
    with pytest.raises(ValueError, match="unknown override 'depth'.*valid settings are n, width"):
        nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full=FULL, overrides={"depth": 3})
    run = nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full=FULL, overrides={"n": 5, "width": None})
    assert (run.n, run.width) == (5, 8)


def test_seeding_is_reproducible_and_streams_differ():
    a = nnapprox.setup("t", "quick", "cpu", 7, quick=QUICK, full=FULL)
    x1, g1 = torch.rand(3), torch.rand(3, generator=a.generator(1))
    b = nnapprox.setup("t", "quick", "cpu", 7, quick=QUICK, full=FULL)
    x2, g2 = torch.rand(3), torch.rand(3, generator=b.generator(1))
    assert torch.equal(x1, x2) and torch.equal(g1, g2)
    assert not torch.equal(torch.rand(3, generator=b.generator(1)), torch.rand(3, generator=b.generator(2)))


def test_generator_defaults_to_cpu_and_rng_moves_draws():
    """A chapter's generator is on the CPU (same numbers on every machine); ``nnapprox.rng``
    draws on the generator's device and returns on the requested one."""
    from nnapprox import rng

    run = nnapprox.setup("t", "quick", "cpu", 0, quick=dict(), full=dict())
    g = run.generator(5)
    assert g.device.type == "cpu"
    a = rng.randn(4, 3, generator=g, dtype=torch.float64, device="cpu")
    b = torch.randn(4, 3, generator=run.generator(5), dtype=torch.float64)
    assert torch.equal(a, b)
    assert rng.randint(0, 7, (5,), generator=g).dtype == torch.int64
    assert rng.randperm(6, generator=g).sort().values.tolist() == list(range(6))
    assert rng.multinomial(torch.ones(3), 4, replacement=True, generator=g).shape == (4,)
    u = rng.uniform_like(torch.empty(2, 2), -1.0, 1.0, g)
    assert u.shape == (2, 2) and bool((u.abs() <= 1).all())


def test_settings_changed_through_the_environment_are_validated_and_named(monkeypatch, tmp_path):
    monkeypatch.setenv("NNAPPROX_SETTINGS", '{"n": 2, "sizes": [1, 2]}')
    run = nnapprox.setup("t", "full", "cpu", 0, quick={**QUICK, "sizes": (4, 8)}, full={**FULL, "sizes": (40, 80)})
    assert run.n == 2 and run.width == 256 and run.sizes == (1, 2)  # a JSON list replaces a tuple as a tuple
    assert run.profile == "full" and run.profile_label() == "full (changed: n=2, sizes=(1, 2))"
    monkeypatch.setenv("NNAPPROX_CLAIMS_DIR", str(tmp_path))
    run.claims.check("x", value=1.0, op="<=", threshold=2.0, kind="exact", source="test")
    run.report()
    assert '"profile": "full (changed: n=2' in (tmp_path / "t.json").read_text()
    monkeypatch.setenv("NNAPPROX_SETTINGS", '{"depth": 3}')
    with pytest.raises(ValueError, match=r"unknown setting\(s\) 'depth' in NNAPPROX_SETTINGS.*valid settings are n, width"):
        nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full=FULL)
    for bad in ("n=3", "[1, 2]"):
        monkeypatch.setenv("NNAPPROX_SETTINGS", bad)
        with pytest.raises(ValueError, match="must be a JSON object"):
            nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full=FULL)
    monkeypatch.setenv("NNAPPROX_SETTINGS", "")
    assert nnapprox.setup("t", "quick", "cpu", 0, quick=QUICK, full=FULL).changed == {}


def test_static_mode_follows_the_front_end(monkeypatch):
    """Widgets only where a person can use them: a kernel request with allow_stdin."""
    import importlib

    import IPython

    progress = importlib.import_module("nnapprox.progress")  # the module, not the function

    monkeypatch.delenv("NNAPPROX_STATIC", raising=False)

    class Kernel:
        _allow_stdin = True

    class Shell:
        kernel = Kernel()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    assert not progress.static_mode()  # JupyterLab, Notebook, VS Code, Colab
    Kernel._allow_stdin = False
    assert progress.static_mode()  # papermill, nbclient, myst-nb
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert progress.static_mode()  # plain Python
    Kernel._allow_stdin = True
    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    monkeypatch.setenv("NNAPPROX_STATIC", "1")
    assert progress.static_mode()  # forced by the harness and the book build
