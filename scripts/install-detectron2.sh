#!/usr/bin/env bash
# detectron2 for the detectron2 plugin, in its OWN virtualenv (default .venv-detectron2 at the
# repository root; SEGTK_DETECTRON2_VENV=DIR for another place).
#
# Why a separate environment: detectron2 needs torchvision, and the only torchvision wheels here
# (0.29.1) need torch 2.14.1 (a CUDA build that runs on the CPU); segtk's own environment pins
# the torch 2.13.0 CPU build, which cannot load them. detectron2 has no PyPI release, so it is
# built from the source tarball in ../shared/src (SEGTK_DETECTRON2_SRC=FILE for another one);
# nothing is fetched from GitHub. The compiled wheel is kept in a cache directory
# (SEGTK_DETECTRON2_WHEELS, default ~/.cache/segtk/detectron2-wheels) keyed by the tarball's hash
# and the torch version, so a fresh environment installs it in seconds (the first build takes
# a few minutes on 2 cores). segtk and the plugins the tests use are installed editable with
# --no-deps, so pip never replaces torch 2.14.1 by segtk's pinned 2.13.0.
#
# Idempotent: an environment where `import detectron2._C` works is only topped up. Fails (non-zero,
# one clear line) unless `import detectron2._C` works afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${SEGTK_DETECTRON2_VENV:-.venv-detectron2}
src=${SEGTK_DETECTRON2_SRC:-../shared/src/detectron2-02b5c4e2.tar.gz}
cache=${SEGTK_DETECTRON2_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/segtk/detectron2-wheels}
base_python=${PYTHON:-python3}
mkdir -p "$(dirname "$venv")"
venv=$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")  # absolute: the build runs elsewhere
py="$venv/bin/python"
TORCH=2.14.1
TORCHVISION=0.29.1

fail() { echo "install-detectron2.sh: $*" >&2; exit 1; }
say() { echo "install-detectron2.sh: $*"; }

if [ ! -x "$py" ]; then
    say "creating $venv"
    "$base_python" -m venv "$venv" || fail "could not create the virtualenv $venv with $base_python"
fi
"$py" -c "import sys; assert sys.version_info[:2] == (3, 11)" \
    || fail "$venv must run Python 3.11 (the torch $TORCH/torchvision $TORCHVISION wheels on this disk are cp311); set PYTHON=python3.11"

if ! "$py" -c "import torch, torchvision.ops; assert torch.__version__.split('+')[0] == '$TORCH'" 2>/dev/null; then
    say "installing torch==$TORCH torchvision==$TORCHVISION into $venv (several GB, from the local wheel mirror)"
    "$py" -m pip install -q "torch==$TORCH" "torchvision==$TORCHVISION" \
        || fail "pip could not install torch==$TORCH torchvision==$TORCHVISION"
    "$py" -c "import torchvision.ops" || fail "torchvision does not load beside torch in $venv"
fi

