#!/usr/bin/env bash
# Installs Convoy's dependencies from Debian's packages: what building and training need
# (scripts/train.sh), and with --test what the tests, fuzzing, load tests and benchmark peers need
# as well (scripts/test.sh). Idempotent: installs only what is missing, silent when all is there.
#   bash scripts/setup.sh [--test]
set -euo pipefail
case "${1:-}" in
  "" | --test) ;;
  *) echo "setup.sh: unknown argument '$1' (give --test, or nothing)" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev            # oneDNN: CPU convolution, pooling, batch norm, eltwise, inner product
  libyaml-cpp-dev        # model and run configs (with line numbers for errors)
  libturbojpeg0-dev      # JPEG decoding (libjpeg-turbo's SIMD decoder, DCT-scaled decodes)
  libjpeg62-turbo-dev    # libjpeg API of the same library: decodes only the crop window (jpeg_crop_scanline, jpeg_skip_scanlines)
  libpng-dev             # PNG decoding: two small codecs instead of OpenCV's ~200 packages
  nlohmann-json3-dev     # safetensors headers, bench JSON
  libcli11-dev           # the command line
  libboost-dev           # convoy serve: HTTP/REST on Boost.Beast over Asio (header-only)
  libgrpc++-dev protobuf-compiler-grpc   # convoy serve's KServe v2 gRPC endpoint (CONVOY_GRPC)
  zlib1g-dev             # gzip IDX files; convoy serve's gzip/deflate HTTP bodies
  dataset-fashion-mnist  # the real Fashion-MNIST
  libonnx-dev libprotobuf-dev  # convoy export/import: ONNX's protobuf definitions (onnx_pb.h, libonnx_proto) and protobuf
)
# The tests, fuzzing, load tests and benchmark peers.
test_packages=(
  curl                   # convoy serve's tests: an HTTP client no one here wrote
  python3-grpcio python3-grpc-tools      # convoy serve's tests: a gRPC client generated from the .proto
  wrk                    # convoy serve's load test (tests/serve, benchmarks/serve/load_test.sh)
  nghttp2-client         # h2load: benchmarks/serve/load_test.sh SERVE_PROTOCOL=grpc (a gRPC load that is not Python)
  libgtest-dev libgmock-dev libbenchmark-dev
  ccache                 # .ci/run: the images' builds reuse what the test build compiled (docker/test-images.sh)
  clang libfuzzer-14-dev # scripts/fuzz.sh: the libFuzzer targets (tests/fuzz/) need clang's libFuzzer
  python3-numpy python3-torch python3-matplotlib   # golden tests, peers, charts
  python3-torchvision    # the torchvision acceptance models (mobilenet_v2, the resnets) in the onnx and init-weights tests
  python3-pil            # scripts/datasets/*.py: the image-folder fixtures (JPEG/PNG through Pillow)
  python3-onnx           # the onnx tests: onnx.checker on exports, small ONNX files of each op
  # Node.js and npm for ONNX Runtime (the onnx tests, the bench peer) are installed by
  # scripts/install-onnxruntime-node.sh only where `npm` is missing: Debian's npm package
  # conflicts with a NodeSource nodejs that already brings npm.
)
[ "${1:-}" = --test ] && packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  [ -z "$p" ] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
