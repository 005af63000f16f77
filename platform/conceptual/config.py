"""Typed configuration: pydantic models loaded from YAML, with `key=value` overrides.

    cfg = load(CurationConfig, "configs/curation.yaml", ["text.filters.max_chars=500"])

A file may extend another, at its top or in any section: `extends: train_retriever.yaml`
then only the keys that differ (the path is the file's neighbour, else a shipped config).

Unknown keys are errors (a typo must not silently fall back to a default; the error names
the closest key: `epoch: unknown key, did you mean epochs?`), override values
are parsed as YAML scalars (`true`, `3`, `0.5`, `[a, b]`), and `flatten` gives the dotted
view that MLflow logs as params.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

# Keys renamed in this release, by shipped config: old -> new. The old name is still read
# for one release, with a line saying so (check_keys and the config class both read this).
RENAMED: dict[str, dict[str, str]] = {"pipeline.yaml": {"stages": "steps"}}


class Config(BaseModel):
    """Base for every config section: strict about keys, validated on assignment. A class
    whose keys were renamed names its shipped file in `renamed_in` (RENAMED)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    renamed_in: typing.ClassVar[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _read_old_names(cls, data: Any) -> Any:
        if cls.renamed_in is None or not isinstance(data, dict):
            return data
        return renamed(data, RENAMED[cls.renamed_in])


def renamed(data: dict[str, Any], names: dict[str, str], say: bool = True) -> dict[str, Any]:
    """`data` with each old key of `names` under its new name, saying so on the terminal
    (`say`); an old and a new key together are a ConfigError (which one was meant?)."""
    from conceptual.logs import note

    data = dict(data)
    for old, new in names.items():
        if old not in data:
            continue
        if new in data:
            raise ConfigError(f"{old} and {new} are one key ({old} is its old name): give {new}")
        if say:
            note(f"`{old}` is now `{new}`: read as {new} for this release, write {new}")
        data[new] = data.pop(old)
    return data


class ConfigError(ValueError):
    """A config file or override that cannot be used; the message says what to fix."""


C = TypeVar("C", bound=Config)


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """`["a.b=1", "c=x"]` -> `{"a": {"b": 1}, "c": "x"}`."""
    tree: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"override {item!r} is not key=value (for example text.filters.max_chars=500)"
            )
        node = tree
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node[part] = _section(node.get(part, {}))
            node = node[part]
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with an earlier override")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {item!r}: value is not valid YAML: {exc}") from exc
        if isinstance(value, bool) and isinstance(node.get(leaf), dict):
            value = {**node[leaf], "enabled": value}  # asr.lm=captions asr=true
        node[leaf] = value
    return tree


def _section(value: Any) -> Any:
    """A section's switch is its `enabled` (`asr=true` reads as `asr.enabled=true`,
    AsrConfig): so `asr=true asr.lm=captions` is one section, not two overrides at odds."""
    return {"enabled": value} if isinstance(value, bool) else value


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path, name: str = "config") -> Any:
    """A YAML file's content ({} when empty); ConfigError naming the file, as `name`, when
    it cannot be read or parsed."""
    try:
        return yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read {name} {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name} {path} is not valid YAML: {exc}") from exc


# The shipped config files (configs/*.yaml), each listing every key of its config with its
# default (tests/unit/house/test_configs.py holds them to it).
SHIPPED = Path(__file__).resolve().parents[2] / "configs"
EXTENDS = "extends"


def read_config(path: str | Path) -> dict[str, Any]:
    """A config file's keys, every `extends: FILE` in it resolved: the mapping holding it is
    FILE's keys (themselves resolved) with the mapping's own merged over them."""
    return _resolved(_mapping(Path(path)), Path(path), (Path(path).resolve(),))


def _mapping(path: Path) -> dict[str, Any]:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    return data


def _resolved(node: Any, path: Path, chain: tuple[Path, ...]) -> Any:
    if not isinstance(node, dict):
        return node
    own = {key: _resolved(value, path, chain) for key, value in node.items() if key != EXTENDS}
    if EXTENDS not in node:
        return own
    base = _extended(node[EXTENDS], path)
    if base.resolve() in chain:
        cycle = " -> ".join(str(p) for p in (*chain, base.resolve()))
        raise ConfigError(f"{path}: extends {node[EXTENDS]!r} makes a cycle: {cycle}")
    return merge(_resolved(_mapping(base), base, (*chain, base.resolve())), own)


