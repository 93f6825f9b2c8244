#!/usr/bin/env bash
# Prints the -ldflags that stamp the build's version into k8s.io/component-base/version, which
# mapper-apiserver's /version (and `mapper-apiserver --version`) report. Used by `make build` and
# test/framework's BuildBinary, so both stamp the same version.
#
# gitVersion is `git describe` of the nearest v* tag, or v0.0.0-g<commit> without one (it must
# parse as a semantic version: k8s.io/apiserver parses it for its effective version).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  tree=clean
else
  tree=dirty
fi
if version="$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null)"; then
  :
else
  version="v0.0.0-g${commit:0:12}"
  [[ "$tree" == dirty ]] && version+="-dirty"
fi
date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

pkg=k8s.io/component-base/version
echo "-X ${pkg}.gitVersion=${version} -X ${pkg}.gitCommit=${commit} -X ${pkg}.gitTreeState=${tree} -X ${pkg}.buildDate=${date}"
