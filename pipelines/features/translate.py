"""Machine translation of curated English captions, as Ray Data batch inference
(docs/spec/fluency.md): any curated set becomes Chinese captions the fluency pipeline reads
(score_fluency, features, train_captioner language=zh), as import_flickr8k_cn writes them.

    DATA/curated/*.parquet (English)  ->  OUTPUT/curated/*.parquet (records.CURATED_LANGUAGE:
                                          caption segmented, text, original = the English
                                          caption, language zh, source the translator)
                                          OUTPUT/rejected/*.parquet (no translation, or failed)
                                          OUTPUT/translate.json, OUTPUT/_SUCCESS

The translator (conceptual.fluency.translation) is the offline stand-in by default:
Flickr8k-CN's provided Baidu (or Google) translations, the nearest English sentence's for
one they do not hold; `translator=service` is a LibreTranslate-compatible service at
`service.url`, its key in the environment variable `service.key_env`; it must translate a
word as the job starts, and a batch it does not answer within `service.timeout_s` fails the
job (conceptual.services.ServiceDown), never tried again row by row. A record the
translator has no translation for is rejected (stage `translate`, reason `no_translation`);
one whose translation raises, `internal_error` (pipelines/dataflow/set_aside.py); past
`errors.max_rate` (or `errors.max_count`) of either, the job fails.
"""

from __future__ import annotations

import os
import time
from functools import partial
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from conceptual import storage
from conceptual.config import Config, ConfigError
from conceptual.errors import INTERNAL_ERROR
from conceptual.fluency.translation import ProvidedTranslations, ServiceTranslator, Translator
from conceptual.pipelines.dataflow import set_aside
from conceptual.pipelines.dataflow.readers import read_row_groups
from conceptual.records import CURATED_LANGUAGE, Stage, rejected_records
from conceptual.storage import SUCCESS
from conceptual.text.chinese import normalize, tokens_for_captioning

SUMMARY = "translate.json"
NO_TRANSLATION = "no_translation"
TRANSLATE = Stage(
    "translate", (NO_TRANSLATION, INTERNAL_ERROR), "errors.max_rate, errors.max_count"
)


class ServiceConfig(Config):
    url: str | None = None  # a LibreTranslate-compatible service (translator=service)
    key_env: str = "CONCEPTUAL_TRANSLATE_KEY"  # the environment variable holding its key
    timeout_s: float = 30.0  # a batch's whole request (ServiceTranslator)


class TranslateConfig(set_aside.RewriteConfig):
    # baidu, google: Flickr8k-CN's provided translations (offline; --cn); service: an HTTP one
    translator: Literal["baidu", "google", "service"] = "baidu"
    nearest: bool = True  # provided: a sentence they lack gets the nearest English one's
    service: ServiceConfig = ServiceConfig()


def make_translator(config: TranslateConfig, cn_dir: str | None, target: str) -> Translator:
    """The configured translator; a ConfigError when what it needs is missing."""
    if config.translator != "service":
        if cn_dir is None:
            raise ConfigError(f"translator={config.translator} reads Flickr8k-CN: give --cn DIR")
        return ProvidedTranslations(cn_dir, config.translator, nearest=config.nearest)
    if not config.service.url:
        raise ConfigError("translator=service needs service.url")
    key = os.environ.get(config.service.key_env)
    if not key:
        raise ConfigError(f"translator=service needs its key in ${config.service.key_env}")
    return ServiceTranslator(config.service.url, key, target, config.service.timeout_s)


