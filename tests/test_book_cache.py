"""The execution cache follows the library: a change under lib/ re-executes the chapters."""

import importlib.util
import types
from pathlib import Path

import harness

spec = importlib.util.spec_from_file_location("nnapprox_book", harness.ROOT / "book" / "_ext" / "nnapprox_book.py")
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)


def test_library_hash_changes_with_any_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    h1 = ext.library_hash(tmp_path)
    (tmp_path / "pkg" / "a.py").write_text("x = 2\n")
    h2 = ext.library_hash(tmp_path)
    (tmp_path / "pkg" / "b.py").write_text("")
    h3 = ext.library_hash(tmp_path)
    assert len({h1, h2, h3}) == 3
    (tmp_path / "pkg" / "b.py").unlink()
    assert ext.library_hash(tmp_path) == h2


def test_the_real_library_is_hashed():
    assert ext.LIB == harness.ROOT / "lib" / "nnapprox" and (ext.LIB / "__init__.py").exists()
    assert ext.execution_key().startswith("lib-" + ext.library_hash()[:16])


def test_execution_key_includes_the_profile(monkeypatch):
    monkeypatch.setenv("NNAPPROX_PROFILE", "full")
    full = ext.execution_key()
    monkeypatch.setenv("NNAPPROX_PROFILE", "quick")
    assert ext.execution_key() != full


def _init(tmp_path, key):
    cache = tmp_path / "_build" / ".jupyter_cache"
    config = types.SimpleNamespace(nb_execution_cache_path=str(cache), nnapprox_execution_key="")
    app = types.SimpleNamespace(outdir=str(tmp_path / "_build" / "html"), confdir=str(tmp_path),
                                config=config)
    ext.execution_key = lambda: key  # noqa: the function under test reads the key from here
    ext._on_config_inited(app, config)
    return cache, config


def test_stale_cache_is_cleared_and_fresh_cache_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(ext, "execution_key", ext.execution_key)
    cache, config = _init(tmp_path, "lib-aaa")
    cache.mkdir(parents=True)
    (cache / "executed.nb").write_text("outputs")
    _init(tmp_path, "lib-aaa")            # same library: the cache survives
    assert (cache / "executed.nb").exists()
    _, config = _init(tmp_path, "lib-bbb")  # library changed: the cache is cleared
    assert not cache.exists()
    assert config.nnapprox_execution_key == "lib-bbb"


def test_toc_notebooks_in_reading_order():
    paths = ext.toc_notebook_paths()
    assert [p.stem for p in paths] == [p.stem for p in harness.toc_notebooks()]
    assert paths[0].stem == "intro" and "index" not in [p.stem for p in paths]  # the front page has no code


def test_a_build_from_executions_made_beforehand_finds_what_is_missing(tmp_path):
    """The GPU workflow builds the book from the chapters job's executions
    (NNAPPROX_REQUIRE_CACHE=1): a chapter without a cached execution must be named before
    anything runs, and one with an execution must be found."""
    import jupytext
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    fixtures = Path(__file__).parent / "fixtures"
    done, missing = fixtures / "slow_cell.md", fixtures / "false_claim.md"
    cache = tmp_path / ".jupyter_cache"
    assert ext.uncached_notebooks(cache, [done, missing]) == [done, missing]  # no cache at all
    nb = jupytext.read(done)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="executed beforehand\n")]
    get_cache(str(cache)).cache_notebook_bundle(CacheBundleIn(nb, str(done)), check_validity=False)
    assert ext.uncached_notebooks(cache, [done, missing]) == [missing]
