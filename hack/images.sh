#!/usr/bin/env bash
# Builds cluster-mapper's OCI images with a daemonless builder (buildah, or podman) from the
# Containerfile: one image per command of cmd/, each a static binary in an image FROM scratch.
#
#   hack/images.sh binaries  build the static binaries into $IMAGES_OUTPUT/bin (no builder needed)
#   hack/images.sh build     binaries, then the images, tagged <version> and latest (make images)
#   hack/images.sh save      build, then write $IMAGES_OUTPUT/<name>.tar (make images-save)
#   hack/images.sh list      print the image references build makes, one a line
#
# Environment:
#   IMAGE_REPO          repository prefix of the images (default cluster-mapper): cluster-mapper/mapper:<version>
#   IMAGE_BUILDER       buildah or podman (default: the first of them on PATH)
#   IMAGES              the commands to build (default: every directory of cmd/ but the kubectl
#                       plugins, kubectl-*, which run on a user's machine)
#   IMAGES_OUTPUT       where binaries and tarballs go (default _output/images)
#   IMAGES_SAVE_FORMAT  docker-archive (default; `docker load`, `podman load`, `kind load
#                       image-archive`) or oci-archive
#   IMAGE_SOURCE        the org.opencontainers.image.source label (default: the module's repository)
#
# The version (label org.opencontainers.image.version, the tag, and what `--version` prints) and
# the revision come from hack/version-ldflags.sh, computed once so that all three agree.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

IMAGE_REPO="${IMAGE_REPO:-cluster-mapper}"
IMAGES_OUTPUT="${IMAGES_OUTPUT:-_output/images}"
IMAGES_SAVE_FORMAT="${IMAGES_SAVE_FORMAT:-docker-archive}"
IMAGE_SOURCE="${IMAGE_SOURCE:-https://$(go list -m)}"
if [[ -z "${IMAGES:-}" ]]; then
  IMAGES="$(cd cmd && ls -d -- */ | tr -d / | grep -v '^kubectl-' | tr '\n' ' ')"
fi

version="$(bash hack/version-ldflags.sh --version)"
commit="$(bash hack/version-ldflags.sh --commit)"

builder() {
  if [[ -n "${IMAGE_BUILDER:-}" ]]; then
    echo "$IMAGE_BUILDER"
    return
  fi
  for b in buildah podman; do
    if command -v "$b" >/dev/null; then
      echo "$b"
      return
    fi
  done
  cat >&2 <<'MSG'
!! building images needs buildah or podman (daemonless, no registry pull: the images are FROM scratch).
   On Debian or Ubuntu:  apt-get install -y buildah     (or: apt-get install -y podman)
   On Fedora:            dnf install -y buildah
   `make build` builds the same commands as plain binaries into bin/ without either.
MSG
  exit 1
}

binaries() {
  local out="$IMAGES_OUTPUT/bin" ldflags
  mkdir -p "$out"
  ldflags="$(GIT_VERSION="$version" GIT_COMMIT="$commit" bash hack/version-ldflags.sh)"
  for name in $IMAGES; do
    echo ">> go build ./cmd/$name (static, $version) -> $out/$name"
    # CGO_ENABLED=0: a static binary for an image with no libc; -s -w: no symbol table or DWARF
    # (panics still print stack traces); -trimpath: no build paths in the binary.
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags -s -w" -o "$out/$name" "./cmd/$name"
  done
}

build() {
  local b created
  b="$(builder)"
  binaries
  created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for name in $IMAGES; do
    echo ">> $b build --target $name -t $IMAGE_REPO/$name:$version"
    local cmd=("$b")
    if [[ "$b" == buildah ]]; then cmd+=(bud); else cmd+=(build); fi
    "${cmd[@]}" --quiet -f Containerfile --target "$name" \
      --build-arg VERSION="$version" --build-arg REVISION="$commit" \
      --build-arg SOURCE="$IMAGE_SOURCE" --build-arg CREATED="$created" \
      -t "$IMAGE_REPO/$name:$version" -t "$IMAGE_REPO/$name:latest" \
      "$IMAGES_OUTPUT/bin" >/dev/null
  done
}

save() {
  local b
  build
  b="$(builder)"
  for name in $IMAGES; do
    local ref="$IMAGE_REPO/$name:$version" tar="$IMAGES_OUTPUT/$name.tar"
    rm -f "$tar"
    echo ">> $tar ($IMAGES_SAVE_FORMAT, $ref)"
    if [[ "$b" == buildah ]]; then
      buildah push --quiet "$ref" "$IMAGES_SAVE_FORMAT:$tar:$ref"
    else
      podman save --quiet --format "$IMAGES_SAVE_FORMAT" -o "$tar" "$ref"
    fi
  done
}

list() {
  for name in $IMAGES; do echo "$IMAGE_REPO/$name:$version"; done
}

case "${1:-}" in
  binaries) binaries ;;
  build) build ;;
  save) save ;;
  list) list ;;
  *) echo "usage: $0 binaries|build|save|list" >&2; exit 2 ;;
esac
