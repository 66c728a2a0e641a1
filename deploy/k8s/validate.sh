#!/usr/bin/env bash
# Checks deploy/k8s/*.yaml offline (no cluster) with validate.py: schema (known fields, types,
# required fields, quantities), the kustomization's resources, the training Job's promises. CI runs it.
# validate.py --self-test first shows that it catches a list of broken copies of the manifests.
# Needs Debian 12's python3-kubernetes and python3-yaml: installed with apt-get where missing (as root).
# Where kubectl is installed, `kubectl kustomize` must also build the kustomization (else: skip).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3   # Debian's, which imports Debian's modules (a python3 earlier on PATH may not)

if ! "$py" -c 'import kubernetes, yaml' 2>/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(python3-kubernetes python3-yaml)
  # A fresh machine may have no package lists yet.
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; }
fi

bad=0
"$py" "$here/validate.py" --self-test || bad=1
"$py" "$here/validate.py" || bad=1
if command -v kubectl >/dev/null; then
  if out=$(kubectl kustomize "$here" 2>&1); then
    echo "ok   kustomization.yaml: kubectl kustomize builds $(grep -c '^kind:' <<<"$out") objects"
  else
    echo "FAIL kustomization.yaml: kubectl kustomize: $out"; bad=1
  fi
else
  echo "skip kustomization.yaml: kubectl kustomize (no kubectl)"
fi
exit $bad