class TranslateOperator:
    """Builds the translator once per actor; translates a batch's captions, writes the
    records without a translation to the rejected folder and returns the others."""

    def __init__(self, config: TranslateConfig, cn_dir: str | None, target: str, rejected: str):
        self.translator = make_translator(config, cn_dir, target)
        self.source, self.target, self.rejected = config.translator, target, rejected

    def __call__(self, batch: pa.Table) -> pa.Table:
        english = batch["caption"].to_pylist()
        translated = self.translator.translate(english)
        missing = [i for i, t in enumerate(translated) if not (t and t.strip())]
        if missing:
            set_aside.write_rejected([untranslated(batch.take(missing))], self.rejected)
        keep = [i for i, t in enumerate(translated) if t and t.strip()]
        rows = batch.take(keep)
        texts = [normalize(translated[i]) for i in keep]
        columns = {
            "caption": pa.array([tokens_for_captioning(t) for t in texts], pa.string()),
            "language": pa.array([self.target] * len(keep), pa.string()),
            "source": pa.array([self.source] * len(keep), pa.string()),
            "original": pa.array([english[i] for i in keep], pa.string()),
            "text": pa.array(texts, pa.string()),
            "fluency": pa.nulls(len(keep), pa.float32()),  # jobs.score_fluency's
        }
        out = [
            columns[f.name] if f.name in columns else rows[f.name].cast(f.type)
            for f in CURATED_LANGUAGE
        ]
        return pa.Table.from_arrays(out, schema=CURATED_LANGUAGE)


def untranslated(rows: pa.Table) -> pa.Table:
    """Records the translator had nothing for, as rejected rows."""
    schema = rejected_records(rows.schema)
    given = {"stage": TRANSLATE.name, "reason": NO_TRANSLATION, "detail": "no translation"}
    columns = [
        pa.array([given[f.name]] * len(rows), f.type) if f.name in given else rows[f.name]
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def translate(
    data_uri: str, output_uri: str, config: TranslateConfig, cn_dir: str | None, target: str = "zh"
) -> dict[str, Any]:
    """Write every record of DATA translated under OUTPUT/curated; return the summary."""
    started = time.monotonic()
    make_translator(config, cn_dir, target)  # a missing key or folder fails before any work
    data = storage.output_part(data_uri, "curated", config.allow_incomplete)
    curated_uri = storage.join(output_uri, "curated")
    rejected_uri = storage.join(output_uri, set_aside.REJECTED)
    fs, _ = storage.resolve(data)
    files = [f for f in storage.list_files(data) if f.endswith(".parquet")]
    check_english(fs, files, data)
    for uri in (storage.join(output_uri, SUCCESS), curated_uri, rejected_uri):
        storage.delete(uri)

    kwargs = {"config": config, "cn_dir": cn_dir, "target": target, "rejected": rejected_uri}
    actors = set_aside.rewrite_guarded(
        read_row_groups(fs, files), TranslateOperator, kwargs, TRANSLATE.name, rejected_uri,
        curated_uri, config,
    )  # fmt: skip
    rejected, samples = set_aside.tally(rejected_uri)
    records = storage.written_rows(data)
    set_aside.check(rejected, records, config.errors, samples)
    written = storage.written_rows(curated_uri)
    summary = {
        "data": data,
        "translator": config.translator,
        "language": target,
        "input": records,
        "translated": written,
        "rejected": rejected,  # {stage: {reason: n}}
        "actors": actors,
        "seconds": round(time.monotonic() - started, 2),
    }
    storage.write_json(storage.join(output_uri, SUMMARY), summary)
    storage.write_json(storage.join(output_uri, SUCCESS), {"rows": written})
    return summary


def check_english(fs, files: list[str], data: str) -> None:
    """Fail before any work on data that is not curated captions, or already translated."""
    if not files:
        raise ValueError(f"no Parquet files under {data}")
    with fs.open_input_file(files[0]) as f:
        table = pq.read_table(f, columns=None).slice(0, 1)
    if "caption" not in table.column_names:
        raise ValueError(f"{data} is not curated captions: no caption column")
    if "language" in table.column_names and table.num_rows:
        language = table["language"][0].as_py()
        if language not in (None, "en"):
            raise ValueError(f"{data} holds captions in {language!r}: translate English ones")


def run(
    data_uri: str, output_uri: str, config: TranslateConfig, cn_dir: str | None, target: str
) -> tuple[dict[str, Any], str]:
    """The translate job: one MLflow run around the translation. Returns (summary, run id)."""
    work = partial(translate, data_uri, output_uri, config, cn_dir, target)
    params = {"to": target}
    return set_aside.tracked_rewrite(TRANSLATE, config, data_uri, output_uri, params, SUMMARY, work)
