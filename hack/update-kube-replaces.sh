#!/usr/bin/env bash
# update-kube-replaces.sh writes into the go.mod of the current directory one replace directive
# per staging module of k8s.io/kubernetes (k8s.io/api, k8s.io/apimachinery, k8s.io/apiserver,
# ...), each pointing at its published v0.<minor>.<patch>.
#
# Why: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging/... in its own go.mod, which a dependent module does not inherit. A module that
# imports k8s.io/kubernetes (this repository: kube-apiserver's table printers, see
# docs/views.md; hack/install-testenv.sh's wrapper module) must replace each of them itself.
# The list of staging modules is read from k8s.io/kubernetes' own go.mod, so it follows the
# Kubernetes version.
#
# Usage: bash hack/update-kube-replaces.sh        (from the repository root, then `go mod tidy`)
# KUBE_VERSION selects the k8s.io/kubernetes version; by default the version the current go.mod
# requires, else v1.36.3. Idempotent. Exits non-zero when k8s.io/kubernetes' go.mod cannot be
# downloaded or lists no staging module.
set -euo pipefail

[ -f go.mod ] || { echo "!! no go.mod in $(pwd)" >&2; exit 1; }

if [ -z "${KUBE_VERSION:-}" ]; then
  # "k8s.io/kubernetes vX" inside a require block, or "require k8s.io/kubernetes vX".
  KUBE_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}
                      $1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}' go.mod)
  KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
fi
STAGING_VERSION="v0.${KUBE_VERSION#v1.}"

gomod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
[ -f "$gomod" ] || { echo "!! cannot download k8s.io/kubernetes@${KUBE_VERSION}" >&2; exit 1; }

mapfile -t staging < <(grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk '{print $1}')
[ "${#staging[@]}" -gt 0 ] || { echo "!! no staging modules in $gomod" >&2; exit 1; }

args=()
for m in "${staging[@]}"; do
  args+=("-replace=${m}=${m}@${STAGING_VERSION}")
done
go mod edit "${args[@]}"
