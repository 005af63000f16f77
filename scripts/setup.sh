#!/usr/bin/env bash
# Idempotent setup: Debian packages, .venv with pinned dependencies, offline NLP assets.
# A rerun with nothing changed takes a second or two (stamp files guard each step).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
say() { printf '\033[1m[setup +%ss]\033[0m %s\n' "$SECONDS" "$*"; }
# uv waits at most 300 s for a lock on its cache, which another clone's setup can hold for
# longer (downloading torch, building a package): wait as long as that takes.
export UV_LOCK_TIMEOUT=${UV_LOCK_TIMEOUT:-86400}

# 1. Debian packages ----------------------------------------------------------------
mapfile -t APT < <(grep -vE '^\s*(#|$)' requirements/apt.txt)
"$PY" -c 'import ensurepip' 2>/dev/null || APT+=(python3-venv)
"$PY" -c 'import os, sysconfig; assert os.path.isfile(sysconfig.get_paths()["include"] + "/Python.h")' \
    2>/dev/null || APT+=(python3-dev)
missing=()
for p in "${APT[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    if [ "$(id -u)" -eq 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "Missing Debian packages. Run this, then 'make setup' again:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# 2. Python environment ---------------------------------------------------------------
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }
stamp="$VENV/.conceptual-deps"
want=$(cat pyproject.toml requirements/assets.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    [ -x "$VENV/bin/uv" ] || "$VENV/bin/pip" install -q "uv>=0.5,<1"
    # torch==2.13.0 must be the CPU build: a local wheel directory when pip is configured
    # with one (as on these machines), otherwise PyTorch's CPU index. uv does not read
    # pip's configuration, so hand the location over explicitly.
    src=()
    links=$("$PY" -m pip config get global.find-links 2>/dev/null || true)
    for d in $links; do [ -d "$d" ] && src+=(--find-links "$d"); done
    if ! ls "${links:-/nonexistent}"/torch-2.13.0* >/dev/null 2>&1; then
        src+=(--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
    fi
    [ -f /etc/ssl/certs/ca-certificates.crt ] && export SSL_CERT_FILE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
    say "installing Python dependencies into $VENV"
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" "${src[@]}" -e ".[dev]"
    "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps --require-hashes -r requirements/assets.txt
    echo "$want" > "$stamp"
fi
# The harvest's compiled inner loop (setup.py: platform/conceptual/harvest/_links.c), built
# in place beside its source, as the editable install reads the source tree; again whenever
# the source changes. Without it the harvest judges images in Python, 2.5 times as long.
ext_stamp="$VENV/.conceptual-ext"
ext_want=$(cat setup.py platform/conceptual/harvest/*.c | sha256sum | cut -c1-16)
if [ "$(cat "$ext_stamp" 2>/dev/null)" != "$ext_want" ] || ! compgen -G "platform/conceptual/harvest/_links.*.so" >/dev/null; then
    say "building the harvest's compiled loop"
    "$VENV/bin/python" -c 'import setuptools' 2>/dev/null \
        || "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" "setuptools>=69"
    "$VENV/bin/python" setup.py -q build_ext --inplace >"$VENV/.conceptual-ext.log" 2>&1 \
        || { cat "$VENV/.conceptual-ext.log" >&2; exit 1; }
    echo "$ext_want" > "$ext_stamp"
fi
# spaCy's and thinc's wheels for Python < 3.12 are compiled with Cython's profiling hooks,
# and since Cython 3.1 each hook in a nogil function takes and releases the GIL on every
# call: millions of times a second in the parser's and entity recognizer's loops, a quarter
# of the curation's NLP time. The same releases are rebuilt from their sources with the
# hooks compiled out (the parses are the same), once per version for every clone of this
# user (scripts/native_wheels.sh: its folder, and a setup waiting for another's build).
# CONCEPTUAL_PYPI_WHEELS=1 keeps PyPI's wheels as they are, without the build.
native_stamp="$VENV/.conceptual-native"
native_want="$want${CONCEPTUAL_PYPI_WHEELS:+ pypi-wheels}"
if [ "$(cat "$native_stamp" 2>/dev/null)" != "$native_want" ]; then
    mapfile -t profiled < <("$VENV/bin/python" -m conceptual.assets profiled)
    if ((${#profiled[@]})) && [ -n "${CONCEPTUAL_PYPI_WHEELS:-}" ]; then
        say "keeping ${profiled[*]} as PyPI builds them, with Cython's profiling hooks (CONCEPTUAL_PYPI_WHEELS is set: the curation's NLP takes about a third longer)"
    elif ((${#profiled[@]})); then
        wheels=$(bash scripts/native_wheels.sh "$VENV" "${profiled[@]}") # set -e: a failed build stops here
        mapfile -t built <<<"$wheels"
        reinstall=()
        for requirement in "${profiled[@]}"; do reinstall+=(--reinstall-package "${requirement%%==*}"); done
        "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode --no-deps \
            "${reinstall[@]}" "${built[@]}"
    fi
    echo "$native_want" > "$native_stamp"
fi
# Bytecode for every installed module, written once here. Ray starts a fresh Python process
# for each actor and worker, and where PYTHONDONTWRITEBYTECODE is set (as on these machines)
# Python never caches what it compiles: each process then compiled spaCy, NLTK, torch and
# Ray Data from source again, 2 to 3 times their import time (uv writes no .pyc by default).
# A few files are for other Python versions; compileall reports and skips them.
bytecode_stamp="$VENV/.conceptual-bytecode"
if [ "$(cat "$bytecode_stamp" 2>/dev/null)" != "$want" ]; then
    say "compiling the installed modules to bytecode"
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$VENV/bin/python" -m compileall -qq -j 0 "$site" >/dev/null || true
    echo "$want" > "$bytecode_stamp"
fi

# 3. Offline NLP assets (WordNet for NLTK, spaCy pipeline, vocabulary) -----------------
# Verifying them imports spaCy and NLTK (about 10 s), so a rerun skips it while nothing it
# depends on changed and the WordNet copy is still in place.
home=${CONCEPTUAL_HOME:-$ROOT/.state}
assets_stamp="$VENV/.conceptual-assets"
assets_want=$( (echo "$home"; cat platform/conceptual/assets.py "$stamp") | sha256sum | cut -c1-16)
if [ "$(cat "$assets_stamp" 2>/dev/null)" != "$assets_want" ] || [ ! -f "$home/nltk_data/corpora/wordnet/lexnames" ]; then
    "$VENV/bin/python" -m conceptual.assets prepare
    echo "$assets_want" > "$assets_stamp"
fi
say "ready"
