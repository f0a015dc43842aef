"""nnapprox.checkpoints: build, load, hash and settings checks, the CLI, and the committed files."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from nnapprox import checkpoints as ck


def _tiny_train(model: nn.Module, settings: dict, generator: torch.Generator) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=settings["lr"])
    losses = []
    for _ in range(settings["steps"]):
        x = torch.randn(8, 3, generator=generator)
        loss = (model(x)[:, 0] - x.sum(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


SETTINGS = {"steps": 20, "lr": 0.05}


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    spec = ck.Spec("test", nn.Linear, {"in_features": 3, "out_features": 1}, _tiny_train, SETTINGS, seed=1,
                   dtype="float16")
    monkeypatch.setattr(ck, "specs", lambda: {"tiny": spec})
    ck.build("tiny", directory=tmp_path)
    return tmp_path


def test_build_writes_manifest_curve_and_loads(tiny):
    entry = json.loads((tiny / "manifest.json").read_text())["tiny"]
    for key in ("sha256", "size", "model_class", "config", "settings", "seed", "steps", "final_loss", "device",
                "wall_seconds", "nnapprox", "reproduce"):
        assert key in entry
    assert entry["steps"] == 20 and entry["model_class"] == "torch.nn.modules.linear.Linear"
    assert len(ck.curve("tiny", directory=tiny)["loss"]) == 20
    model = ck.load("tiny", directory=tiny)
    assert model.weight.dtype == torch.float32 and not model.training
    with torch.no_grad():
        assert torch.allclose(model(torch.ones(1, 3)), model(torch.ones(1, 3)))


def test_one_flipped_byte_is_reported_with_the_rebuild_command(tiny):
    path = tiny / "tiny.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(ck.StaleCheckpointError, match=r"tiny\.safetensors is stale.*make checkpoints NAME=tiny"):
        ck.load("tiny", directory=tiny)
    assert len(ck.verify(directory=tiny)) == 1


def test_changed_settings_make_the_checkpoint_stale(tiny, monkeypatch):
    spec = ck.Spec("test", nn.Linear, {"in_features": 3, "out_features": 1}, _tiny_train, {**SETTINGS, "lr": 0.1},
                   seed=1, dtype="float16")
    monkeypatch.setattr(ck, "specs", lambda: {"tiny": spec})
    with pytest.raises(ck.StaleCheckpointError, match=r"trained with settings.*now uses"):
        ck.load("tiny", directory=tiny)


def test_train_keeps_the_trained_model_in_state_dir_and_reuses_it(monkeypatch, tmp_path):
    calls = []

    def counting_train(model, settings, generator):
        calls.append(1)
        return _tiny_train(model, settings, generator)

    spec = ck.Spec("test", nn.Linear, {"in_features": 3, "out_features": 1}, counting_train, SETTINGS)
    monkeypatch.setattr(ck, "specs", lambda: {"tiny": spec})
    plain, plain_losses = ck.train("tiny", seed=3)
    kept, kept_losses = ck.train("tiny", seed=3, state_dir=tmp_path)
    assert (tmp_path / "tiny-seed3.safetensors").exists() and len(calls) == 2
    again, again_losses = ck.train("tiny", seed=3, state_dir=tmp_path)  # loaded, not trained
    assert len(calls) == 2 and not again.training
    assert again_losses == kept_losses == plain_losses and len(again_losses) == SETTINGS["steps"]
    for p, q in zip(plain.parameters(), again.parameters()):
        assert torch.equal(p, q)
    ck.train("tiny", seed=4, state_dir=tmp_path)  # another seed trains and keeps its own file
    assert len(calls) == 3 and (tmp_path / "tiny-seed4.safetensors").exists()
    changed = ck.Spec("test", nn.Linear, {"in_features": 3, "out_features": 1}, counting_train,
                      {**SETTINGS, "lr": 0.1})
    monkeypatch.setattr(ck, "specs", lambda: {"tiny": changed})
    stale = r"tiny-seed3\.safetensors was written for another run \(it differs in: settings\)"
    with pytest.raises(ValueError, match=stale):
        ck.train("tiny", seed=3, state_dir=tmp_path)
    assert len(calls) == 3


def test_missing_checkpoint_and_unknown_name(monkeypatch, tmp_path):
    spec = ck.Spec("test", nn.Linear, {"in_features": 3, "out_features": 1}, _tiny_train, SETTINGS)
    monkeypatch.setattr(ck, "specs", lambda: {"tiny": spec})
    with pytest.raises(ck.StaleCheckpointError, match="missing"):
        ck.load("tiny", directory=tmp_path)
    with pytest.raises(KeyError, match="registered"):
        ck.load("nope", directory=tmp_path)


def test_spec_rejects_bad_input():
    with pytest.raises(ValueError, match="dtype"):
        ck.Spec("test", nn.Linear, {}, _tiny_train, {}, dtype="int8")
    with pytest.raises(ValueError, match="JSON"):
        ck.Spec("test", nn.Linear, {"x": object()}, _tiny_train, {})


def test_registered_checkpoints_are_current_and_small():
    """The committed files: every registered checkpoint verifies, and together they stay under 30 MB."""
    problems = ck.verify()
    assert not problems, "\n".join(problems)
    total = sum(p.stat().st_size for p in ck.DIRECTORY.glob("*") if p.is_file())
    assert total <= 30e6, f"{total / 1e6:.1f} MB in {ck.DIRECTORY}"


def test_cli_verify_exit_code(tiny, monkeypatch, capsys):
    monkeypatch.setattr(ck, "DIRECTORY", tiny)
    assert ck.main(["verify"]) == 0
    path = tiny / "tiny.safetensors"
    path.write_bytes(path.read_bytes()[:-1] + bytes([path.read_bytes()[-1] ^ 0x80]))
    assert ck.main(["verify"]) == 1
    assert "tiny.safetensors is stale" in capsys.readouterr().err
