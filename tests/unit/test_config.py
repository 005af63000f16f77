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
    from conceptual.pipelines.train_captioner import TrainConfig

    assert load(TrainConfig, None, [f"language={tag}"]).language == "zh"
    assert load(TrainConfig, None, ["language=en-US"]).language == "en"
    with pytest.raises(ConfigError, match="'en' or 'zh'"):
        load(TrainConfig, None, ["language=fr"])


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
