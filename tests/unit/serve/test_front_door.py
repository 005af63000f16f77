"""Where the front door forwards: to Serve's proxy as the Serve config it is given
(`serve_config`, which `make serve` sets to the file it deploys) has it listen, unless an
upstream is given (issue 58: with http_options.port changed, the door answered 502)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conceptual.config import ConfigError
from conceptual.serve.front_door import configure, main, render, serve_upstream

REPO = Path(__file__).resolve().parents[3]


def serve_config(tmp_path: Path, http_options: dict | None) -> str:
    """A copy of serve/config.yaml with these http_options (None: none at all)."""
    config = yaml.safe_load((REPO / "serve" / "config.yaml").read_text())
    config.pop("http_options")
    if http_options is not None:
        config["http_options"] = http_options
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_the_shipped_config_gives_serves_default_port():
    assert serve_upstream(REPO / "serve" / "config.yaml") == "127.0.0.1:8000"


def test_the_door_forwards_to_the_port_and_host_the_serve_config_gives(tmp_path):
    path = serve_config(tmp_path, {"host": "127.0.0.1", "port": 8123})
    config = configure([f"serve_config={path}", "listen=127.0.0.1:9080"])
    assert config.upstream == "127.0.0.1:8123"
    assert "server 127.0.0.1:8123;" in render(config, tmp_path / "prefix")


@pytest.mark.parametrize(
    ("http_options", "upstream"),
    [
        (None, "127.0.0.1:8000"),  # Serve's own defaults
        ({"port": 8123}, "127.0.0.1:8123"),
        ({"host": "0.0.0.0", "port": 8123}, "127.0.0.1:8123"),  # every interface: loopback
        ({"host": "::", "port": 8123}, "[::1]:8123"),
        ({"host": "::1"}, "[::1]:8000"),  # nginx writes IPv6 in brackets
        ({"host": "10.0.0.7", "port": 8123}, "10.0.0.7:8123"),
    ],
)
def test_serves_defaults_fill_what_the_config_leaves_out(tmp_path, http_options, upstream):
    assert serve_upstream(serve_config(tmp_path, http_options)) == upstream


@pytest.mark.parametrize("order", ["upstream first", "upstream last"])
def test_an_upstream_given_wins_over_the_serve_config(tmp_path, order):
    overrides = [f"serve_config={serve_config(tmp_path, {'port': 8123})}"]
    given = "serve-elsewhere:9000"
    overrides.insert(0 if order == "upstream first" else 1, f"upstream={given}")
    assert configure(overrides).upstream == given


def test_without_a_serve_config_the_door_keeps_its_default():
    assert configure([]).upstream == "127.0.0.1:8000"


def test_a_serve_config_that_cannot_be_read_is_refused_before_nginx_starts(tmp_path, capsys):
    with pytest.raises(ConfigError, match="cannot read the Serve config"):
        configure([f"serve_config={tmp_path / 'missing.yaml'}"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("http_options: [port: 1\n")
    assert main([f"serve_config={broken}"]) == 2
    assert "is not valid YAML" in capsys.readouterr().err
