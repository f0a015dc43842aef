r"""An offline corpus every machine has: the Python standard library's own source code.

Chapter *Neural scaling laws*, section "A real corpus, offline".

The corpus is the bytes of the top-level ``*.py`` files of the running interpreter's
standard library (``sysconfig.get_paths()["stdlib"]``), sorted by name. Every 10th file
(positions 9, 19, 29, ... of the sorted list) is held out as the test set, so train and
test never share a file. The SHA-256 of the file names and sizes is recorded, so a reader
can tell whether two runs saw the same corpus (it changes with the Python version).
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch
from jaxtyping import UInt8
from torch import Tensor


@dataclass(frozen=True)
class ByteCorpus:
    """Train and test byte streams plus provenance."""

    train: UInt8[Tensor, " n_train"]
    test: UInt8[Tensor, " n_test"]
    root: str
    n_files: int
    n_test_files: int
    file_list_sha256: str


def stdlib_files(root: str | Path | None = None) -> list[Path]:
    """Sorted top-level ``*.py`` files of the standard library (or of ``root``)."""
    base = Path(root) if root is not None else Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in base.glob("*.py") if p.is_file())
    if len(files) < 20:
        raise ValueError(f"found only {len(files)} .py files under {base}: need at least 20 to hold out every 10th")
    return files


def file_list_hash(files: list[Path]) -> str:
    """SHA-256 of ``name:size`` lines: identifies the corpus without shipping it."""
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}:{f.stat().st_size}\n".encode())
    return h.hexdigest()


def load_stdlib_corpus(root: str | Path | None = None, held_out_every: int = 10) -> ByteCorpus:
    """Read the corpus; file ``i`` (0-based, sorted) goes to test when ``i % held_out_every == held_out_every - 1``."""
    if held_out_every < 2:
        raise ValueError(f"held_out_every must be >= 2, got {held_out_every}")
    files = stdlib_files(root)
    train, test = bytearray(), bytearray()
    for i, f in enumerate(files):
        (test if i % held_out_every == held_out_every - 1 else train).extend(f.read_bytes())
    as_tensor = lambda b: torch.frombuffer(bytearray(b), dtype=torch.uint8)  # noqa: E731
    return ByteCorpus(
        train=as_tensor(train),
        test=as_tensor(test),
        root=str(files[0].parent),
        n_files=len(files),
        n_test_files=sum(1 for i in range(len(files)) if i % held_out_every == held_out_every - 1),
        file_list_sha256=file_list_hash(files),
    )
