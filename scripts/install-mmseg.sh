#!/usr/bin/env bash
# MMSegmentation for the mmseg plugin, into the *active* Python environment (a virtualenv or not).
#
# PyPI ships mmcv 2.1.0 (full, with compiled ops) only as source, so build it once (about 17
# minutes on 2 CPU cores); pip caches the wheel, and later runs take seconds. The build runs in a
# throw-away venv so the project's own setuptools stays as it is. That venv must compile against
# the active environment's torch: `--system-site-packages` would expose the *base* interpreter's
# packages (no torch inside a virtualenv), and mmcv then silently builds without its ops as a
# pure-Python `py2.py3-none-any` wheel. So the build venv gets a .pth file naming the active
# environment's site-packages instead, and the script fails unless `import mmcv._ext` works.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}

fail() { echo "install-mmseg.sh: $*" >&2; exit 1; }

"$python" -c "import torch" 2>/dev/null \
    || fail "torch is not importable from $($python -c 'import sys; print(sys.executable)'); run 'pip install -r requirements.txt' first"

if ! "$python" -c "import mmcv._ext" 2>/dev/null; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    "$python" -m venv "$work/build"
    build_py="$work/build/bin/python"
    # The active environment's site-packages (purelib and platlib), appended after the build
    # venv's own, so torch comes from the environment mmcv will be installed into.
    build_site=$("$build_py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    "$python" -c "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])" \
        > "$build_site/active-environment.pth"
    "$build_py" -c "import torch" || fail "the build venv cannot see the active environment's torch"
    "$build_py" -m pip install -q "setuptools<80" wheel ninja psutil
    MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS=2 "$build_py" -m pip wheel --no-build-isolation --no-deps \
        -w "$work/wheels" mmcv==2.1.0
    wheel=$(ls "$work"/wheels/mmcv-2.1.0-*.whl)
    case "$wheel" in
        *-none-any.whl) fail "mmcv was built without its compiled ops ($(basename "$wheel")): a cached pure-Python wheel? run 'pip cache remove mmcv' and try again" ;;
    esac
    "$python" -m pip install --no-deps --force-reinstall "$wheel"
fi
"$python" -m pip install -r requirements-mmseg.txt
"$python" -c "import mmcv._ext, mmseg" \
    || fail "mmcv's compiled ops (mmcv._ext) do not import after the install"
echo "install-mmseg.sh: mmcv $("$python" -c 'import mmcv; print(mmcv.__version__)') with compiled ops, mmsegmentation $("$python" -c 'import mmseg; print(mmseg.__version__)')"
