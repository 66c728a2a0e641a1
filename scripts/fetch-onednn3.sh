#!/usr/bin/env bash
# Fetches Debian trixie's oneDNN 3.x (runtime libdnnl3.6 and headers libdnnl-dev) into a local
# prefix, to build Convoy against it beside Debian 12's 2.6 (issue 12):
#   bash scripts/fetch-onednn3.sh                       # -> third_party/onednn3
#   cmake -S . -B build-onednn3 -G Ninja -DCONVOY_CUDA=OFF -DCONVOY_ONEDNN_ROOT=$PWD/third_party/onednn3
# The debs are unpacked, not installed: nothing outside the prefix changes. The script then says
# which glibc and libstdc++ symbol versions the library needs against what this system has.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-third_party/onednn3}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

curl -fsSL "$mirror/dists/trixie/main/binary-amd64/Packages.xz" | xz -d > "$work/Packages"
mkdir -p "$prefix"
for pkg in libdnnl3.6 libdnnl-dev; do
  file=$(awk -v p="$pkg" '$1 == "Package:" { cur = $2 } cur == p && $1 == "Filename:" { print $2; exit }' "$work/Packages")
  if [ -z "$file" ]; then echo "fetch-onednn3: $pkg is not in trixie's package index" >&2; exit 1; fi
  echo "fetch-onednn3: $mirror/$file"
  curl -fsSL -o "$work/$pkg.deb" "$mirror/$file"
  dpkg-deb -x "$work/$pkg.deb" "$prefix"
done
lib=$(find "$prefix" -name 'libdnnl.so.3*' -type f | head -1)
grep -h "define DNNL_VERSION_M" "$prefix/usr/include/oneapi/dnnl/dnnl_version.h" || true
need() { objdump -T "$lib" | grep -o "$1[0-9.]*" | sort -Vu | tail -1; }
have() { strings "$2" | grep -o "^$1[0-9.]*$" | sort -Vu | tail -1; }
libc=$(ldconfig -p | awk '/libc.so.6 .*x86-64/ { print $NF; exit }')
libstdcxx=$(ldconfig -p | awk '/libstdc\+\+.so.6 .*x86-64/ { print $NF; exit }')
echo "fetch-onednn3: $lib needs $(need GLIBC_) (this system: $(have GLIBC_ "$libc")), $(need GLIBCXX_) (this system: $(have GLIBCXX_ "$libstdcxx"))"
