#!/usr/bin/env bash
# verify-codegen.sh checks that the generated code of the mapper.kcp.io API
# (see update-codegen.sh) is up to date. It copies the source tree to a
# temporary directory, runs update-codegen.sh there and compares the
# generated files with the ones in this tree. It never modifies this tree,
# and needs no git history. Exits non-zero, listing the differences, when
# generated code is out of date. Runs from any working directory.

set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

# What update-codegen.sh writes. Directories are compared recursively; since
# hand-written files are copied unchanged, only generated files can differ.
GENERATED_PATHS=(
    pkg/apis
    pkg/generated/openapi
    artifacts
    charts/cluster-mapper/crds
    hack/api-rules-violations.list
)

TMP_ROOT="$(mktemp -d "${TMPDIR:-/tmp}/verify-codegen.XXXXXX")"
cleanup() { rm -rf "${TMP_ROOT}"; }
trap cleanup EXIT

# Copy the source tree without VCS data and build output.
tar -C "${SCRIPT_ROOT}" \
    --exclude=./.git --exclude=./_output --exclude=./bin --exclude=./.demo \
    -cf - . | tar -C "${TMP_ROOT}" -xf -

# Reuse this tree's generator binaries (and build cache) rather than
# installing them again inside the copy.
export GOBIN="${GOBIN:-${SCRIPT_ROOT}/_output/bin}"

echo "Generating code into a copy of the tree at ${TMP_ROOT} ..."
if ! "${TMP_ROOT}/hack/update-codegen.sh"; then
    echo "verify-codegen: FAILED: update-codegen.sh failed on a copy of the tree (see above)." >&2
    exit 1
fi

ret=0
for p in "${GENERATED_PATHS[@]}"; do
    if [[ ! -e "${SCRIPT_ROOT}/${p}" && ! -e "${TMP_ROOT}/${p}" ]]; then
        continue
    fi
    if ! diff -Nru "${SCRIPT_ROOT}/${p}" "${TMP_ROOT}/${p}"; then
        ret=1
    fi
done

if [[ "${ret}" -ne 0 ]]; then
    echo >&2
    echo "verify-codegen: FAILED: generated code is out of date (diff above: current tree vs. freshly generated)." >&2
    echo "verify-codegen: run hack/update-codegen.sh and include the result." >&2
    exit 1
fi
echo "verify-codegen: generated code is up to date."
