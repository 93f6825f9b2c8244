#!/usr/bin/env bash
# update-codegen.sh regenerates all generated code of the mapper.kcp.io API:
#
#   pkg/apis/mapper/zz_generated.deepcopy.go
#   pkg/apis/mapper/v1alpha1/zz_generated.{deepcopy,conversion,defaults,model_name}.go
#   pkg/generated/openapi/zz_generated.openapi.go
#   pkg/apis/control/v1alpha1/zz_generated.deepcopy.go
#   artifacts/crds/*.yaml  (the CRDs of control.mapper.kcp.io, by controller-gen)
#   charts/cluster-mapper/crds/*.yaml, and the kustomize manifests of artifacts/ rendered from
#   the charts (hack/render-artifacts)
#
# It uses k8s.io/code-generator's kube_codegen.sh at the version go.mod requires
# (from the module cache; downloaded through the module proxy when missing), the
# same way k8s.io/sample-apiserver does. The generator binaries are installed into
# _output/bin (override with GOBIN). Runs from any working directory; idempotent.
#
# API rule violations reported by openapi-gen are compared with
# hack/api-rules-violations.list (expected to stay empty: fix the types rather
# than listing them). To accept the current report instead, run with
# UPDATE_API_KNOWN_VIOLATIONS=true.

set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
THIS_PKG="github.com/cluster-mapper/cluster-mapper"
BOILERPLATE="${SCRIPT_ROOT}/hack/boilerplate.go.txt"
API_VIOLATIONS="${SCRIPT_ROOT}/hack/api-rules-violations.list"

# The generators resolve Go packages relative to the working directory.
cd "${SCRIPT_ROOT}"

export GO111MODULE=on
export GOBIN="${GOBIN:-${SCRIPT_ROOT}/_output/bin}"
mkdir -p "${GOBIN}"

CODEGEN_PKG="${CODEGEN_PKG:-}"
if [[ -z "${CODEGEN_PKG}" ]]; then
    CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
    if [[ -z "${CODEGEN_PKG}" ]]; then
        go mod download k8s.io/code-generator
        CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
    fi
fi
if [[ ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
    echo "update-codegen: cannot find kube_codegen.sh in '${CODEGEN_PKG}' (is k8s.io/code-generator required in go.mod?)" >&2
    exit 1
fi
echo "Using $(go list -m k8s.io/code-generator) from ${CODEGEN_PKG}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"

update_report=()
if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-}" == "true" ]]; then
    update_report=(--update-report)
fi

kube::codegen::gen_openapi \
    --output-dir "${SCRIPT_ROOT}/pkg/generated/openapi" \
    --output-pkg "${THIS_PKG}/pkg/generated/openapi" \
    --output-model-name-file zz_generated.model_name.go \
    --report-filename "${API_VIOLATIONS}" \
    ${update_report[@]+"${update_report[@]}"} \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"

# The CRDs of control.mapper.kcp.io (pkg/apis/control) from their Go types and
# +kubebuilder markers (validation, CEL rules, printer columns). The directory is
# emptied first so that a removed type removes its CRD.
CRD_DIR="${SCRIPT_ROOT}/artifacts/crds"
mkdir -p "${CRD_DIR}"
rm -f "${CRD_DIR}"/*.yaml
go run sigs.k8s.io/controller-tools/cmd/controller-gen \
    crd:crdVersions=v1 \
    paths=./pkg/apis/control/... \
    output:crd:artifacts:config="${CRD_DIR}"

# The charts are the source of the deployment manifests: artifacts/ (for kustomize) is rendered
# from them, and the chart gets a copy of the CRDs above.
go run ./hack/render-artifacts -root "${SCRIPT_ROOT}"
