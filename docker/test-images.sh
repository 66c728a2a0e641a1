#!/usr/bin/env bash
# Builds Convoy's container images and smoke-tests them with rootful podman: no Docker engine, no
# registry, no GPU. CI runs it as root on a fresh Debian 12 machine (2 cores); it installs what it
# needs (idempotent) and keeps podman's storage in $WORK, outside the repository, so a second run
# reuses the base images and the build layers.
#
#   1. base: Debian 12 from debootstrap, set up like debian:12-slim    (stands in for debian:12-slim)
#   2. docker/Dockerfile.cpu on it, then in the image: --help, doctor, non-root, no data or runs
#      baked in, a short `train --resume` on a Fashion-MNIST subset (/usr/share/datasets mounted
#      read-only at /data, runs at /runs), `infer` on a PNG with the checkpoint it wrote, and a
#      SIGTERM that must stop training promptly (tini passes it on)
#   3. a CUDA stand-in (Debian 12 + a slim hard-linked copy of /usr/local/cuda) for
#      nvidia/cuda:*-cudnn-devel, docker/Dockerfile's builder stage on it (all CUDA code compiled,
#      one arch), then its runtime stage on the same stand-in and `convoy doctor` plus a short
#      train in it: no GPU here, so this is the CPU fallback of the CUDA build
#
# Usage: bash docker/test-images.sh        (from anywhere; exits non-zero on any failure)
# Knobs (environment): see the block below. SKIP_CPU=1 / SKIP_GPU=1 skip step 2 / 3, GPU_RUNTIME=0
# the runtime part of step 3.
set -euo pipefail

# ---- knobs ------------------------------------------------------------------------------------
WORK=${CONVOY_IMAGES_WORK:-/var/tmp/convoy-containers}  # podman storage, logs, test runs
JOBS=${JOBS:-2}                          # compile jobs inside the builds
CUDA_ARCHS=${CUDA_ARCHS:-90}             # one arch keeps nvcc time down
CUDA_HOST=${CUDA_HOST:-/usr/local/cuda}  # the toolkit the stand-in is made of
CUDA_VERSION=${CUDA_VERSION:-13.0}
DATASETS=${DATASETS:-/usr/share/datasets}  # mounted read-only at /data
TRAIN_CONFIG=${TRAIN_CONFIG:-configs/fashion_mnist.yaml}  # relative to /opt/convoy in the image
# CLI keys (engine/config/run_config.cpp). The container paths are fixed by the images; the CPU
# image's short training runs without PATH_ARGS, on the images' defaults (/usr/share/datasets ->
# /data, /opt/convoy/runs -> /runs), the other runs with them.
PATH_ARGS=(--set dataset.path=/data/fashion-mnist --set output.dir=/runs)
SHORT_TRAIN_ARGS=(--set "dataset.train_limit=${TRAIN_LIMIT:-2000}" --set "dataset.test_limit=${TEST_LIMIT:-1000}"
                  --set epochs=1)
RESUME_ARGS=(--resume)                   # as the Kubernetes Job runs it: fresh start when no checkpoint
CHECKPOINTS=(best.safetensors last.safetensors)  # what infer takes from /runs/<name>/, first found
SIGTERM_TEST=${SIGTERM_TEST:-1}
STOP_WITHIN=${STOP_WITHIN:-20}           # seconds convoy may take to stop after SIGTERM
SKIP_CPU=${SKIP_CPU:-0}
SKIP_GPU=${SKIP_GPU:-0}
GPU_RUNTIME=${GPU_RUNTIME:-1}
# What the slim CUDA context holds (relative to $CUDA_HOST); NCCL for data-parallel training.
CUDA_PARTS=(bin nvvm include targets lib64 lib/cmake lib/stubs
            'lib/libcudart.so*' lib/libcudart_static.a lib/libcudadevrt.a lib/libculibos.a
            'lib/libcublas.so*' 'lib/libcublasLt.so*' lib/libcudnn.so lib/libcudnn.so.9 'lib/libcudnn_graph.so*'
            'lib/libnccl.so*')

