#!/usr/bin/env bash
# ONNX Runtime 1.30 for the CPU-inference peer of `convoy bench` where Python's onnxruntime is
# not installed (Debian 12 has no python3-onnxruntime): npm's onnxruntime-node carries the CPU
# library (bin/napi-v6/linux/x64/libonnxruntime.so.1). --ignore-scripts: its postinstall step
# fetches optional GPU files from outside npm's registry and fails offline; the CPU library needs
# none of it. Installs into third_party/node/ (git-ignored); idempotent and quiet when present.
# usage: bash scripts/install-onnxruntime-node.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=1.30.0
dir="$root/third_party/node"
pkg="$dir/node_modules/onnxruntime-node/package.json"
if [[ -f "$pkg" ]] && grep -q "\"version\": \"$version\"" "$pkg"; then exit 0; fi
command -v npm >/dev/null || { echo "install-onnxruntime-node.sh: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
npm install --prefix "$dir" --ignore-scripts --no-save --no-audit --no-fund --loglevel=error \
  "onnxruntime-node@$version" >&2
test -f "$dir/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
echo "onnxruntime-node $version in $dir/node_modules" >&2
