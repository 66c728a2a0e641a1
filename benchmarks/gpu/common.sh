# Sourced by the GPU machine's scripts that use the build run.sh made: makes $out (their
# OUTDIR) and absolute, moves to the repository root and sets build (the build dir), data
# (Fashion-MNIST from .deps) and the library path of the carried oneDNN.
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${CONVOY_GPU_BUILD_DIR:-build-gpu}
data=$PWD/.deps/usr/share/datasets/fashion-mnist
export LD_LIBRARY_PATH=$PWD/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Unpacked here too: a script that configures through run.sh builds before run.sh's path reaches it.
if [ -f .grpc.tar.xz ] && [ ! -d .grpc/usr/lib ]; then tar -xJf .grpc.tar.xz || echo "warning: unpacking .grpc.tar.xz failed"; fi
[ -d .grpc/usr/lib ] && export LD_LIBRARY_PATH=$PWD/.grpc/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH  # run.sh's gRPC
