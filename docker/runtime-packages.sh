#!/bin/sh
# Usage: runtime-packages.sh BINARY
# Prints, one a line, the Debian/Ubuntu packages that hold the shared libraries BINARY links
# directly (its DT_NEEDED entries); apt brings what those need in turn. The image builds use it so
# that one Dockerfile serves Debian 12 (libdnnl2, libyaml-cpp0.7, libpng16-16) and Ubuntu 24.04
# (libdnnl3, libyaml-cpp0.8, libpng16-16t64) without a list of names per release.
# A library that no package holds (the CUDA toolkit copied into a stand-in base) is named on stderr:
# the runtime base has to bring it. A library that does not resolve at all is an error.
set -eu
bin=$1
ldd_out=$(ldd "$bin")
pkgs=""
for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
  path=$(printf '%s\n' "$ldd_out" | awk -v l="$lib" '$1 == l && $2 == "=>" { print $3 }')
  case "$path" in
    /*) ;;
    *) echo "runtime-packages: $lib does not resolve (ldd says: ${path:-nothing})" >&2; exit 1 ;;
  esac
  # dpkg knows each file by the path its package ships; with merged /usr, ldd may report
  # /lib/... for a file shipped as /usr/lib/... (or the reverse), or a symlink's target.
  real=$(readlink -f "$path")
  pkg=""
  for p in "$path" "/usr$path" "${path#/usr}" "$real" "/usr$real" "${real#/usr}"; do
    pkg=$(dpkg-query -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) || true
    [ -n "$pkg" ] && break
  done
  if [ -n "$pkg" ]; then
    pkgs="$pkgs $pkg"
  else
    echo "runtime-packages: $lib ($path) belongs to no package; the runtime base must provide it" >&2
  fi
done
printf '%s\n' $pkgs | sort -u
