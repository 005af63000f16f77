"""Offline asset resolution: WordNet copied from Debian's package into a project-local NLTK
data directory, with its lexnames generated; clear errors when no source exists."""

from __future__ import annotations

import json
import pickle
import shutil

import nltk
import pytest

from conceptual import assets

needs_debian_wordnet = pytest.mark.skipif(
    not (assets.DEBIAN_WORDNET.is_dir() and assets.DEBIAN_LEXNAMES_MAN.is_file()),
    reason="Debian's wordnet-base and wordnet-sense-index are not installed",
)


@pytest.fixture
def fresh_home(tmp_path, monkeypatch):
    """A state dir of its own and an NLTK search path that finds no WordNet yet."""
    monkeypatch.setenv("CONCEPTUAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "no_nltk_data")])
    assets.wordnet.cache_clear()
    yield tmp_path
    assets.wordnet.cache_clear()  # later tests load the real one again


@needs_debian_wordnet
def test_lexnames_generated_from_the_man_page():
    lines = assets.lexnames_from_man_page().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3"
    assert lines[3] == "03\tnoun.Tops\t1"
    assert lines[18] == "18\tnoun.person\t1"
    assert lines[44] == "44\tadj.ppl\t3"


@needs_debian_wordnet
def test_wordnet_prepared_from_debian_into_the_state_dir(fresh_home):
    where = assets.ensure_wordnet()
    target = fresh_home / "home" / "nltk_data" / "corpora" / "wordnet"
    assert where.startswith(str(target)) and "Debian" in where
    assert len((target / "lexnames").read_text().splitlines()) == 45
    wn = assets.wordnet()
    assert wn.synset("dog.n.01").lexname() == "noun.animal"
    assert [h.name() for h in wn.synset("einstein.n.01").instance_hypernyms()] == ["physicist.n.01"]
    # a rerun finds the copy and leaves it alone
    mtime = (target / "data.noun").stat().st_mtime_ns
    assets.wordnet.cache_clear()
    assert "found on NLTK's data path" in assets.ensure_wordnet()
    assert (target / "data.noun").stat().st_mtime_ns == mtime


@needs_debian_wordnet
def test_wordnet_index_parsed_once_then_read_from_the_cache(fresh_home):
    assets.ensure_wordnet()
    caches = list((fresh_home / "home" / "cache").glob("wordnet-index-*.json"))
    assert len(caches) == 1
    parsed = assets.wordnet()
    assets.wordnet.cache_clear()
    cached = assets.wordnet()
    assert cached is not parsed and cached._lemma_pos_offset_map == parsed._lemma_pos_offset_map
    assert cached.satellite_offsets == parsed.satellite_offsets
    assert [s.name() for s in cached.synsets("Paris")] == [
        s.name() for s in parsed.synsets("Paris")
    ]
    assert cached.synsets("fast", "s") == parsed.synsets("fast", "s")  # satellites kept

    # A damaged cache is parsed around and rewritten; a changed database gets a new one.
    caches[0].write_bytes(b"not JSON")
    assets.wordnet.cache_clear()
    assert assets.wordnet()._lemma_pos_offset_map == parsed._lemma_pos_offset_map
    assert caches[0].read_bytes() != b"not JSON"
    index = fresh_home / "home" / "nltk_data" / "corpora" / "wordnet" / "index.adv"
    index.write_bytes(index.read_bytes())  # same content, new modification time
    assets.wordnet.cache_clear()
    assets.wordnet()
    assert len(list((fresh_home / "home" / "cache").glob("wordnet-index-*.json"))) == 2


class _RunsCode:
    """Unpickling this runs code: it touches `path`."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


@needs_debian_wordnet
def test_a_planted_pickle_in_the_cache_runs_no_code(fresh_home):
    # Anyone who can write to the state directory can plant a file there; the cache must be
    # data that loading cannot turn into code.
    assets.ensure_wordnet()
    (cache,) = (fresh_home / "home" / "cache").glob("wordnet-index-*.json")
    planted = fresh_home / "planted"
    cache.write_bytes(pickle.dumps((_RunsCode(planted), {})))
    assets.wordnet.cache_clear()
    assert assets.wordnet().synsets("dog")
    assert not planted.exists()
    assert json.loads(cache.read_bytes())["lemmas"]["dog"]["n"]  # rewritten as JSON


@needs_debian_wordnet
def test_wordnet_from_an_explicit_path(fresh_home, monkeypatch):
    source = fresh_home / "wordnet-3.0"
    shutil.copytree(assets.DEBIAN_WORDNET, source)
    monkeypatch.setattr(assets, "DEBIAN_WORDNET", fresh_home / "absent")
    assert f"from {source}" in assets.ensure_wordnet(str(source))


def test_missing_wordnet_says_how_to_install(fresh_home, monkeypatch):
    monkeypatch.setattr(assets, "DEBIAN_WORDNET", fresh_home / "absent")
    monkeypatch.setattr(nltk, "download", lambda *args, **kwargs: False)  # offline
    with pytest.raises(assets.AssetError, match="apt-get install wordnet-base"):
        assets.ensure_wordnet()


def test_a_path_without_wordnet_is_an_error(fresh_home):
    with pytest.raises(assets.AssetError, match="not a WordNet 3.0 database"):
        assets.ensure_wordnet(str(fresh_home))


def test_nltk_searches_nltk_data_first_and_the_state_dir_last(fresh_home, monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(fresh_home / "mine"))
    assets.register_nltk_data()
    assert nltk.data.path[0] == str(fresh_home / "mine")
    assert nltk.data.path[-1] == str(fresh_home / "home" / "nltk_data")


def test_prepare_command_fails_with_the_message(fresh_home, monkeypatch, capsys, nlp):
    monkeypatch.setattr(assets, "DEBIAN_WORDNET", fresh_home / "absent")
    monkeypatch.setattr(nltk, "download", lambda *args, **kwargs: False)
    assert assets.main(["prepare"]) == 1
    assert "WordNet 3.0 for NLTK not found" in capsys.readouterr().err


def test_setup_builds_spacy_and_thinc_without_profiling_hooks():
    # their wheels for Python 3.11 have them (a GIL round trip in every nogil call)
    assert assets.profiled_builds() == []


def test_a_library_whose_code_reports_calls_to_a_profiler_is_profiled(monkeypatch):
    from importlib.metadata import version

    namespace: dict = {}
    exec(compile("def parse():\n    return 1\n", "spacy/parse.pyx", "exec"), namespace)
    # spaCy's stand-in is Cython code that reports to the profiler; thinc's, Python code
    libraries = {"spacy": namespace["parse"], "thinc": lambda: 1}
    monkeypatch.setattr(assets, "NLP_LIBRARIES", libraries)
    assert assets.profiled_builds() == [f"spacy=={version('spacy')}"]
