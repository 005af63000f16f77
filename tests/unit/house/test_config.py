import pytest

from conceptual.config import Config, ConfigError, flatten, load, parse_overrides, to_yaml


class Inner(Config):
    threshold: float = 0.5
    names: list[str] = ["a"]


class Outer(Config):
    inner: Inner = Inner()
    enabled: bool = True
    label: str = "x"


def test_defaults_without_file():
    cfg = load(Outer)
    assert cfg.inner.threshold == 0.5 and cfg.enabled


def test_yaml_then_overrides_win(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("inner:\n  threshold: 0.7\nlabel: from-file\n")
    cfg = load(Outer, path, ["inner.threshold=0.9", "enabled=false", "inner.names=[b, c]"])
    assert cfg.inner.threshold == 0.9
    assert cfg.enabled is False
    assert cfg.inner.names == ["b", "c"]
    assert cfg.label == "from-file"


def test_unknown_key_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="inner.treshold"):
        load(Outer, None, ["inner.treshold=1"])


def test_bad_type_is_an_error():
    with pytest.raises(ConfigError, match="inner.threshold"):
        load(Outer, None, ["inner.threshold=high"])


@pytest.mark.parametrize("bad", ["no_equals", "=1", "a.b=[unclosed"])
def test_malformed_override(bad):
    with pytest.raises(ConfigError):
        parse_overrides([bad])


def test_missing_and_non_mapping_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load(Outer, tmp_path / "absent.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load(Outer, tmp_path / "list.yaml")


def test_flatten_and_yaml_round_trip(tmp_path):
    cfg = load(Outer, None, ["inner.threshold=0.25"])
    assert flatten(cfg) == {
        "inner.threshold": 0.25,
        "inner.names": ["a"],
        "enabled": True,
        "label": "x",
    }
    path = tmp_path / "back.yaml"
    path.write_text(to_yaml(cfg))
    assert load(Outer, path) == cfg


@pytest.mark.parametrize("tag", ["zh", "zh-CN", "ZH", "zh_Hans", " zh-cn "])
def test_any_tag_of_chinese_is_zh(tag):
    from conceptual.pipelines.families.captioner.train_captioner import CaptionerTrainConfig

    assert load(CaptionerTrainConfig, None, [f"language={tag}"]).language == "zh"
    assert load(CaptionerTrainConfig, None, ["language=en-US"]).language == "en"
    with pytest.raises(ConfigError, match="'en' or 'zh'"):
        load(CaptionerTrainConfig, None, ["language=fr"])


@pytest.mark.parametrize(
    "overrides",
    [["asr=true", "asr.lm=captions"], ["asr.lm=captions", "asr=true"]],
)
def test_a_section_switch_and_its_keys_are_one_section(overrides):
    """`evaluate_retriever ... asr=true asr.lm=captions`: the switch (`asr=true` reads as
    `asr.enabled=true`) and a key of the same section agree, in either order."""
    from conceptual.speech.recognizer import AsrConfig

    class Evaluation(Config):
        asr: AsrConfig = AsrConfig()

    asr = load(Evaluation, None, overrides).asr
    assert asr.enabled and asr.lm == "captions"
    with pytest.raises(ConfigError, match="conflicts"):
        parse_overrides(["label=x", "label.y=1"])


def test_a_file_extends_another_and_states_only_what_differs(tmp_path):
    (tmp_path / "base.yaml").write_text("inner:\n  threshold: 0.7\n  names: [b]\nlabel: base\n")
    (tmp_path / "mine.yaml").write_text("extends: base.yaml\ninner:\n  threshold: 0.9\n")
    cfg = load(Outer, tmp_path / "mine.yaml", ["label=cli"])
    # the file's own keys over the base's, the overrides over both; a section merges by key
    assert (cfg.inner.threshold, cfg.inner.names, cfg.label) == (0.9, ["b"], "cli")


def test_a_section_extends_a_file_of_its_own_keys(tmp_path):
    (tmp_path / "inner.yaml").write_text("threshold: 0.2\nnames: [z]\n")
    (tmp_path / "outer.yaml").write_text("inner:\n  extends: inner.yaml\n  names: [y]\n")
    assert load(Outer, tmp_path / "outer.yaml").inner == Inner(threshold=0.2, names=["y"])


def test_a_file_anywhere_extends_a_shipped_config_by_name(tmp_path):
    from conceptual.config import SHIPPED, read_config

    (tmp_path / "mine.yaml").write_text("extends: train_retriever.yaml\nepochs: 99\n")
    mine, shipped = (
        read_config(tmp_path / "mine.yaml"),
        read_config(SHIPPED / "train_retriever.yaml"),
    )
    assert mine == {**shipped, "epochs": 99}


@pytest.mark.parametrize(
    "files, error",
    [
        ({"a.yaml": "extends: b.yaml\n", "b.yaml": "extends: a.yaml\n"}, "makes a cycle"),
        ({"a.yaml": "extends: a.yaml\n"}, "makes a cycle"),
        ({"a.yaml": "extends: missing.yaml\n"}, "no such file beside it"),
        ({"a.yaml": "extends: [b.yaml]\n"}, "extends must name a YAML file"),
        ({"a.yaml": "extends: b.yaml\n", "b.yaml": "- a list\n"}, "must be a mapping"),
    ],
)
def test_a_bad_extends_is_a_config_error_naming_the_file(tmp_path, files, error):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=error):
        load(Outer, tmp_path / "a.yaml")


def test_early_key_checks_read_through_extends(tmp_path):
    """check_keys (a job's check before its heavy imports) resolves `extends` in the shipped
    file and in the user's: train_contrastive.yaml lists its keys by extending."""
    from conceptual.config import check_keys

    with pytest.raises(ConfigError, match="epoch: unknown key, did you mean epochs"):
        check_keys("train_contrastive.yaml", ["epoch=3"])
    (tmp_path / "mine.yaml").write_text("extends: train_contrastive.yaml\nmodel:\n  embed_dm: 8\n")
    with pytest.raises(ConfigError, match="did you mean model.embed_dim"):
        check_keys("train_contrastive.yaml", [], tmp_path / "mine.yaml")
    check_keys("pipeline.yaml", ["curate.image.min_side=100", "train_contrastive.epochs=1"])
