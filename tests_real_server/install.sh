#!/usr/bin/env bash
# Create (or reuse) the virtualenv that runs the real SGLang 0.5.23 on the CPU
# for tests_real_server/, and print its python. The venv lives in the user's
# cache, keyed by the requirement file's hash, so a second run on the same
# machine (another clone, a later CI run) reuses it: the first install takes
# minutes and several GB; a reuse takes seconds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/requirements-sglang-cpu.txt"
version=0.5.23
key="$( (cat "$req"; echo "sglang==$version") | sha256sum | cut -c1-12)"
root="${SPECDECODE_SGLANG_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/pytest-specdecode}"
venv="$root/sglang-cpu-$version-$key"
python="${PYTHON:-python3}"

if [ ! -f "$venv/.complete" ]; then
    rm -rf "$venv"
    mkdir -p "$root"
    start=$(date +%s)
    echo "installing sglang==$version for the CPU into $venv (minutes, several GB)" >&2
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --no-input -r "$req" >&2
    "$venv/bin/python" -m pip install -q --no-input --no-deps "sglang==$version" >&2
    echo "installed in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)" >&2
    touch "$venv/.complete"
fi
# The stand-in kernel module is the project's own code: refreshed on every
# run (cheap), so an edit to it never needs a new venv.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
rm -rf "$site/sgl_kernel"
cp -r "$here/sgl_kernel_standin/sgl_kernel" "$site/sgl_kernel"
echo "$venv/bin/python"
