"""Runs the text curation over every real text in ../shared/data and counts the texts that
raise, by where they raise (issue 30: no row ever kills a job). A script, not a test:

    .venv/bin/python tests/benchmarks/text_never_raises.py [--data ../shared/data]
        [--filters both|on|off] [--limit N] [--json out.json]

The texts: the released Conceptual Captions (`cc_val_captions.tsv`), both columns of the
slug pairs, COCO's and Flickr8k's captions and Flickr8K-CN's English originals, each as it
is and lowercased (identical strings run once). `TextCurator.process` runs in batches with
the filters on (as the pipeline runs it) and off (as the `hypernymize` command runs it by
default, so every text reaches the transformation); a batch that raises is rerun one text
at a time to find the texts that raise. The texts are those of `shared_texts` in
tests/unit/curation/test_text_never_raises.py, whose `slow` test runs them all too.

Measured (2 shared cores): 58,935 texts, 92,278 distinct cased and lowercased. On b4fbcd0,
before issue 30's fixes: filters on, 0 raised (69 s); filters off, 2 raised (174 s), both
"IndexError at hypernymize.py:676 _without_titles" ("Silver and blue car marked 104 raises
dust ...", cased and lowercased: "104" labelled PRODUCT, a name of numbers only). After:
0 and 0 (145 s and 255 s on a busier machine).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit" / "curation"))

from test_text_never_raises import cased_and_lowercased, shared_texts  # noqa: E402


def where(error: BaseException) -> str:
    """The exception's type and the innermost frame of the platform's code it passed."""
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "/conceptual/" in f.filename] or frames
    frame = ours[-1]
    return f"{type(error).__name__} at {Path(frame.filename).name}:{frame.lineno} {frame.name}"


def run(curator, texts: list[str], apply_filters: bool, batch: int = 256) -> dict[str, list[str]]:
    """{location: texts raising there}, over all the texts."""
    raised: dict[str, list[str]] = collections.defaultdict(list)
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        try:
            curator.process(chunk, apply_filters=apply_filters)
            continue
        except Exception:
            pass
        for text in chunk:
            try:
                curator.process([text], apply_filters=apply_filters)
            except Exception as error:
                raised[where(error)].append(text)
    return raised


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = os.environ.get("CONCEPTUAL_REAL_DATA", str(REPO.parent / "shared" / "data"))
    parser.add_argument("--data", default=default)
    parser.add_argument("--filters", choices=("both", "on", "off"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="run the first N texts only")
    parser.add_argument("--json", default=None, help="write the counts and texts here")
    args = parser.parse_args()

    from conceptual.text.curate import TextCurator

    sources = shared_texts(Path(args.data))
    texts = cased_and_lowercased(sources)[: args.limit]
    rows = sum(map(len, sources.values()))
    print(f"{rows} texts in {len(sources)} sources; {len(texts)} distinct cased+lowercased")
    curator = TextCurator()
    modes = {"both": (True, False), "on": (True,), "off": (False,)}[args.filters]
    report: dict = {"rows": rows, "distinct_texts": len(texts), "modes": {}}
    failures = 0
    for apply_filters in modes:
        began = time.perf_counter()
        raised = run(curator, texts, apply_filters)
        seconds = time.perf_counter() - began
        count = sum(map(len, raised.values()))
        failures += count
        name = "filters on" if apply_filters else "filters off"
        print(f"\n{name}: {len(texts)} texts in {seconds:.0f} s, {count} raised")
        for location, failed in sorted(raised.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(failed):5d}  {location}")
            for text in failed[:5]:
                print(f"         {text!r}")
        report["modes"][name] = {
            "seconds": round(seconds, 1),
            "raised": count,
            "by_location": {loc: failed for loc, failed in raised.items()},
        }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
