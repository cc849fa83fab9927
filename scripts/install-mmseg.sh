#!/usr/bin/env bash
# MMSegmentation for the mmseg plugin. PyPI ships mmcv 2.1.0 (full, with compiled ops) only as
# source, so build it once (about 17 minutes on 2 CPU cores); pip caches the wheel, and later
# runs of this script take seconds. The build runs in a throw-away venv that sees the installed
# torch, so the project's own setuptools stays as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python -c "import mmcv._ext" 2>/dev/null; then
    venv=$(mktemp -d)/mmcv-build
    python -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q "setuptools<80" wheel ninja psutil
    wheels=$(mktemp -d)
    MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS=2 "$venv/bin/pip" wheel --no-build-isolation --no-deps \
        -w "$wheels" mmcv==2.1.0
    pip install --no-deps "$wheels"/mmcv-2.1.0-*.whl
fi
pip install -r requirements-mmseg.txt
