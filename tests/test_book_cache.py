"""The execution cache follows the library: a change under lib/ re-executes the chapters."""

import importlib.util
import types
from pathlib import Path

import pytest

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


@pytest.mark.chapter
def test_a_parallel_run_stored_by_the_harness_is_what_the_book_finds(tmp_path, monkeypatch):
    """``make book`` executes the chapters through the harness and the build takes them from the
    cache: an execution stored with :func:`harness.store_in_cache` is found for its chapter,
    and a chapter without one is still missing."""
    monkeypatch.setattr(harness, "BUILD", tmp_path)
    fixtures = Path(__file__).parent / "fixtures"
    done, missing = fixtures / "false_claim.md", fixtures / "no_claims.md"
    result = harness.run_chapter(done, parameters={"claim_holds": True}, work_dir=tmp_path / "executed")
    assert result.ok, result.error
    assert harness.uncached_for_book([done, missing]) == [done, missing]
    assert harness.store_in_cache(done, Path(result.executed), seconds=result.wall_seconds)
    assert harness.uncached_for_book([done, missing]) == [missing]
    assert (tmp_path / ".nnapprox-execution-key").read_text() == ext.execution_key()


def _book_mode(tmp_path, monkeypatch, uncached):
    fixtures = Path(__file__).parent / "fixtures"
    paths = [fixtures / "false_claim.md", fixtures / "no_claims.md"]
    calls = []
    monkeypatch.setattr(harness, "toc_notebooks", lambda root=harness.ROOT: paths)
    monkeypatch.setattr(harness, "uncached_for_book", lambda ps: [p for p in ps if p.stem in uncached])
    monkeypatch.setattr(harness, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(harness, "BUILD", tmp_path)

    def run_chapters(ps, **options):
        calls.append((ps, options))
        return [harness.ChapterResult(p.stem, p.name, options["profile"], options["device"], 0, ok=True,
                                      primed=True, claims_passed=1, claims_total=1) for p in ps]

    monkeypatch.setattr(harness, "run_chapters", run_chapters)
    return paths, calls


def test_make_book_executes_only_the_chapters_the_cache_lacks(tmp_path, monkeypatch):
    monkeypatch.delenv("NNAPPROX_PROFILE", raising=False)
    monkeypatch.delenv("NNAPPROX_REQUIRE_CACHE", raising=False)
    paths, calls = _book_mode(tmp_path, monkeypatch, uncached={"no_claims"})
    assert harness.main(["--book", "--jobs", "2"]) == 0
    (ran, options), = calls
    assert ran == [paths[1]] and options["jobs"] == 2
    assert (options["profile"], options["device"], options["seeds"]["no_claims"]) == ("quick", "cpu", 0)
    calls.clear()
    _book_mode(tmp_path, monkeypatch, uncached=set())
    assert harness.main(["--book"]) == 0 and calls == []  # a second make book: nothing executes


def test_a_book_from_executions_made_elsewhere_never_executes_here(tmp_path, monkeypatch):
    """The GPU workflow's book job (NNAPPROX_REQUIRE_CACHE=1) must not run a missing chapter on
    its CPU runner: the harness names it and stops."""
    import pytest

    monkeypatch.setenv("NNAPPROX_REQUIRE_CACHE", "1")
    _, calls = _book_mode(tmp_path, monkeypatch, uncached={"false_claim"})
    with pytest.raises(SystemExit, match="no execution in the cache: false_claim"):
        harness.main(["--book"])
    assert calls == []


@pytest.mark.parametrize("records, expected", [
    ({"a": {"profile": "quick", "device": "cpu"}, "b": {"profile": "quick", "device": "cpu"}},
     "This copy shows every chapter run at the quick profile on cpu (scaled down"),
    ({"a": {"profile": "full", "device": "cuda"}}, "This copy shows 1 of 2 chapters run at the full profile on cuda"),
    ({"a": {"profile": "full", "device": "cuda"}, "b": {"profile": "quick", "device": "cpu"}},
     "ran at different profiles (full on cuda: a; quick on cpu: b)"),
    ({}, "No chapter of this copy has run yet"),
])
def test_the_front_page_says_which_profile_the_chapters_ran_at(records, expected):
    para = ext.profile_paragraph(records, ["a", "b"], "status.html")
    assert expected in para.astext()
    links = [n["refuri"] for n in para.findall(lambda n: n.tagname == "reference")]
    assert links == (["status.html"] if records else [])


def test_the_front_page_holds_the_profile_line():
    index = (harness.ROOT / "book" / "index.md").read_text()
    assert "```{nnapprox-profile}" in index and "`quick`" in index and "`full`" in index
