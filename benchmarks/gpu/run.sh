#!/usr/bin/env bash
# On the GPU machine: build Convoy with CUDA (Release, sm_90) and run the `cuda`-labelled
# tests. Logs go to OUTDIR; a short summary is printed last.
#   benchmarks/gpu/run.sh OUTDIR       (CONVOY_GPU_TESTS=0: configure only; CONVOY_NVJPEG=ON|OFF, default AUTO)
# Expects .deps.tar.xz in the repository root when oneDNN is not installed: Debian's packages
# unpacked by ../shared/gpu/fetch-debs.sh .deps libdnnl2 libdnnl-dev dataset-fashion-mnist
# libturbojpeg0 libturbojpeg0-dev libpng16-16 libpng-dev (not libjpeg62: the machine's own
# libjpeg headers would meet Debian's library and refuse it at run time).
set -uo pipefail
out=${1:?usage: benchmarks/gpu/run.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
root=$PWD
build=${CONVOY_GPU_BUILD_DIR:-build-gpu}
t0=$(date +%s)

say() { echo "[run.sh $(($(date +%s) - t0))s] $*"; }
fail() {
  say "FAILED: $1 (see $out/$2)"
  tail -n 40 "$out/$2"
  exit 1
}

{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -n 1
  cmake --version | head -n 1
  echo "cores: $(nproc)"
} > "$out/machine.txt"
say "$(head -n 2 "$out/machine.txt" | tr '\n' ' ')"

# oneDNN and the data set from Debian (the machine has neither).
if [ -f .deps.tar.xz ] && [ ! -d .deps/usr/lib ]; then
  tar -xJf .deps.tar.xz || fail "unpacking .deps.tar.xz" machine.txt
fi
export CMAKE_PREFIX_PATH=$root/.deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
# gRPC for convoy serve's gRPC endpoint, when carried (optional: without it serve speaks HTTP only):
# ../shared/gpu/fetch-debs.sh .grpc libgrpc++-dev libgrpc-dev libgrpc29 libgrpc++1.51 protobuf-compiler-grpc
# protobuf-compiler libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 libabsl-dev libabsl20220623
# libre2-dev libre2-9 libc-ares-dev libc-ares2 libssl-dev libssl3 zlib1g-dev zlib1g (static .a files removed).
grpc_link=()
if [ -f .grpc.tar.xz ] && [ ! -d .grpc/usr/lib ]; then tar -xJf .grpc.tar.xz || say "warning: unpacking .grpc.tar.xz failed"; fi
if [ -d .grpc/usr/lib ]; then
  export CMAKE_PREFIX_PATH=$root/.grpc/usr:$CMAKE_PREFIX_PATH PATH=$root/.grpc/usr/bin:$PATH
  export LD_LIBRARY_PATH=$root/.grpc/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # re2 comes through pkg-config as a bare -lre2 (its .pc names /usr): the linker must look here too.
  grpc_link=("-DCMAKE_EXE_LINKER_FLAGS=-L$root/.grpc/usr/lib/x86_64-linux-gnu")
fi
export LD_LIBRARY_PATH=$root/.deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVOY_FASHION_MNIST=$root/.deps/usr/share/datasets/fashion-mnist  # for the cuda training test

# Debian's oneDNN is built with its OpenCL GPU runtime: its CMake config wants OpenCL's
# header (only to read a version) and libdnnl.so needs libOpenCL.so.1 at link and run time.
extra=()
if [ ! -f /usr/include/CL/cl.h ] && [ ! -f /usr/local/cuda/include/CL/cl.h ]; then
  mkdir -p "$build/clstub/CL"
  printf '#pragma once\n#define CL_VERSION_1_0 1\n#define CL_VERSION_1_1 1\n#define CL_VERSION_1_2 1\n#define CL_VERSION_2_0 1\n' \
    > "$build/clstub/CL/cl.h"
  extra+=("-DOpenCL_INCLUDE_DIR=$root/$build/clstub")
fi
libcl=$(ldconfig -p 2>/dev/null | awk '/libOpenCL\.so/ {print $NF; exit}')
[ -z "$libcl" ] && libcl=$(find /usr/local/cuda*/ /usr/lib -name 'libOpenCL.so*' 2>/dev/null | head -n 1)
if [ -n "$libcl" ]; then
  extra+=("-DOpenCL_LIBRARY=$libcl")
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$libcl")
else
  say "warning: no libOpenCL.so found; oneDNN may fail to link"
fi

say "configure"
cmake -S . -B "$build" -G Ninja -DCONVOY_CUDA=ON -DCONVOY_NVJPEG="${CONVOY_NVJPEG:-AUTO}" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_STANDARD=17 -DCMAKE_BUILD_TYPE=Release "${extra[@]}" "${grpc_link[@]}" \
  > "$out/configure.log" 2>&1 || fail "configure" configure.log
if [ "${CONVOY_GPU_TESTS:-1}" = 0 ]; then  # configure only, for the scripts that build what they run
  say "configured; tests skipped (CONVOY_GPU_TESTS=0)"
  exit 0
fi

say "build convoy_cuda_tests with $(nproc) cores"
cmake --build "$build" -j "$(nproc)" --target convoy_cuda_tests convoy_nvjpeg_tests > "$out/build.log" 2>&1 ||
  fail "build" build.log
say "built"

say "ctest -L cuda"
export CONVOY_CUDA_VERBOSE=1  # notes on stderr, e.g. when cuDNN refuses a batch-norm dtype
(cd "$build" && ctest -L cuda --output-on-failure -j 8 --timeout 300 \
  --output-junit "$out/ctest-junit.xml") > "$out/ctest.log" 2>&1
rc=$?
runner=ctest
if grep -q "No tests were found" "$out/ctest.log"; then  # ctest prints "Errors while running" on any failure
  # ctest could not load the discovered test list: run the gtest binary itself instead.
  say "ctest could not list the tests (see ctest.log); running convoy_cuda_tests directly"
  (cd "$root" && "$build/tests/convoy_cuda_tests" --gtest_color=no) > "$out/gtest.log" 2>&1
  rc=$?
  runner=gtest
fi

{
  echo "== Convoy CUDA tests, $(head -n 1 "$out/machine.txt"), $(sed -n 2p "$out/machine.txt")"
  if [ "$runner" = ctest ]; then
    grep -E "tests passed|tests failed" "$out/ctest.log" | tail -n 1
    echo "skipped: $(grep -c "\*\*\*Skipped\|Not Run" "$out/ctest.log")"
    grep -E "\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout" "$out/ctest.log" | sed 's/^/  /' | head -n 40
  else
    echo "(ran by gtest: ctest failed to load the test list)"
    grep -E "^\[  PASSED  \]|^\[  SKIPPED \] [0-9]|^\[  FAILED  \]|suites? ran" "$out/gtest.log" | head -n 40
  fi
  grep -h "^convoy: " "$out/ctest.log" "$out/gtest.log" 2>/dev/null | sort -u | head -n 10
  echo "total time: $(($(date +%s) - t0)) s, exit code $rc"
} > "$out/summary.txt"
cat "$out/summary.txt"
exit $rc
