#!/usr/bin/env bash
# Checks deploy/k8s/*.yaml offline (no cluster): schema, unknown fields, the training Job's
# promises (validate.mjs), and that `kubectl kustomize` builds the kustomization. CI runs it.
# Needs node and npm; installs npm kubernetes-models + yaml (26 MB, versions pinned in
# package-lock.json) into /var/tmp/convoy-k8s-validate (or $K8S_VALIDATE_MODULES).
# kubectl is optional: without it the unknown-field and kustomize checks are skipped, and say so.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "validate.sh: needs node and npm" >&2; exit 1
fi
# Outside the repository, so nothing installed can be committed by mistake; reused while
# package-lock.json is unchanged.
modules=${K8S_VALIDATE_MODULES:-/var/tmp/convoy-k8s-validate}
mkdir -p "$modules"
if ! cmp -s package-lock.json "$modules/package-lock.json" \
   || [ ! -f "$modules/node_modules/kubernetes-models/package.json" ] \
   || [ ! -f "$modules/node_modules/yaml/package.json" ]; then
  cp package.json package-lock.json "$modules"/
  (cd "$modules" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

manifests=()
for f in *.yaml; do
  [ "$f" = kustomization.yaml ] || manifests+=("$f")
done

typed_args=()
bad=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if command -v kubectl >/dev/null; then
  # kubectl decodes a workload into its Go type and writes it back: unknown fields are dropped.
  # A change is needed for it to print anything, so it asks for a resource no manifest uses.
  for f in "${manifests[@]}"; do
    all=$(grep -cE '^kind:' "$f" || true)
    workloads=$(grep -cE '^kind: *(Job|CronJob|Deployment|StatefulSet|DaemonSet|Pod) *$' "$f" || true)
    if [ "$workloads" -gt 0 ] && [ "$workloads" -eq "$all" ]; then
      if ! kubectl set resources --local -f "$f" --requests=validate.convoy.invalid/round-trip=1 -o json \
           >"$tmp/$f.json" 2>"$tmp/err"; then
        echo "FAIL $f: kubectl cannot decode it: $(cat "$tmp/err")"; rm -f "$tmp/$f.json"; bad=1
      fi
    elif [ "$workloads" -gt 0 ]; then
      echo "FAIL $f: keep workloads in files of their own (for the typed round-trip)"; exit 1
    fi
  done
  typed_args=(--typed "$tmp")
  if kubectl kustomize . >"$tmp/kustomized.yaml" 2>"$tmp/err"; then
    echo "ok   kustomization.yaml: kubectl kustomize builds $(grep -c '^kind:' "$tmp/kustomized.yaml") objects"
  else
    echo "FAIL kustomization.yaml: $(cat "$tmp/err")"; bad=1
  fi
else
  echo "skip unknown-field and kustomize checks: no kubectl"
fi

# ESM resolves packages from the script's own folder: run a copy beside the modules.
cp validate.mjs "$modules"/
node "$modules/validate.mjs" "${typed_args[@]}" "${manifests[@]/#/$here/}" || bad=1
exit $bad
