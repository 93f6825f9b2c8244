#!/usr/bin/env bash
# install-testenv.sh builds the real control-plane binaries the tests run against: etcd,
# kube-apiserver, kubectl and kube-controller-manager (the deployment controller on targets). Release downloads are not reachable here, so they are built from
# the Go module proxy inside throwaway wrapper modules (go install refuses modules whose go.mod
# carries replace directives; k8s.io/kubernetes replaces every k8s.io/<staging> module with
# ./staging/..., so the wrapper replaces each with its published v0.x.y instead).
#
# Output: the binaries in $CLUSTER_MAPPER_TESTENV (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/cluster-mapper/testenv/<version>/); the directory is printed
# on stdout as the last line. Idempotent: when all binaries are present it returns at once.
# On a failed build it prints the build log and exits non-zero.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
VERSION_DIR="kube-${KUBE_VERSION}_etcd-${ETCD_VERSION}"
DEST=${CLUSTER_MAPPER_TESTENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cluster-mapper/testenv/${VERSION_DIR}}

have_all() {
  [ -x "$DEST/etcd" ] && [ -x "$DEST/kube-apiserver" ] && [ -x "$DEST/kubectl" ] && [ -x "$DEST/kube-controller-manager" ]
}

if have_all; then
  echo "$DEST"
  exit 0
fi

mkdir -p "$DEST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOWORK=off

# Kubernetes binaries report their version (/version, `kubectl version`) from these variables,
# which the upstream build sets from git; without them they would claim v0.0.0-master.
KUBE_LDFLAGS=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  KUBE_LDFLAGS+=" -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
done

build() { # build <name> <wrapper-dir> <package> [extra ldflags]
  local name=$1 dir=$2 pkg=$3 ldflags="-s -w${4:-}" log="$work/$1.log"
  [ -x "$DEST/$name" ] && return 0
  echo ">> building $name from $pkg" >&2
  if ! (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$DEST/$name.tmp" "$pkg") >"$log" 2>&1; then
    echo "!! building $name failed; build log:" >&2
    cat "$log" >&2
    return 1
  fi
  mv "$DEST/$name.tmp" "$DEST/$name"
}

# etcd: the server module's main package, built against its own published dependencies.
mkdir -p "$work/etcd"
(
  cd "$work/etcd"
  cat > go.mod <<EOM
module testenv.local/etcd

go 1.26
EOM
  go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >"$work/etcd-get.log" 2>&1 || { cat "$work/etcd-get.log" >&2; exit 1; }
) || exit 1

# kube-apiserver and kubectl: k8s.io/kubernetes with every staging module replaced by its
# published version (hack/update-kube-replaces.sh, which also maintains this repository's go.mod).
mkdir -p "$work/kube"
hack_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
(
  cd "$work/kube"
  printf 'module testenv.local/kube\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n' "$KUBE_VERSION" > go.mod
  KUBE_VERSION="$KUBE_VERSION" bash "$hack_dir/update-kube-replaces.sh"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@${KUBE_VERSION}" "k8s.io/kubernetes/cmd/kubectl@${KUBE_VERSION}" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@${KUBE_VERSION}" >"$work/kube-get.log" 2>&1 || { cat "$work/kube-get.log" >&2; exit 1; }
) || exit 1

pids=()
build etcd "$work/etcd" go.etcd.io/etcd/server/v3 & pids+=($!)
build kube-apiserver "$work/kube" k8s.io/kubernetes/cmd/kube-apiserver "$KUBE_LDFLAGS" & pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
build kubectl "$work/kube" k8s.io/kubernetes/cmd/kubectl "$KUBE_LDFLAGS" || fail=1
build kube-controller-manager "$work/kube" k8s.io/kubernetes/cmd/kube-controller-manager "$KUBE_LDFLAGS" || fail=1
[ "$fail" = 0 ] || exit 1

have_all || { echo "!! binaries missing in $DEST after build" >&2; exit 1; }
echo "$DEST"
