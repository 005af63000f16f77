#!/usr/bin/env bash
# Wheels of the given releases (spaCy and thinc: scripts/setup.sh says why) built from their
# sources without Cython's profiling hooks, into one folder that every clone of this user
# installs from:
#   scripts/native_wheels.sh VENV spacy==3.8.18 thinc==8.3.14   # prints the wheels' paths
# The folder is CONCEPTUAL_WHEELS (default ~/.cache/conceptual/wheels/no-cython-profile).
# A setup that finds another one building waits for it, says so, and has no time limit: a
# build takes about 4 minutes on 2 quiet cores, and far longer beside other builds.
set -euo pipefail
venv=$1
shift
wheels=${CONCEPTUAL_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/conceptual/wheels/no-cython-profile}
say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
python_tag=$("$venv/bin/python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')

# The wheel of `name==version` for this Python in the folder, if there is one.
wheel_of() {
    local name=${1%%==*} version=${1##*==}
    compgen -G "$wheels/${name//-/_}-$version-$python_tag-*.whl" | head -n 1 || true
}
all_built() {
    local requirement
    for requirement in "$@"; do [ -n "$(wheel_of "$requirement")" ] || return 1; done
}

mkdir -p "$wheels"
if ! all_built "$@"; then
    exec 9>"$wheels/.lock"
    if ! flock -n 9; then
        say "another setup is building ${*} into $wheels: waiting for it (no time limit)"
        flock 9
    fi
    if ! all_built "$@"; then # the setup we waited for may have built them
        say "building ${*} without Cython's profiling hooks: about 4 minutes on 2 quiet cores, once per version for every clone of this user (into $wheels)"
        building=$(mktemp -d "$wheels/.building.XXXXXX")
        trap 'rm -rf "$building"' EXIT
        names=$(printf '%s\n' "$@" | sed 's/==.*//' | paste -sd, -)
        CFLAGS="${CFLAGS:-} -DCYTHON_PROFILE=0" CXXFLAGS="${CXXFLAGS:-} -DCYTHON_PROFILE=0" \
            SPACY_NUM_BUILD_JOBS=$(nproc) "$venv/bin/pip" wheel -q --no-deps \
            --no-binary "$names" --wheel-dir "$building" "$@"
        mv "$building"/*.whl "$wheels"/ # whole files only: a reader never sees half a wheel
    fi
fi
for requirement in "$@"; do wheel_of "$requirement"; done
