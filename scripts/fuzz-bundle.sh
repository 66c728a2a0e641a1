#!/usr/bin/env bash
# Packs the libFuzzer targets for a long run on another machine: builds them as scripts/fuzz.sh
# does (clang, ASan + UBSan, $CONVOY_FUZZ_BUILD_DIR, default build-fuzz/), then writes OUT.tar.xz
# holding convoy-fuzz/ with
#   bin/<target>_fuzz        the targets
#   lib/                     every shared library they load except glibc's own (found by ldd), so
#                            a plain Debian 12 or CUDA base image runs them as they are
#   corpus/<target>/         the committed seeds
#   configs/, models/        what the run_config seeds name (CONVOY_FUZZ_CONFIG_DIR points there)
#   fuzz-long.sh             the runner: convoy-fuzz/fuzz-long.sh DIR SECONDS
#   MANIFEST                 commit, date, libraries and their packages
# Refuses to write a bundle of 40 MB or more.
#   bash scripts/fuzz-bundle.sh OUT.tar.xz        CONVOY_FUZZ_TARGETS="idx image" for a subset
# CONVOY_FUZZ_SANITIZERS=undefined (with a build directory of its own, CONVOY_FUZZ_BUILD_DIR)
# leaves ASan out: ~3x the inputs per second, for long runs beside the ASan ones.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT.tar.xz" >&2; exit 2; }
out=$(realpath -m "$1")
cd "$(dirname "$0")/.."
build=${CONVOY_FUZZ_BUILD_DIR:-build-fuzz}
targets=${CONVOY_FUZZ_TARGETS:-safetensors idx image csv_manifest run_config model infer_request classify grpc_infer}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCONVOY_CUDA=OFF -DCONVOY_TESTS=OFF \
  -DCONVOY_FUZZ=ON -DCONVOY_FUZZ_SANITIZERS="${CONVOY_FUZZ_SANITIZERS:-address,undefined}" \
  -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target convoy_fuzz

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/convoy-fuzz
mkdir -p "$root/bin" "$root/lib" "$root/corpus"
for t in $targets; do
  [ -x "$build/tests/fuzz/${t}_fuzz" ] || { echo "fuzz-bundle: $t not built here; left out"; targets=${targets/$t/}; continue; }
  cp "$build/tests/fuzz/${t}_fuzz" "$root/bin/"
  cp -r "tests/fuzz/corpus/$t" "$root/corpus/"
done
cp -r configs models "$root/"
cp scripts/fuzz-long.sh "$root/"
cp tests/fuzz/README.md "$root/README-fuzzing.md"

# glibc's libraries and the loader are the image's own (a second libc would not mix with it);
# everything else the targets load travels with them.
is_glibc() {
  case "$(basename "$1")" in
    ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*) return 0 ;;
  esac
  return 1
}
libs=$(for t in $targets; do ldd "$root/bin/${t}_fuzz"; done | awk '/=> \// {print $3}' | sort -u)
{
  echo "convoy fuzz bundle: commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with local changes)'), $(date -u +%FT%TZ), $(uname -m), sanitizers ${CONVOY_FUZZ_SANITIZERS:-address,undefined}"
  echo "targets: $targets"
  echo "libraries (lib/, from the packages named):"
} >"$root/MANIFEST"
for lib in $libs; do
  is_glibc "$lib" && continue
  cp -L "$lib" "$root/lib/"
  real=$(realpath "$lib")
  # dpkg knows a file by the path its package installed (/lib or /usr/lib since usrmerge).
  pkg=$( (dpkg -S "$lib" || dpkg -S "$real" || dpkg -S "${real#/usr}") 2>/dev/null | head -1 | cut -d: -f1 || true)
  echo "  $(basename "$lib")  ${pkg:-?}" >>"$root/MANIFEST"
done
# glibc stays the image's: say which it must be at least.
need=$(for f in "$root"/bin/* "$root"/lib/*; do objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'; done | sort -uV | tail -1)
echo "needs glibc >= ${need#GLIBC_} on the machine that runs it (Debian 12: 2.36; Ubuntu 22.04 has 2.35, too old)" >>"$root/MANIFEST"
# Debug sections are not needed to fuzz (the targets keep their symbols for the stack traces).
strip --strip-debug "$root"/lib/* 2>/dev/null || true

tar -C "$stage" -cf - convoy-fuzz | xz -T0 -6 >"$out"
size=$(stat -c %s "$out")
echo "fuzz-bundle: $out, $((size / 1024 / 1024)) MB ($size bytes): $(ls "$root/bin" | wc -l) targets, $(ls "$root/lib" | wc -l) libraries"
if [ "$size" -ge $((40 * 1024 * 1024)) ]; then
  echo "fuzz-bundle: $out is 40 MB or more" >&2
  exit 1
fi
