#!/usr/bin/env bash
# Regenerates hookinbox's signed webhook test vectors with the providers' own
# SDKs, pinned in package-lock.json and requirements.txt + constraints.txt.
#
#   bash tests/vectors/generate/generate.sh [OUT_DIR]    (default: tests/vectors)
#
# Needs node >= 20.19 with npm, and python3 >= 3.11 with venv; reaches the npm
# registry and PyPI to install. Every vector is checked with its SDK's own
# verifier; if any check fails nothing is written and the exit code is 1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/..}"
mkdir -p "$out"
out="$(cd "$out" && pwd)" # resolved before the cd below, so a relative path means the caller's

cd "$here"
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ beside the committed scripts

# Exactly what the lock files name: npm ci refuses a package-lock.json that
# disagrees with package.json, and pip takes every version from constraints.txt.
npm ci --no-audit --no-fund --loglevel=error
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt

# Write to a scratch directory first, so a failed check leaves the vectors in
# OUT_DIR as they were instead of half regenerated.
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
node node/sdk.mjs "$stage"
.venv/bin/python python/sdk.py "$stage"
.venv/bin/python python/refs.py "$stage"

cp "$stage"/*.json "$out"/
echo "generate.sh: $(find "$stage" -name '*.json' | wc -l) vectors written to $out"
