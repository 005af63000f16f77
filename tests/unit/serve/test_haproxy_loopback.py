"""scripts/haproxy-loopback, the HAProxy that `make serve LOW_LATENCY=1` gives Ray: the lines of
Ray's config template that open HAProxy's stats and metrics on every interface, and its admin
socket to every user, are rewritten before the real binary starts (an outside review reached
both from the machine's LAN address and disabled servers through the socket as `nobody`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ray.serve._private.haproxy_templates import HAPROXY_CONFIG_TEMPLATE

REPO = Path(__file__).resolve().parents[3]
WRAPPER = REPO / "scripts" / "haproxy-loopback"

# The lines as Ray's template writes them, and one of each kind that must stay as it is.
CONFIG = """global
    stats socket /run/x/admin.sock mode 666 level admin expose-fd listeners
frontend prometheus
    bind :9101
frontend http_frontend
    bind 127.0.0.1:8000
frontend grpc_frontend
    bind 0.0.0.0:9000 proto h2
listen stats
  bind *:8404
  stats enable
"""


def test_the_template_still_opens_what_the_wrapper_closes():
    """A Ray upgrade that changes these lines must change the wrapper too."""
    for line in ("bind :{{ config.metrics_port }}", "bind *:{{ config.stats_port }}",
                 "stats socket {{ config.socket_path }} mode 666"):  # fmt: skip
        assert line in HAPROXY_CONFIG_TEMPLATE, line


def test_stats_and_metrics_bind_loopback_and_the_socket_is_the_owners(tmp_path):
    config = tmp_path / "haproxy.cfg"
    config.write_text(CONFIG)
    fake = tmp_path / "haproxy"
    fake.write_text('#!/bin/sh\necho "started: $*"\n')
    fake.chmod(0o755)
    ran = subprocess.run(
        [str(WRAPPER), "-db", "-f", str(config), "-sf", "123"],
        capture_output=True,
        text=True,
        env={"HAPROXY": str(fake), "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"started: -db -f {config} -sf 123"  # the same arguments
    assert config.read_text() == CONFIG.replace("    bind :9101", "    bind 127.0.0.1:9101") \
        .replace("  bind *:8404", "  bind 127.0.0.1:8404") \
        .replace("mode 666", "mode 600")  # fmt: skip