def _extended(name: Any, path: Path) -> Path:
    """The file `extends: name` in `path` names: beside `path`, else among the shipped
    configs (so a user's file anywhere may extend configs/train_retriever.yaml by name)."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{path}: extends must name a YAML file, not {name!r}")
    for candidate in (path.parent / name, SHIPPED / name):
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"{path}: extends {name!r}: no such file beside it ({path.parent / name}) "
        f"nor among the shipped configs ({SHIPPED / name})"
    )


def load(cls: type[C], path: str | Path | None = None, overrides: Sequence[str] = ()) -> C:
    data = read_config(path) if path is not None else {}
    return validated(cls, merge(data, parse_overrides(overrides)))


def validated(cls: type[C], data: dict[str, Any]) -> C:
    """`data` as a `cls`, or ConfigError naming every problem (an unknown key with the
    closest known one)."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(cls, err) for err in exc.errors())
        raise ConfigError(f"invalid {cls.__name__}: {problems}") from exc


def _problem(cls: type[BaseModel], err: Any) -> str:
    key = ".".join(str(p) for p in err["loc"]) or "<root>"
    if err["type"] != "extra_forbidden":
        return f"{key}: {err['msg']}"
    return _unknown(key, dotted_keys(cls))


def _unknown(key: str, keys: list[str]) -> str:
    """`key: unknown key, did you mean <the closest of keys>?`"""
    parent = key.rpartition(".")[0]
    # A sibling first (model.hiden -> model.hidden), then any key (hidden -> model.hidden).
    siblings = [k for k in keys if k.rpartition(".")[0] == parent]
    match = difflib.get_close_matches(key, siblings, n=1, cutoff=0.6) or difflib.get_close_matches(
        key, keys, n=1, cutoff=0.6
    )
    if not match:  # the right name in the wrong section: hidden -> model.hidden
        match = [k for k in keys if k.rpartition(".")[2] == key.rpartition(".")[2]][:1]
    return f"{key}: unknown key" + (f", did you mean {match[0]}?" if match else "")


def check_keys(shipped: str, overrides: Sequence[str], path: str | Path | None = None) -> None:
    """ConfigError naming the closest key for an override or a `path` file key that the
    shipped `configs/<shipped>` does not have, as `load` would: but without the config
    class, so a job says it before importing its pipeline (torch, Ray: many seconds). Keys
    under a shipped leaf (a section that is null by default) and every other mistake are
    left to `load`; so is everything when the shipped file is not there (an installed
    package without the repository)."""
    try:
        tree = read_config(SHIPPED / shipped)
        given = read_config(path) if path is not None else {}
    except ConfigError:
        return
    given = renamed(merge(given, parse_overrides(overrides)), RENAMED.get(shipped, {}), say=False)
    keys: list[str] = []

    def all_keys(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            keys.append(f"{prefix}{key}")
            if isinstance(value, dict):
                all_keys(value, f"{prefix}{key}.")

    def unknown(node: dict[str, Any], known: dict[str, Any], prefix: str) -> list[str]:
        found = []
        for key, value in node.items():
            if key not in known:
                found.append(f"{prefix}{key}")
            elif isinstance(known[key], dict) and isinstance(value, dict):
                found += unknown(value, known[key], f"{prefix}{key}.")
        return found

    all_keys(tree, "")
    if problems := [_unknown(key, keys) for key in unknown(given, tree, "")]:
        raise ConfigError(
            f"invalid config: {'; '.join(problems)} (configs/{shipped} lists every key)"
        )


def dotted_keys(cls: type[BaseModel]) -> list[str]:
    """Every key a config class takes, sections and their keys, dotted (`model.hidden`)."""
    out: list[str] = []

    def walk(prefix: str, model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            key = f"{prefix}{name}"
            out.append(key)
            for sub in _models_in(field.annotation):
                walk(f"{key}.", sub)

    walk("", cls)
    return list(dict.fromkeys(out))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation names (`Section`, `Section | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def flatten(cfg: Config) -> dict[str, Any]:
    """Dotted keys to leaf values, for MLflow params."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        else:
            out[prefix] = value

    walk("", cfg.model_dump(mode="json"))
    return out


def to_yaml(cfg: Config) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