BASE_IMG=localhost/bookworm:base
CPU_IMG=localhost/convoy-cpu:ci
STANDIN_IMG=localhost/cuda-standin:${CUDA_VERSION}-cudnn-devel
GPU_BUILDER_IMG=localhost/convoy-trainer-builder:ci
GPU_IMG=localhost/convoy-trainer:ci

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONTEXT=${CONTEXT:-$REPO}  # the tree to build (a frozen copy of a tree others are editing, say)
LOGS=$WORK/logs
T0=$SECONDS
declare -a SUMMARY=() IMAGES=()  # IMAGES: those this run built or used, for the sizes
CURRENT=""

# ---- helpers ----------------------------------------------------------------------------------
say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# step NAME CMD...: runs CMD, records its time and result for the summary.
step() {
  local name=$1; shift
  CURRENT=$name
  say "$name"
  local t=$SECONDS
  "$@"
  SUMMARY+=("$(printf '%-44s %5ds  ok' "$name" $((SECONDS - t)))")
  CURRENT=""
}
size_mb() { podman image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'; }
on_exit() {
  local rc=$?
  [ -n "$CURRENT" ] && SUMMARY+=("$(printf '%-44s %5s  FAILED' "$CURRENT" "-")")
  echo
  echo "================ docker/test-images.sh summary ================"
  printf '%s\n' "${SUMMARY[@]}"
  if command -v podman >/dev/null && [ -n "${CONTAINERS_CONF:-}" ]; then
    for img in "${IMAGES[@]}"; do
      podman image exists "$img" 2>/dev/null && printf 'image %-44s %s\n' "$img" "$(size_mb "$img")"
    done
  fi
  printf 'total %ds, %s\n' $((SECONDS - T0)) "$([ $rc -eq 0 ] && echo PASSED || echo "FAILED (exit $rc; logs in $LOGS)")"
  local passed failed
  passed=$(printf '%s\n' "${SUMMARY[@]}" | grep -c ' ok$' || true)
  failed=$([ $rc -eq 0 ] && echo 0 || echo 1)
  printf 'images: %d passed, %d failed\n' "$passed" "$failed"
  exit $rc
}
trap on_exit EXIT
# build LOG ARGS...: podman build with its output in $LOGS/LOG.log (the tail shown on failure).
# With CCACHE_DIR set (.ci/run sets it for its test build), the builder stages compile through
# that cache, mounted, so the images recompile only what the test build did not.
build() {
  local log=$LOGS/$1.log; shift
  local cache=()
  [ -n "${CCACHE_DIR:-}" ] && mkdir -p "$CCACHE_DIR" && cache=(-v "$CCACHE_DIR:/var/cache/ccache" --build-arg CCACHE_DIR=/var/cache/ccache)
  if ! podman build --network host --layers -v "$WORK/apt-archives:/var/cache/apt/archives" "${cache[@]}" "$@" >"$log" 2>&1; then
    tail -n 40 "$log"; fail "podman build $* (log: $log)"
  fi
  grep -E '^runtime packages:|Convoy: CUDA|^ccache:' "$log" | sort -u || true
}
# ctr ARGS... IMAGE ARGS...: runs a container the way a user would, no network.
ctr() { podman run --rm --network none "$@"; }

# ---- 0. tools ---------------------------------------------------------------------------------
setup_tools() {
  [ "$(id -u)" -eq 0 ] || fail "run as root (rootful podman)"
  local pkgs=(podman runc debootstrap netavark aardvark-dns catatonit) missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
  done
  command -v python3 >/dev/null || missing+=(python3)   # writes the test PNG
  if [ "$SKIP_GPU" != 1 ] && [ ! -x "$CUDA_HOST/bin/nvcc" ]; then
    fail "no CUDA toolkit at $CUDA_HOST (the stand-in base is made of it): set CUDA_HOST, or SKIP_GPU=1"
  fi
  if [ "$DATASETS" = /usr/share/datasets ] && [ ! -d "$DATASETS/fashion-mnist" ]; then
    missing+=(dataset-fashion-mnist)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    # runc in the same command: podman would pull in crun, which fails on hybrid-cgroup VMs.
    apt-get install -y -q --no-install-recommends "${missing[@]}" >"$LOGS/apt-tools.log" 2>&1 \
      || { tail -n 20 "$LOGS/apt-tools.log"; fail "apt-get install ${missing[*]}"; }
  fi
  # runc, cgroupfs: crun 1.8 refuses cgroup v1 + v2 hybrids. The ulimits: podman otherwise asks
  # for more open files than the hard limit of such a VM allows (and nproc over 32768 fails).
  cat >"$WORK/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=16384:16384"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[network]
network_backend = "netavark"
CONF
  cat >"$WORK/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$WORK/storage"
runroot = "$WORK/run"
CONF
  podman --version
}

# ---- 1. Debian 12 base ------------------------------------------------------------------------
make_base() {
  IMAGES+=("$BASE_IMG")
  if podman image exists "$BASE_IMG"; then echo "$BASE_IMG exists"; return; fi
  local mirror rootfs=$WORK/rootfs
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)
  rm -rf "$rootfs"; mkdir -p "$WORK/debootstrap-cache"
  debootstrap --variant=minbase --cache-dir="$WORK/debootstrap-cache" bookworm "$rootfs" "$mirror" \
    >"$LOGS/debootstrap.log" 2>&1 || { tail -n 20 "$LOGS/debootstrap.log"; fail debootstrap; }
  rm -rf "${rootfs:?}"/var/cache/apt/archives/*.deb "${rootfs:?}"/var/lib/apt/lists/* "${rootfs:?}"/dev/* \
         "${rootfs:?}"/etc/apt/sources.list
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/"
  else
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" >"$rootfs/etc/apt/sources.list"
  fi
  # As in debian:12-slim: no docs, man pages or locales, and dpkg without fsync.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  echo force-unsafe-io >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
  tar --numeric-owner -C "$rootfs" -c . | podman import --quiet --change 'CMD ["/bin/bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$BASE_IMG" >/dev/null
  rm -rf "$rootfs"
}

# ---- 2. CPU image -----------------------------------------------------------------------------
build_cpu() {
  IMAGES+=("$CPU_IMG")
  build cpu-image --build-arg BASE="$BASE_IMG" --build-arg BUILD_JOBS="$JOBS" \
    -f "$CONTEXT/docker/Dockerfile.cpu" --ignorefile "$CONTEXT/docker/Dockerfile.cpu.dockerignore" \
    -t "$CPU_IMG" "$CONTEXT"
}

# A 28x28 grayscale PNG of the first Fashion-MNIST test image (label 9, ankle boot).
make_png() {
  python3 - "$DATASETS/fashion-mnist/t10k-images-idx3-ubyte.gz" "$1" <<'EOF'
import gzip, struct, sys, zlib
with gzip.open(sys.argv[1], 'rb') as f:
    magic, n, h, w = struct.unpack('>IIII', f.read(16))
    assert magic == 2051, magic
    pixels = f.read(h * w)
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
rows = b''.join(b'\0' + pixels[y * w:(y + 1) * w] for y in range(h))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 0, 0, 0, 0)) \
    + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b'')
open(sys.argv[2], 'wb').write(png)
EOF
}

# fresh_runs NAME IMAGE: an empty runs dir that the image's user can write.
fresh_runs() {
  local d=$WORK/runs/$1 user
  rm -rf "$d"; mkdir -p "$d"
  user=$(podman image inspect --format '{{.Config.User}}' "$2")
  chown "${user:-1000}" "$d"
  echo "$d"
}

# checkpoint DIR: the first of CHECKPOINTS found in DIR, as a path under /runs.
checkpoint() {
  local f
  for f in "${CHECKPOINTS[@]}"; do
    [ -f "$1/$f" ] && { echo "$f"; return; }
  done
  ls -lR "$1" >&2
  fail "no checkpoint (${CHECKPOINTS[*]}) in $1"
}

check_image_hygiene() {  # IMAGE: non-root, no data, runs or checkpoints baked in
  local img=$1 uid
  uid=$(ctr --entrypoint id "$img" -u)
  echo "runs as uid $uid"
  [ "$uid" != 0 ] || fail "$img runs as root"
  ctr --entrypoint sh "$img" -c '
    set -e
    [ ! -e /data/fashion-mnist ] || { echo "data baked in"; exit 1; }
    [ -z "$(ls -A /runs)" ] || { echo "/runs is not empty"; exit 1; }
    found=$(find / -xdev \( -name "*.safetensors" -o -name "*-ubyte*" -o -name CMakeCache.txt \) -print 2>/dev/null | head -n 5)
    [ -z "$found" ] || { echo "baked in: $found"; exit 1; }
    [ -x /usr/local/bin/convoy ] && [ -d /opt/convoy/configs ] && [ -d /opt/convoy/models ]
    echo "image holds convoy, configs/ ($(ls /opt/convoy/configs | wc -l) files), models/ ($(ls /opt/convoy/models | wc -l) files)"'
}

# doctor IMAGE: `convoy doctor` with the data mounted; it must find Fashion-MNIST at the default
# path (/usr/share/datasets -> /data in the image).
doctor() {
  local out
  out=$(ctr -v "$DATASETS:/data:ro" --entrypoint convoy "$1" doctor)
  echo "$out"
  if ! grep -q '^fashion-mnist: /usr/share/datasets/fashion-mnist' <<<"$out"; then
    fail "convoy doctor in $1 does not find the data mounted at /data"
  fi
}

test_cpu() {
  local runs png name=ci-cpu ckpt out
  check_image_hygiene "$CPU_IMG"
  ctr "$CPU_IMG" --help | head -n 20
  doctor "$CPU_IMG"
  echo "-- train with no data volume"
  missing_data "$CPU_IMG" train
  runs=$(fresh_runs cpu "$CPU_IMG")
  echo "-- train (short) in $CPU_IMG, on the image's default paths"
  ctr -v "$DATASETS:/data:ro" -v "$runs:/runs" "$CPU_IMG" train --config "$TRAIN_CONFIG" \
    "${SHORT_TRAIN_ARGS[@]}" --set name=$name "${RESUME_ARGS[@]}"
  ckpt=$(checkpoint "$runs/$name")
  echo "-- infer with /runs/$name/$ckpt"
  mkdir -p "$WORK/in"; png=$WORK/in/sample.png
  make_png "$png"; chmod 644 "$png"
  out=$(ctr -v "$runs:/runs:ro" -v "$WORK/in:/in:ro" "$CPU_IMG" infer --model "/runs/$name/$ckpt" /in/sample.png)
  echo "$out"
  [ -n "$out" ] || fail "infer printed nothing"
}

# missing_data IMAGE ENTRY...: training with no /data volume fails with exit 1 and says how to
# mount it (CONVOY_DATA_VOLUME in the image), instead of a crash or a bare "no such file".
missing_data() {
  local img=$1 out rc=0; shift
  out=$(ctr "$img" "$@" --config "$TRAIN_CONFIG" --set epochs=1 2>&1) || rc=$?
  echo "$out" | tail -n 2
  [ "$rc" = 1 ] || fail "training without the data volume exited $rc, expected 1"
  grep -qF 'docker run -v /usr/share/datasets:/data:ro' <<<"$out" \
    || fail "the missing-data error does not say how to mount the datasets"
}

# SIGTERM must reach convoy (tini is PID 1) and stop it well before the kill timeout.
test_sigterm() {
  local img=$1 runs cid t rc
  runs=$(fresh_runs sigterm "$img")
  cid=$(podman run -d --network none -v "$DATASETS:/data:ro" -v "$runs:/runs" "$img" \
        train --config "$TRAIN_CONFIG" "${PATH_ARGS[@]}" --set epochs=50 --set name=ci-sigterm)
  sleep 8
  [ "$(podman inspect --format '{{.State.Running}}' "$cid")" = true ] \
    || { podman logs "$cid" | tail -n 20; podman rm -f "$cid" >/dev/null; fail "training ended before SIGTERM"; }
  t=$SECONDS
  podman stop -t $((STOP_WITHIN + 10)) "$cid" >/dev/null
  rc=$(podman inspect --format '{{.State.ExitCode}}' "$cid")
  podman logs "$cid" 2>&1 | tail -n 5
  podman rm "$cid" >/dev/null
  echo "stopped in $((SECONDS - t)) s, exit code $rc; in /runs: $(cd "$runs" && find . -type f | head -n 5 | tr '\n' ' ')"
  [ "$rc" != 137 ] && [ $((SECONDS - t)) -le "$STOP_WITHIN" ] \
    || fail "convoy did not stop on SIGTERM within ${STOP_WITHIN}s (exit $rc): killed"
}

# ---- 3. GPU image on a CUDA stand-in ----------------------------------------------------------
make_standin() {
  IMAGES+=("$STANDIN_IMG")
  local ctx=$WORK/cuda-ctx
  rm -rf "$ctx"; mkdir -p "$ctx" "$WORK/empty"
  # Hard links: instant and no extra space; a copy where $WORK is on another file system.
  local how=-a
  ln "$(readlink -f "$CUDA_HOST/bin/nvcc")" "$ctx/.link-probe" 2>/dev/null && how=-al
  rm -f "$ctx/.link-probe"
  # shellcheck disable=SC2068  # the patterns are globbed here, inside the toolkit
  (cd "$CUDA_HOST" && cp $how --parents ${CUDA_PARTS[@]} "$ctx"/)
  build cuda-standin --build-arg BASE="$BASE_IMG" --build-arg CUDA_VERSION="$CUDA_VERSION" \
    --build-context cuda="$ctx" -f "$CONTEXT/docker/Dockerfile.cuda-standin" -t "$STANDIN_IMG" "$WORK/empty"
  rm -rf "$ctx"
}

build_gpu_builder() {
  # With GPU_RUNTIME=1 the whole image is built first, so that this reuses its builder layers
  # (one compile, from one state of the tree).
  if [ "$GPU_RUNTIME" = 1 ]; then build_gpu_image; fi
  IMAGES+=("$GPU_BUILDER_IMG")
  build gpu-builder --target builder \
    --build-arg CUDA_DEVEL_BASE="$STANDIN_IMG" --build-arg CUDA_RUNTIME_BASE="$STANDIN_IMG" \
    --build-arg CUDA_ARCHITECTURES="$CUDA_ARCHS" --build-arg BUILD_JOBS="$JOBS" \
    -f "$CONTEXT/docker/Dockerfile" --ignorefile "$CONTEXT/docker/Dockerfile.dockerignore" \
    -t "$GPU_BUILDER_IMG" "$CONTEXT"
  # The CUDA build really happened: .cu objects for the arch, device code in the binary, and the
  # binary linked to cudart, cuBLAS, cuDNN and NCCL.
  ctr --entrypoint sh "$GPU_BUILDER_IMG" -c '
    set -e
    cu=$(find build-image -name "*.cu.o" | wc -l)
    archs=$(sed -n "s/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p" build-image/CMakeCache.txt)
    echo "CUDA objects: $cu, CMAKE_CUDA_ARCHITECTURES=$archs"
    [ "$cu" -gt 0 ]
    objdump -h /opt/dist/usr/local/bin/convoy | grep -q nv_fatbin || { echo "no device code in convoy"; exit 1; }
    needed=$(objdump -p /opt/dist/usr/local/bin/convoy | awk "\$1 == \"NEEDED\" { print \$2 }" | tr "\n" " ")
    echo "convoy needs: $needed"
    for l in libcudart libcublas libcudnn libnccl; do case " $needed" in *" $l"*) ;; *) echo "not linked: $l"; exit 1 ;; esac; done'
}

build_gpu_image() {
  IMAGES+=("$GPU_IMG")
  build gpu-image \
    --build-arg CUDA_DEVEL_BASE="$STANDIN_IMG" --build-arg CUDA_RUNTIME_BASE="$STANDIN_IMG" \
    --build-arg CUDA_ARCHITECTURES="$CUDA_ARCHS" --build-arg BUILD_JOBS="$JOBS" \
    -f "$CONTEXT/docker/Dockerfile" --ignorefile "$CONTEXT/docker/Dockerfile.dockerignore" \
    -t "$GPU_IMG" "$CONTEXT"
}

test_gpu_runtime() {
  local runs out
  check_image_hygiene "$GPU_IMG"
  ctr "$GPU_IMG" --help | head -n 20          # = convoy train --help
  doctor "$GPU_IMG"
  echo "-- train with no data volume"
  missing_data "$GPU_IMG"
  runs=$(fresh_runs gpu "$GPU_IMG")
  echo "-- train (short) in $GPU_IMG with no GPU: the CPU fallback, announced in one line"
  out=$(ctr -v "$DATASETS:/data:ro" -v "$runs:/runs" "$GPU_IMG" --config "$TRAIN_CONFIG" \
    "${PATH_ARGS[@]}" "${SHORT_TRAIN_ARGS[@]}" --set name=ci-gpu "${RESUME_ARGS[@]}" 2>&1) \
    || { echo "$out" | tail -n 20; fail "training in $GPU_IMG failed"; }
  echo "$out" | tail -n 4
  [ "$(grep -c 'no usable GPU (.*); running on the CPU' <<<"$out")" = 1 ] \
    || fail "expected one line saying why training falls back to the CPU"
  checkpoint "$runs/ci-gpu" >/dev/null
}

# ---- run --------------------------------------------------------------------------------------
mkdir -p "$WORK" "$LOGS" "$WORK/apt-archives" "$WORK/runs"
export CONTAINERS_CONF=$WORK/containers.conf CONTAINERS_STORAGE_CONF=$WORK/storage.conf
step "install podman, runc, debootstrap, data" setup_tools
[ -f "$DATASETS/fashion-mnist/t10k-images-idx3-ubyte.gz" ] \
  || fail "Fashion-MNIST not at $DATASETS/fashion-mnist (apt-get install dataset-fashion-mnist)"
step "base: debootstrap Debian 12" make_base
if [ "$SKIP_CPU" != 1 ]; then
  step "cpu: build docker/Dockerfile.cpu" build_cpu
  step "cpu: help, doctor, train, infer" test_cpu
  if [ "$SIGTERM_TEST" = 1 ]; then step "cpu: SIGTERM stops training" test_sigterm "$CPU_IMG"; fi
fi
if [ "$SKIP_GPU" != 1 ]; then
  step "gpu: CUDA stand-in base" make_standin
  step "gpu: build docker/Dockerfile (nvcc sm_$CUDA_ARCHS)" build_gpu_builder
  if [ "$GPU_RUNTIME" = 1 ]; then step "gpu: help, doctor, train (CPU fallback)" test_gpu_runtime; fi
fi
# No `podman image prune`: the untagged stage images are the layer cache of the next run.
