# cluster-mapper developer entry points. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# TEST_TIMEOUT bounds each test binary; the end-to-end tests start real control planes.
TEST_TIMEOUT ?= 60m
# TEST_FLAGS are extra `go test` flags, parsed by the shell: TEST_FLAGS="-v -run 'TestA|TestB'".
TEST_FLAGS ?=
# TEST_PACKAGES are the packages `make test` runs.
TEST_PACKAGES ?= ./...

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: testenv
testenv: ## Build etcd, kube-apiserver, kubectl and kube-controller-manager for the tests (once; cached, see hack/install-testenv.sh).
	@bash hack/install-testenv.sh

.PHONY: test
test: testenv ## Run the unit and end-to-end tests against the testenv binaries.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	echo ">> go test $(TEST_PACKAGES) (CLUSTER_MAPPER_TESTENV=$$testenv)"; \
	CLUSTER_MAPPER_TESTENV="$$testenv" $(GO) test -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(TEST_PACKAGES)

.PHONY: verify
verify: ## Check formatting (gofmt), go vet, and that generated code is up to date.
	@echo ">> gofmt"; \
	unformatted="$$(find . -name '*.go' -not -path './.git/*' -not -path './_output/*' -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$unformatted" ]; then echo "files need gofmt:"; echo "$$unformatted"; exit 1; fi
	@echo ">> go vet"; $(GO) vet ./...
	@if [ -f hack/verify-codegen.sh ]; then echo ">> hack/verify-codegen.sh"; bash hack/verify-codegen.sh; fi

.PHONY: codegen
codegen: ## Regenerate deepcopy, conversion, defaulting and OpenAPI code (hack/update-codegen.sh).
	@bash hack/update-codegen.sh

.PHONY: demo
demo: testenv ## Run every part locally on real servers (a source, a target per location, kube-controller-manager, mapper-apiserver, mapper-controller, mappers); binaries in bin/; Ctrl-C stops it.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	$(GO) build -o bin/demo ./hack/demo; \
	CLUSTER_MAPPER_TESTENV="$$testenv" exec bin/demo

.PHONY: build
build: ## Build the binaries of ./cmd/... into bin/, with the version from `git describe` (hack/version-ldflags.sh).
	$(GO) build -ldflags "$$(bash hack/version-ldflags.sh)" -o bin/ ./cmd/...

# Images (hack/images.sh): IMAGE_REPO, IMAGE_BUILDER, IMAGES, IMAGES_SAVE_FORMAT are read from the environment.
.PHONY: images
images: ## Build the OCI images of cmd/... (static binaries, FROM scratch) with buildah or podman; tags cluster-mapper/<name>:<version> and :latest.
	@bash hack/images.sh build

.PHONY: images-save
images-save: ## Build the images and write them to _output/images/<name>.tar (docker-archive; IMAGES_SAVE_FORMAT=oci-archive for OCI).
	@bash hack/images.sh save

# BENCH_FLAGS are extra flags of hack/bench (see `go run ./hack/bench -help`), e.g. BENCH_FLAGS="--fanout-duration=30s".
BENCH_FLAGS ?=

.PHONY: bench
bench: testenv ## Run the benchmark at the design scale (< 30 min on 2 cores); writes bench/RESULTS.md, bench/results.json, bench/profiles/.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	$(GO) build -o bin/bench ./hack/bench; \
	echo ">> bin/bench --preset=default --out=bench $(BENCH_FLAGS)"; \
	CLUSTER_MAPPER_TESTENV="$$testenv" BENCH_COMMAND="make bench$(if $(BENCH_FLAGS), BENCH_FLAGS='$(BENCH_FLAGS)')" \
		bin/bench --preset=default --out=bench $(BENCH_FLAGS)

.PHONY: bench-large
bench-large: testenv ## Run the benchmark's large preset (250k objects: start-up and memory only, ~10 min on 2 cores); writes bench/large/RESULTS.md.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	$(GO) build -o bin/bench ./hack/bench; \
	CLUSTER_MAPPER_TESTENV="$$testenv" BENCH_COMMAND="make bench-large$(if $(BENCH_FLAGS), BENCH_FLAGS='$(BENCH_FLAGS)')" \
		bin/bench --preset=large --out=bench/large $(BENCH_FLAGS)

.PHONY: bench-quick
bench-quick: testenv ## Run the benchmark's quick preset (about 5 min); writes _output/bench-quick/RESULTS.md.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	$(GO) build -o bin/bench ./hack/bench; \
	CLUSTER_MAPPER_TESTENV="$$testenv" BENCH_COMMAND="make bench-quick$(if $(BENCH_FLAGS), BENCH_FLAGS='$(BENCH_FLAGS)')" \
		bin/bench --preset=quick --out=_output/bench-quick $(BENCH_FLAGS)
