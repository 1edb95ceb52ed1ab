#!/usr/bin/env bash
# saberjax entry point: sets everything up (Python >= 3.12 venv, editable install), then runs.
#
#   bash tools/run.sh train [ARGS...]   # setup, then: python launch/train.py ARGS...
#   bash tools/run.sh test  [ARGS...]   # setup, then: python -m pytest -q ARGS... (in the repo)
#   bash tools/run.sh python [ARGS...]  # setup, then run the venv's python
#   bash tools/run.sh setup             # setup only
#
# train and python run in the caller's working directory, so that relative paths in ARGS
# (--corpus=texts, --output=runs/x) mean what they mean in the caller's shell; the tests run
# in the repository.
#
# Environment:
#   SABERJAX_PYTHON  interpreter used to create the venv (must be Python >= 3.12 with venv)
#   SABERJAX_VENV    venv location (default: <repo>/.venv)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SABERJAX_VENV:-$REPO/.venv}"
VPY="$VENV/bin/python"
STAMP="$VENV/.saberjax-install-stamp"
export PIP_DISABLE_PIP_VERSION_CHECK=1

say() { echo "saberjax: $*" >&2; }
die() { echo "saberjax: error: $*" >&2; exit 1; }

usage() {
  cat >&2 <<'EOF'
usage: bash tools/run.sh COMMAND [ARGS...]
  train [ARGS...]    set up, then train on the bundled corpus (python launch/train.py ARGS...)
  test  [ARGS...]    set up, then run the test suite (python -m pytest -q ARGS...)
  python [ARGS...]   set up, then run the venv's python
  setup              set up only (venv + editable install)
environment: SABERJAX_PYTHON=/path/to/python3.12  SABERJAX_VENV=/path/to/venv
EOF
}

# True if "$1" runs, is >= 3.12, and can create venvs with pip (ensurepip: Debian ships it
# separately in python3.X-venv). Failing shims (e.g. pyenv without PYENV_VERSION) are skipped.
py_ok() {
  "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1
}

# Describe why a candidate was rejected (for the error message).
py_why() {
  local v
  if v="$("$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)"; then
    if "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      echo "$v, but the venv/ensurepip module is missing"
    else
      echo "$v, too old"
    fi
  else
    echo "does not run"
  fi
}

