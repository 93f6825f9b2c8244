#!/usr/bin/env bash
# Prints the -ldflags that stamp the build's version into k8s.io/component-base/version, which
# every command's `--version` and mapper-apiserver's /version report. Used by `make build`,
# `make images` (hack/images.sh) and test/framework's BuildBinary, so all of them stamp the same
# version.
#
#   hack/version-ldflags.sh            the -ldflags
#   hack/version-ldflags.sh --version  the version alone (what images carry in their
#                                      org.opencontainers.image.version label)
#   hack/version-ldflags.sh --commit   the commit alone (org.opencontainers.image.revision)
#
# gitVersion is `git describe` of the nearest v* tag, or v0.0.0-g<commit> without one (it must
# parse as a semantic version: k8s.io/apiserver parses it for its effective version). The
# environment variables GIT_VERSION and GIT_COMMIT override what git says, so that one caller
# can stamp a binary and label its image with the same values.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

commit="${GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
if [[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  tree=clean
else
  tree=dirty
fi
if [[ -n "${GIT_VERSION:-}" ]]; then
  version="$GIT_VERSION"
elif version="$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null)"; then
  :
else
  version="v0.0.0-g${commit:0:12}"
  [[ "$tree" == dirty ]] && version+="-dirty"
fi

case "${1:-}" in
  --version) echo "$version"; exit 0 ;;
  --commit) echo "$commit"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--version|--commit]" >&2; exit 2 ;;
esac

date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
pkg=k8s.io/component-base/version
echo "-X ${pkg}.gitVersion=${version} -X ${pkg}.gitCommit=${commit} -X ${pkg}.gitTreeState=${tree} -X ${pkg}.buildDate=${date}"
