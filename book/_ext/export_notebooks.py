"""Export every chapter of ``_toc.yml`` to a plain ``.ipynb`` under ``_build/notebooks/``.

``make notebooks`` runs this; ``make book`` runs it first so the pages' download and Colab
buttons can point at the exports (the book extension copies them to ``_notebooks/``).
Each export starts with a cell that installs the ``nnapprox`` library when it is missing
(on Colab or any fresh kernel) and does nothing otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import harness  # noqa: E402  (the test harness knows how to read the table of contents)

OUT = ROOT / "_build" / "notebooks"


def install_cell(repository_url: str) -> nbformat.NotebookNode:
    source = (
        "# Runs anywhere: installs the book's library `nnapprox` if this kernel lacks it (e.g. on Colab).\n"
        "import importlib.util, subprocess, sys\n"
        "if importlib.util.find_spec(\"nnapprox\") is None:\n"
        f"    subprocess.run([sys.executable, \"-m\", \"pip\", \"install\", \"-q\", \"git+{repository_url}\"], check=True)"
    )
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["colab-install"]
    return cell


def export(path: Path, repository_url: str) -> Path:
    notebook = jupytext.read(path)
    notebook.cells.insert(0, install_cell(repository_url))
    notebook.metadata.pop("jupytext", None)
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / f"{path.stem}.ipynb"
    nbformat.write(notebook, target)
    return target


def main() -> int:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repository_url = config.get("repository", {}).get("url", "")
    for path in harness.toc_notebooks():
        print(f"exported {export(path, repository_url).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
