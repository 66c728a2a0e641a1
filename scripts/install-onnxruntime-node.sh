#!/usr/bin/env bash
# Installs ONNX Runtime for Node.js (npm's onnxruntime-node) into third_party/node/ (git-ignored):
# the ONNX export tests run the exported models in it, and `convoy bench` uses it as the CPU
# inference peer where Python has no onnxruntime (Debian 12 has no python3-onnxruntime). --ignore-scripts skips the package's
# install script, which would download CUDA libraries; the CPU library ships inside the package
# (bin/napi-v6/linux/x64/libonnxruntime.so.1), so nothing else is fetched. Idempotent and quiet
# when it is there. Needs node and npm (Debian's `nodejs` and `npm`; installed here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.30.0
dir=third_party/node
if [ -f "$dir/node_modules/onnxruntime-node/package.json" ] &&
   grep -q "\"version\": \"$version\"" "$dir/node_modules/onnxruntime-node/package.json"; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "onnxruntime-node: installing Debian's nodejs and npm" >&2
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
mkdir -p "$dir"
echo "onnxruntime-node: npm install onnxruntime-node@$version into $dir" >&2
npm install --prefix "$dir" --ignore-scripts --no-save --no-audit --no-fund --loglevel=error "onnxruntime-node@$version" >&2
test -f "$dir/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1"
node -e "require('./$dir/node_modules/onnxruntime-node')" # the CPU library loads
