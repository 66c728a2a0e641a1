#!/usr/bin/env bash
# Sets up, builds (in $CONVOY_BUILD_DIR, default build/), and trains the default config on the
# real Fashion-MNIST, printing the test accuracy. Extra arguments go to `convoy train`, e.g.
# --set epochs=2.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec "./${CONVOY_BUILD_DIR:-build}/convoy" train --config configs/fashion_mnist.yaml "$@"
