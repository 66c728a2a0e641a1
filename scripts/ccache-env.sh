# Sourced, in the tree being built, where compiles should go through ccache: CI's test build
# (.ci/run) and the images' builder stages (docker/Dockerfile*, when docker/test-images.sh mounts
# the cache). One set of settings on both sides, so that the images hit what the test build
# compiled: BASEDIR the tree (paths in the hash become relative to it), the compiler checked by
# content (the same package in the host and the image), no working directory in the hash, and
# one locale (ccache hashes LANG and LC_*). CMake's first configure then puts ccache in front of
# the compilers. The caller sets CCACHE_DIR.
export CCACHE_BASEDIR=$PWD CCACHE_COMPILERCHECK=content CCACHE_NOHASHDIR=1 LANG=C.UTF-8
unset LC_ALL LC_CTYPE LC_MESSAGES
export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
