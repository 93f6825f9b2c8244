# cluster-mapper developer entry points. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# TEST_TIMEOUT bounds each test binary; the end-to-end tests start real control planes.
TEST_TIMEOUT ?= 60m
# TEST_FLAGS are extra `go test` flags, parsed by the shell: TEST_FLAGS="-v -run 'TestA|TestB'".
TEST_FLAGS ?=
# TEST_PACKAGES are the packages `make test` runs: the end-to-end package (./test/e2e) without
# the race detector, with its full log in _output/test-e2e.log; every other one with -race.
TEST_PACKAGES ?= ./...

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: testenv
testenv: ## Build etcd, kube-apiserver, kubectl and kube-controller-manager for the tests (once; cached, see hack/install-testenv.sh).
	@bash hack/install-testenv.sh

.PHONY: test
test: testenv ## Run the unit tests with the race detector, then the end-to-end tests, against the testenv binaries; prints each package's time and the slowest end-to-end tests.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	e2e="$$($(GO) list ./test/e2e)"; pkgs="$$($(GO) list $(TEST_PACKAGES))"; \
	unit="$$(grep -vxF "$$e2e" <<<"$$pkgs" || true)"; status=0; \
	if [ -n "$$unit" ]; then \
		echo ">> go test -race (the unit packages; CLUSTER_MAPPER_TESTENV=$$testenv)"; \
		CLUSTER_MAPPER_TESTENV="$$testenv" $(GO) test -race -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $$unit || status=$$?; \
	fi; \
	if grep -qxF "$$e2e" <<<"$$pkgs"; then \
		mkdir -p _output; \
		echo ">> go test -v ./test/e2e (end-to-end; the whole log in _output/test-e2e.log)"; \
		CLUSTER_MAPPER_TESTENV="$$testenv" $(GO) test -v -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./test/e2e > _output/test-e2e.log 2>&1 || status=$$?; \
		grep -E '^(--- (PASS|FAIL|SKIP)|ok |FAIL|panic:)' _output/test-e2e.log || true; \
		if [ $$status -ne 0 ]; then echo ">> the end of _output/test-e2e.log"; tail -n 150 _output/test-e2e.log; fi; \
		echo ">> the slowest end-to-end tests (seconds)"; \
		sed -nE 's/^--- (PASS|FAIL): ([^ ]+) \(([0-9.]+)s\)$$/\3 \2/p' _output/test-e2e.log | sort -rn | head -n 10; \
	fi; \
	exit $$status

.PHONY: verify
verify: ## Check formatting (gofmt), go vet, that go.mod and go.sum are tidy, and that generated code is up to date.
	@echo ">> gofmt"; \
	unformatted="$$(find . -name '*.go' -not -path './.git/*' -not -path './_output/*' -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$unformatted" ]; then echo "files need gofmt:"; echo "$$unformatted"; exit 1; fi
	@echo ">> go vet"; $(GO) vet ./...
	@echo ">> go mod tidy -diff"; $(GO) mod tidy -diff
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
bench-quick: testenv ## Run the benchmark's quick preset as a test (TestQuickPreset, about 5 min on an idle machine: every scenario runs, every check passes); writes _output/bench-quick/RESULTS.md.
	@testenv="$$(bash hack/install-testenv.sh | tail -n 1)"; \
	CLUSTER_MAPPER_TESTENV="$$testenv" BENCH_OUT="$(CURDIR)/_output/bench-quick" BENCH_FLAGS='$(BENCH_FLAGS)' \
		BENCH_COMMAND="make bench-quick$(if $(BENCH_FLAGS), BENCH_FLAGS='$(BENCH_FLAGS)')" \
		$(GO) test -tags benchquick -run '^TestQuickPreset$$' -count=1 -timeout 30m -v ./test/bench
