// Package images checks the OCI images that `make images` builds (Containerfile,
// hack/images.sh) without running a container: containers cannot run where the tests run (the
// sandbox forbids setting rlimits), so the test reads what `make images-save` writes, checks each
// image's config (entrypoint, non-root user, OCI labels) and runs the binary taken out of the
// image's filesystem with --version and --help.
//
// The test needs buildah or podman; without either it is skipped, except in CI (CI=true), where
// .ci/run installs buildah and a missing builder fails the test, unless .ci/run could not
// install it and said why in CLUSTER_MAPPER_NO_IMAGE_BUILDER (the skip then gives that reason).
package images