if ! "$py" -c "import detectron2._C" 2>/dev/null; then
    [ -f "$src" ] || fail "detectron2 source $src not found (set SEGTK_DETECTRON2_SRC to the tarball)"
    key=$(sha256sum "$src" | cut -c1-16)-torch$TORCH
    wheels="$cache/$key"
    if ! ls "$wheels"/detectron2-*.whl >/dev/null 2>&1; then
        work=$(mktemp -d)
        trap 'rm -rf "$work"' EXIT
        tar -xzf "$src" -C "$work"
        top=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
        [ -f "$top/setup.py" ] || fail "$src has no setup.py in its top folder"
        "$py" -m pip install -q "setuptools<80" wheel ninja \
            || fail "pip could not install the build tools (setuptools, wheel, ninja)"
        say "building detectron2 from $src (C++ ops, CPU only; a few minutes on 2 cores)"
        mkdir -p "$wheels"
        # --no-build-isolation: the build must compile against this venv's torch.
        (cd "$top" && FORCE_CUDA=0 MAX_JOBS=${MAX_JOBS:-2} "$py" -m pip wheel --no-build-isolation \
            --no-deps -w "$work/wheels" .) || fail "building detectron2 from $src failed (see the compiler output above)"
        built=$(ls "$work"/wheels/detectron2-*.whl 2>/dev/null | head -n 1)
        case "$built" in
            "") fail "the detectron2 build produced no wheel" ;;
            *-none-any.whl) fail "detectron2 was built without its C++ ops ($(basename "$built"))" ;;
        esac
        cp "$built" "$wheels/"
    fi
    wheel=$(ls "$wheels"/detectron2-*.whl | head -n 1)
    say "installing $(basename "$wheel")"
    # detectron2's own dependencies (fvcore, iopath, yacs, omegaconf, ...) come with it; it does
    # not declare torch, so torch stays as it is.
    "$py" -m pip install -q --force-reinstall --no-deps "$wheel" \
        && "$py" -m pip install -q "$wheel" || fail "pip could not install $wheel"
fi

# segtk and the plugins the tests use, installed editable; their pyproject.toml files (entry
# points, packages) are fingerprinted so that a change re-installs them.
dists=(. plugins/models/detectron2 plugins/models/demo plugins/attacks/dla plugins/editors/color
       plugins/editors/size)
stamp="$venv/.segtk-pyprojects.sha256"
want=$(for d in "${dists[@]}"; do cat "$d/pyproject.toml"; done | sha256sum | cut -c1-64)

# Already complete for this checkout (segtk installed editable from here): nothing to top up.
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && "$py" - "$PWD" <<'PY' 2>/dev/null; then
import sys
from pathlib import Path
import cv2, detectron2._C, detectron2.model_zoo, pytest, transformers  # noqa: F401
import segtk, segtk_demo, segtk_detectron2, segtk_dla, segtk_editor_color, segtk_editor_size  # noqa: F401
assert Path(segtk.__file__).resolve().parent == Path(sys.argv[1]).resolve()
assert Path(segtk_detectron2.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve())
import detectron2, torch
print(f"install-detectron2.sh: {sys.prefix} is complete: detectron2 {detectron2.__version__} "
      f"with compiled ops, torch {torch.__version__}")
PY
    exit 0
fi

# segtk core, the detectron2 plugin and what the end-to-end tests use (an attack, an editor),
# without their declared torch pin; their pure-Python dependencies explicitly. transformers
# builds the tiny offline CLIP text encoder for the open-vocabulary test; setuptools<80 keeps the
# pkg_resources that detectron2.model_zoo imports.
"$py" -m pip install -q "setuptools<80" "pluggy>=1.3" "click>=8.1" "rich>=13" "safetensors>=0.4" jinja2==3.1.6 \
    "numpy>=1.24" "pillow>=10" scipy==1.17.1 "pytest>=8" "hypothesis>=6.100" \
    opencv-python-headless==5.0.0.93 transformers==4.57.6 \
    || fail "pip could not install segtk's pure-Python dependencies"
editables=()
for d in "${dists[@]}"; do editables+=(-e "$d"); done
"$py" -m pip install -q --no-deps "${editables[@]}" \
    || fail "pip could not install segtk and its plugins into $venv"
echo "$want" > "$stamp"

"$py" -c "import detectron2._C" \
    || fail "detectron2's compiled ops (detectron2._C) do not import in $venv"
"$py" -c "import detectron2.model_zoo" \
    || fail "detectron2.model_zoo does not import in $venv (pkg_resources needs setuptools<80)"
"$py" -c "import torch; assert torch.__version__.split('+')[0] == '$TORCH'" \
    || fail "something replaced torch $TORCH in $venv"
say "detectron2 $("$py" -c 'import detectron2; print(detectron2.__version__)') with compiled ops, torch $("$py" -c 'import torch; print(torch.__version__)') in $venv"
