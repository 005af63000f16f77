"""The translate job on real data: Flickr8k-mini photos' English captions (import_flickr8k_cn
source=english) translated by Flickr8k-CN's provided Baidu translations into the records
import_flickr8k_cn writes for Chinese captions; a caption it has no translation for is
rejected, not the job's end."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.realdata]

PHOTOS = 3
UNKNOWN = "zzqx vvwk"  # no Flickr8k caption shares a word with it: no nearest either


@pytest.fixture
def english(real_data, tmp_path) -> str:
    """An English import of three photos, one caption replaced by one nobody translated."""
    from conceptual.fluency.flickr8k_cn import Flickr8kCnConfig, import_flickr8k_cn

    images = tmp_path / "images"
    images.mkdir()
    for photo in sorted((real_data / "flickr8k_mini" / "images").glob("*.jpg"))[:PHOTOS]:
        shutil.copy(photo, images / photo.name)
    out = tmp_path / "en"
    config = Flickr8kCnConfig(source="english")
    import_flickr8k_cn(images, real_data / "flickr8k_cn", str(out), config)
    part = sorted((out / "curated").glob("*.parquet"))[0]
    table = pq.read_table(part)
    captions = table["caption"].to_pylist()
    captions[0] = UNKNOWN
    table = table.set_column(table.schema.get_field_index("caption"), "caption", pa.array(captions))
    pq.write_table(table, part)
    return str(out)


def test_translate_writes_chinese_records_the_fluency_pipeline_reads(
    english, real_data, tmp_path, ray_local, platform_home, capsys
):
    from conceptual.fluency.translation import ProvidedTranslations
    from conceptual.jobs import translate
    from conceptual.records import CURATED_LANGUAGE
    from conceptual.text.chinese import normalize, tokens_for_captioning

    cn, out = real_data / "flickr8k_cn", tmp_path / "zh"
    argv = ["--data", english, "--output", str(out), "--to", "zh", "--cn", str(cn)]
    overrides = ["nearest=false", "actors=1", "errors.max_rate=0.2", "experiment=test-fluency"]
    assert translate.main([*argv, *overrides]) == 0, capsys.readouterr().err
    table = pq.read_table(out / "curated")
    assert table.schema == CURATED_LANGUAGE
    rows = table.drop(["image"]).to_pylist()
    assert len(rows) == PHOTOS * 5 - 1
    baidu = ProvidedTranslations(cn, "baidu")
    for row in rows:
        assert (row["language"], row["source"], row["fluency"]) == ("zh", "baidu", None)
        assert row["text"] == normalize(baidu.translate([row["original"]])[0])
        assert row["caption"] == tokens_for_captioning(row["text"])  # as the import writes it
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert [(r["stage"], r["reason"], r["caption"]) for r in rejected] == [
        ("translate", "no_translation", UNKNOWN)
    ]
    summary = json.loads((out / "translate.json").read_text())
    assert (summary["input"], summary["translated"]) == (PHOTOS * 5, PHOTOS * 5 - 1)
    assert summary["rejected"] == {"translate": {"no_translation": 1}}
    assert (out / "_SUCCESS").is_file()


def test_translate_refuses_clearly(english, tmp_path, monkeypatch, capsys):
    from conceptual.jobs import translate

    argv = ["--data", english, "--output", str(tmp_path / "zh"), "--to", "zh"]
    assert translate.main(argv) == 2
    assert "error: translator=baidu reads Flickr8k-CN: give --cn DIR" in capsys.readouterr().err
    monkeypatch.delenv("CONCEPTUAL_TRANSLATE_KEY", raising=False)
    service = ["translator=service", "service.url=http://127.0.0.1:9"]
    assert translate.main([*argv, *service]) == 2
    assert "$CONCEPTUAL_TRANSLATE_KEY" in capsys.readouterr().err
    assert not (tmp_path / "zh").exists()