find_python() {
  local tried=() c p
  if [[ -n "${SABERJAX_PYTHON:-}" ]]; then
    if py_ok "$SABERJAX_PYTHON"; then echo "$SABERJAX_PYTHON"; return 0; fi
    die "SABERJAX_PYTHON=$SABERJAX_PYTHON is not a usable Python >= 3.12 with venv ($(py_why "$SABERJAX_PYTHON"))"
  fi
  local cands=()
  for c in python3.14 python3.13 python3.12 python3 python; do
    if p="$(command -v "$c" 2>/dev/null)"; then cands+=("$p"); else tried+=("$c: not on PATH"); fi
  done
  local pyroot="${PYENV_ROOT:-$HOME/.pyenv}"
  local globbed=()
  shopt -s nullglob
  globbed=("$pyroot"/versions/*/bin/python)
  if ((${#globbed[@]})); then
    while IFS= read -r p; do cands+=("$p"); done < <(printf '%s\n' "${globbed[@]}" | { sort -rV 2>/dev/null || sort -r; })
  else
    tried+=("$pyroot/versions/*/bin/python: none")
  fi
  globbed=(/usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9])
  shopt -u nullglob
  ((${#globbed[@]})) || tried+=("/usr/local/bin/python3.1[2-9], /usr/bin/python3.1[2-9]: none")
  while IFS= read -r p; do [[ -n "$p" ]] && cands+=("$p"); done < <(printf '%s\n' "${globbed[@]+"${globbed[@]}"}" | { sort -rV 2>/dev/null || sort -r; })
  for p in "${cands[@]+"${cands[@]}"}"; do
    if py_ok "$p"; then echo "$p"; return 0; fi
    tried+=("$p: $(py_why "$p")")
  done
  {
    echo "saberjax: error: no Python >= 3.12 (with the venv module) was found."
    echo "  saberjax needs Python >= 3.12 because jax >= 0.11 requires it."
    echo "  Tried:"
    for p in "${tried[@]+"${tried[@]}"}"; do echo "    - $p"; done
    echo "  Install one, for example:"
    echo "    sudo apt-get install python3.12 python3.12-venv     # Debian/Ubuntu (deadsnakes PPA on older releases)"
    echo "    pyenv install 3.12                                  # pyenv"
    echo "    uv python install 3.12                              # uv"
    echo "  or point at an existing one:"
    echo "    SABERJAX_PYTHON=/path/to/python3.12 bash tools/run.sh $CMD"
  } >&2
  exit 1
}

# A suitable jax (>= 0.11.2) with a working CUDA backend is already importable in the venv.
have_cuda_jax() {
  "$VPY" - >/dev/null 2>&1 <<'EOF'
import sys
import jax
v = tuple(int("".join(ch for ch in x if ch.isdigit()) or 0) for x in jax.__version__.split(".")[:3])
sys.exit(0 if v >= (0, 11, 2) and jax.default_backend() == "gpu" else 1)
EOF
}

setup() {
  # 1. venv with a Python >= 3.12 (recreate if missing/broken/too old).
  if ! "$VPY" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
    if [[ -e "$VENV" ]]; then
      if [[ -f "$VENV/pyvenv.cfg" ]]; then
        say "venv $VENV is broken or older than Python 3.12; recreating it"
        rm -rf "$VENV"
      elif [[ -d "$VENV" && -z "$(ls -A "$VENV")" ]]; then
        rmdir "$VENV"
      else
        die "$VENV exists but is not a virtualenv; remove it or set SABERJAX_VENV elsewhere"
      fi
    fi
    local base
    base="$(find_python)"
    say "creating venv $VENV with $base ($("$base" -c 'import sys; print(sys.version.split()[0])'))"
    "$base" -m venv "$VENV" || die "'$base -m venv $VENV' failed"
  fi

  # 2. editable install; skipped when the stamp (pyproject + extras + repo path) is unchanged.
  local gpu=0 extras want have=""
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
  if ((gpu)); then extras="test,cuda"; else extras="test"; fi
  want="$("$VPY" - "$REPO/pyproject.toml" "$extras" "$REPO" <<'EOF'
import hashlib, sys
h = hashlib.sha256(open(sys.argv[1], "rb").read())
h.update(("\0" + sys.argv[2] + "\0" + sys.argv[3]).encode())
print(h.hexdigest())
EOF
)"
  [[ -f "$STAMP" ]] && have="$(cat "$STAMP")"
  if [[ "$have" == "$want" ]] && "$VPY" -I -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ("saberjax", "jax", "pytest")))' >/dev/null 2>&1; then
    return 0
  fi
  local spec="$REPO[$extras]"
  if ((gpu)) && have_cuda_jax; then
    say "NVIDIA GPU found and a CUDA-enabled jax is already installed; keeping it"
    spec="$REPO[test]"
  fi
  if [[ -z "$have" ]]; then
    say "installing saberjax (pip install -e \"$spec\") into $VENV; the first time downloads jax etc. (a minute or two)"
  else
    say "pyproject.toml, the extras or the install changed; updating (pip install -e \"$spec\")"
  fi
  rm -f "$STAMP"
  "$VPY" -m pip install -q -e "$spec" || die "pip install -e \"$spec\" failed (see errors above)"
  echo "$want" >"$STAMP"
}

CMD="${1:-}"
[[ $# -gt 0 ]] && shift
case "$CMD" in
  train)  setup; exec "$VPY" "$REPO/launch/train.py" "$@" ;;
  test)   setup; cd "$REPO"; exec "$VPY" -m pytest -q "$@" ;;
  python) setup; exec "$VPY" "$@" ;;
  setup)  setup; say "ready: $VPY ($("$VPY" -c 'import sys; print(sys.version.split()[0])'))" ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
