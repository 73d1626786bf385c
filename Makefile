# pool-scheduler. `make help` lists the targets; `make demo` and `make test` are the two a
# newcomer needs (README). Settings and why they are what they are: hack/make/settings.mk.
.PHONY: help
help: ## Show this help.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

include hack/make/settings.mk

.PHONY: build
build: binaries poolctl ## Build bin/pool-scheduler, bin/pool-labeler and bin/poolctl.

# The shipped binaries, static and trimmed; the image runs this target (see Dockerfile).
.PHONY: binaries
binaries: ## Build only the shipped binaries (bin/pool-scheduler, bin/pool-labeler), as the image does.
	CGO_ENABLED=0 GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/pool-scheduler ./cmd/pool-labeler

# The upstream kube-scheduler command of the same Kubernetes version, built like the shipped
# binaries (the same flags, so it shares their build cache: only its main package and the link
# are new). The installed benchmark (test/installed) runs it beside bin/pool-scheduler.
.PHONY: kube-scheduler
kube-scheduler: ## Build the upstream kube-scheduler ($(KUBE_VERSION)) into bin/, for the installed benchmark.
	CGO_ENABLED=0 GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler

# poolctl is built like the tests are (DEV_GOFLAGS, default cgo, no -trimpath), so it shares
# their build cache.
.PHONY: poolctl
poolctl:
	GOFLAGS="$(DEV_GOFLAGS)" GOGC=$(BUILD_GOGC) $(GO) build $(BUILD_V) -ldflags '$(LDFLAGS)' -o $(BIN)/poolctl ./cmd/poolctl
	@# The kubectl plugin: `kubectl pool ...` runs kubectl-pool from PATH; poolctl reads its name from argv[0].
	ln -sf poolctl $(BIN)/kubectl-pool

# kubectl, for the plugin's end-to-end test, from go.mod's tool directive (the pinned Kubernetes).
.PHONY: kubectl
kubectl: $(BIN)/kubectl
$(BIN)/kubectl: $(GOMOD_FILES)
	GOFLAGS="$(DEV_GOFLAGS)" GOGC=$(BUILD_GOGC) $(GO) build -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl

# helm, the real CLI, for the README test (test/readme), from go.mod's tool directive (pinned).
.PHONY: helm
helm: $(BIN)/helm
$(BIN)/helm: $(GOMOD_FILES)
	GOFLAGS="$(DEV_GOFLAGS)" GOGC=$(BUILD_GOGC) $(GO) build -o $(BIN)/helm helm.sh/helm/v3/cmd/helm

.PHONY: demo
# hack/demo.sh builds bin/poolctl (make poolctl) and runs it, one line per stage with the time.
demo: ## Simulate the built-in scenarios: default scheduler vs pool-scheduler, side by side.
	hack/demo.sh

.PHONY: etcd
etcd: $(ETCD_BIN) ## Build etcd (for tests) from go.mod's tool directive (the default line's, for every LINE).
$(ETCD_BIN): go.mod go.sum
	GOFLAGS="$(DEFAULT_GOFLAGS)" GOGC=$(BUILD_GOGC) $(GO) build -o $(ETCD_BIN) go.etcd.io/etcd/server/v3

# hack/make-test.sh runs it: the unit tests first, then every other release line's part (make
# line-all) in the background beside the default line's integration, end-to-end, image, README,
# signing and scheduler_perf parts, each line with its own log in _output/; the script's header
# says why, and what it prints when something fails.
.PHONY: test
test: ## Unit, alert rules, fuzz smoke, integration (real apiserver), end-to-end (built binaries), the image, the READMEs' blocks run verbatim, release signing, the scheduler_perf smoke test, and every other release line (line-all).
	MAKE="$(MAKE)" OTHER_LINES="$(OTHER_LINES)" hack/make-test.sh

# The release lines other than the default one (lines/k8s-<minor>/). make test runs the default
# line's whole suite and, for each of these, the tests of the code that differs between lines
# (the build-tagged shims and what uses them: plugins, commands), the integration suite, the
# binary end-to-end suite against kube-apiserver and etcd of the line's own Kubernetes (the test
# binaries compile the apiserver from the line's go.mod) and the fuzz smoke. Only the unit
# tests of line-independent packages, scheduler_perf, the image and signing run on the default
# line alone. docs/compatibility.md's matrix lists what this tests.
OTHER_LINES := $(sort $(patsubst $(CURDIR)/lines/k8s-%/versions.env,%,$(wildcard $(CURDIR)/lines/k8s-*/versions.env)))

.PHONY: lines
lines: ## Print the release lines, the default first (docs/compatibility.md).
	@echo $(DEFAULT_LINE) $(OTHER_LINES)

.PHONY: test-lines
test-lines: ## Every other release line's part of make test (lines/), one after the other in the foreground: make line-all LINE=<line> for each.
	@for l in $(OTHER_LINES); do \
	  echo "== release line $$l"; \
	  $(MAKE) --no-print-directory line-all LINE=$$l || exit $$?; \
	done

# A line's integration suite runs without the race detector (the default line's runs with it:
# the code is the same but for the shims, which the line's unit tests run). LINE_RACE=-race gives
# it the race detector too.
LINE_RACE ?=

.PHONY: line-test
line-test: ## One release line's line-dependent unit tests and e2e suite (LINE=<minor>), as make line-all runs them.
	@[[ -n "$(LINE)" ]] || { echo "line-test: set LINE=<minor>; the default line's tests are make test" >&2; exit 2; }
	$(TEST_ENV) $(GO) test $(GOTEST_FLAGS) ./internal/compat/... ./pkg/version/... ./pkg/plugins/... ./cmd/... ./manifests/...
	@mkdir -p $(CURDIR)/_output
	$(MAKE) --no-print-directory etcd
	$(MAKE) --no-print-directory e2e LINE=$(LINE)

# make test runs line-all for every other line, in the background (see test): line-deep, then
# line-test, the second even if the first fails.
.PHONY: line-all
line-all: ## One release line's whole part of make test (LINE=<minor>): line-deep, then line-test.
	@[[ -n "$(LINE)" ]] || { echo "line-all: set LINE=<minor>" >&2; exit 2; }
	@status=0; $(MAKE) --no-print-directory line-deep LINE=$(LINE) || status=$$?; \
	  $(MAKE) --no-print-directory line-test LINE=$(LINE) || status=$$?; \
	  exit $$status

.PHONY: line-deep
line-deep: ## Another line's integration suite (no race detector unless LINE_RACE=-race) and fuzz smoke (LINE=<minor>), as make test runs them (line-all).
	@[[ -n "$(LINE)" ]] || { echo "line-deep: set LINE=<minor>" >&2; exit 2; }
	$(MAKE) --no-print-directory integration LINE=$(LINE) RACE=$(LINE_RACE)
	$(MAKE) --no-print-directory fuzz-smoke LINE=$(LINE)

.PHONY: unit
# The benchmarks run once in the same test binaries (under the race detector too): a second
# build without it would link every package's test binary again for the four that have any.
unit: ## Unit tests (race detector on), static checks of shipped files (Dockerfile lint, metrics docs) and benchmarks (run once).
	GOFLAGS="$(DEV_GOFLAGS)" $(GO) test $(RACE) $(GOTEST_FLAGS) -bench=. -benchtime=1x ./pkg/... ./cmd/... ./internal/... ./manifests/... ./test/static/... ./hack/perfreport/... ./hack/installedreport/... | grep -v -E '^(Benchmark|goos:|goarch:|pkg:|cpu:)'

# The alert rules' test (test/alerts) is a module of its own: Prometheus' packages would fight
# go.mod's Kubernetes pins. It gets the test build flags without LINE's -modfile and -tags, which
# name the main module's go.mod and shims. -count=1: the files it reads (manifests/, docs/) are
# outside its module, where go test's cache does not look for changes.
.PHONY: alerts
alerts: ## Prometheus alert rules (manifests/monitoring): loaded and evaluated by Prometheus' rule engine, each made to fire and stay silent.
	cd test/alerts && GOFLAGS="$(filter-out -modfile=% -tags=%,$(DEV_GOFLAGS))" $(GO) test -count=1 $(GOTEST_FLAGS) ./...

# Fuzz targets as package:Target; `go test -fuzz` takes one package and one target at a time.
# Their seed corpora (f.Add and testdata/fuzz/<Target>/) run in every `go test`, so in `make unit`.
FUZZ_TARGETS := \
  ./pkg/pool:FuzzParseManagedLabels \
  ./pkg/pool:FuzzPoolOf \
  ./pkg/pool:FuzzCompileLabelSets \
  ./pkg/plugins:FuzzDecodePluginArgs \
  ./pkg/admission/webhook:FuzzWebhookPatch \
  ./pkg/simulate:FuzzParseScenario
FUZZTIME ?= 10s
# make test's smoke budget is a count of executions, not a duration: with a duration, Go's fuzz
# coordinator (before Go 1.27) can report the deadline itself as a failure ("context deadline
# exceeded", no crasher) when a worker is mid-input as -fuzztime expires, golang/go#75804, which
# slow targets (FuzzParseScenario, ~20 inputs/s) hit. A count has no deadline to race. 500 inputs: ~10-25 s for the slowest target here, under a second for the others.
FUZZ_SMOKE_TIME ?= 500x

.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZTIME each (default 10s; e.g. FUZZTIME=1000000x). Crashers go to testdata/fuzz.
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $${t#*:} ($${t%%:*}), $(FUZZTIME)"; \
	  GOFLAGS="$(DEV_GOFLAGS)" $(GO) test $${t%%:*} -run='^$$' -fuzz="^$${t#*:}$$" -fuzztime=$(FUZZTIME) -timeout=0; \
	done

.PHONY: fuzz-smoke
fuzz-smoke: ## A short fuzz of every target (FUZZ_SMOKE_TIME, 500 inputs each), as make test runs it.
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE_TIME)

.PHONY: integration
integration: etcd ## Plugins in process against kube-apiserver + etcd (race detector on, but for one upstream package: see INTEGRATION_RACE).
	@mkdir -p _output
	status=0; $(TEST_ENV) $(GO) test $(INTEGRATION_RACE) $(GOTEST_FLAGS) -timeout=30m ./test/integration/... 2>&1 | tee _output/integration$(if $(LINE),-k8s$(LINE)).log || status=$$?; \
	  $(FAILURE_SUMMARY) _output/integration$(if $(LINE),-k8s$(LINE)).log; exit $$status

.PHONY: e2e
e2e: etcd build kubectl ## bin/pool-scheduler as a child process against kube-apiserver + etcd; kubectl pool (bin/poolctl as a kubectl plugin).
	@mkdir -p $(CURDIR)/_output
	status=0; $(TEST_ENV) POOL_SCHEDULER_BINARY=$(BIN)/pool-scheduler POOL_LABELER_BINARY=$(BIN)/pool-labeler POOLCTL_BINARY=$(BIN)/poolctl KUBECTL_BINARY=$(BIN)/kubectl \
	  $(GO) test $(GOTEST_FLAGS) -timeout=20m ./test/e2e/... 2>&1 | tee $(CURDIR)/_output/e2e$(if $(LINE),-k8s$(LINE)).log || status=$$?; \
	  $(FAILURE_SUMMARY) $(CURDIR)/_output/e2e$(if $(LINE),-k8s$(LINE)).log; exit $$status
	@# The time from the leader's last renewal to the first pod left with the default scheduler
	@# (a measurement, printed; docs/operations.md).
	$(TEST_ENV) POOL_LABELER_BINARY=$(BIN)/pool-labeler $(GO) test -run='^$$' -bench='^BenchmarkHandoffToDefault$$' -benchtime=1x ./test/e2e/ \
	  > $(CURDIR)/_output/bench-handoff$(if $(LINE),-k8s$(LINE)).log 2>&1 || { tail -50 $(CURDIR)/_output/bench-handoff$(if $(LINE),-k8s$(LINE)).log; exit 1; }
	@grep -E '^Benchmark' $(CURDIR)/_output/bench-handoff$(if $(LINE),-k8s$(LINE)).log

.PHONY: perf-smoke
perf-smoke: etcd binaries kube-scheduler ## scheduler_perf's short workload for every test case, and the installed benchmark's smoke workload: the harnesses and our profile work.
	mkdir -p _output/perf-smoke
	$(TEST_ENV) ARTIFACTS=$(CURDIR)/_output/perf-smoke $(GO) test ./test/perf -run='^$$' -bench=. -benchtime=1ns -timeout=20m \
	  -perf-scheduling-label-filter=short -data-items-dir=$(CURDIR)/_output/perf-smoke
	$(TEST_ENV) ARTIFACTS=$(CURDIR)/_output/perf-smoke $(GO) test ./test/installed -run='^$$' -bench='^BenchmarkInstalled$$/^smoke$$' -benchtime=1x -timeout=20m

.PHONY: bench
bench: etcd binaries $(if $(LINE),,kube-scheduler) ## Plugin microbenchmarks and memory per node/pod, scheduler_perf (WORKLOADS=1000Nodes COUNT=3) and the installed benchmark (INSTALLED="500Nodes 5000Nodes"; SUITES picks) -> docs/performance.md; LINE=<line>: scheduler_perf alone, on that release line.
	hack/bench.sh

.PHONY: generate
generate: ## Regenerate deepcopy, conversions, defaults, CRDs and docs/architecture.md's diagram.
	hack/update-codegen.sh
	GOFLAGS="$(DEV_GOFLAGS)" $(GO) test ./test/static -run '^TestArchitectureDoc$$' -count=1 -args -update

.PHONY: verify
verify: ## gofmt, go vet, generated files and go.mod replaces up to date, actionlint, Helm chart lint.
	hack/verify.sh

# The image is assembled by hack/release (internal/ociimage, go-containerregistry) from the
# static binaries `make binaries` builds, cross-compiled per platform: no container engine, no
# base image to pull. One image per platform under an OCI image index, SBOMs as OCI referrers.
# Every release line has its own image (docs/compatibility.md), in one repository, tagged
# <VERSION>-k8s<line> (the chart runs <appVersion>-k8s<line> of the line serving the cluster):
# make image writes one layout per line, $(IMAGE_LAYOUT)/k8s-<line>, from that line's
# `make binaries` (LINE=<line>; none for the default line) into _output/bin/k8s-<line>/<os>_<arch>.
# LINES restricts the lines (e.g. LINES=1.34 for a quick local run); make release takes them all.
PLATFORMS ?= linux/amd64 linux/arm64
LINES ?= $(DEFAULT_LINE) $(OTHER_LINES)
IMAGE_LAYOUT ?= _output/image
RELEASE_TOOL := GOFLAGS="$(DEV_GOFLAGS)" $(GO) run ./hack/release
HOST_ARCH := $(shell $(GO) env GOARCH)
# Expanded in a recipe, it stops the target on a LINES entry that is not a release line, and on
# LINE (the targets that build every line run each line's build themselves).
check-lines = $(if $(LINE),$(error make $@ builds every release line; choose them with LINES=..., not LINE=$(LINE)))$(foreach l,$(LINES),$(if $(filter $(l),$(DEFAULT_LINE) $(OTHER_LINES)),,$(error LINES: $(l) is not a release line; the lines are $(DEFAULT_LINE) $(OTHER_LINES))))

.PHONY: image
image: ## Multi-arch OCI image layout per release line in _output/image/k8s-<line> (LINES, PLATFORMS), tagged <VERSION>-k8s<line>; no container engine needed.
	$(check-lines)
	@for l in $(LINES); do \
	  line=; [[ $$l == $(DEFAULT_LINE) ]] || line=LINE=$$l; \
	  for p in $(PLATFORMS); do \
	    echo "== line $$l, $$p: make binaries $$line"; \
	    GOOS=$${p%/*} GOARCH=$${p#*/} $(MAKE) --no-print-directory binaries $$line VERSION=$(VERSION) COMMIT=$(COMMIT) BIN=$(CURDIR)/_output/bin/k8s-$$l/$${p%/*}_$${p#*/}; \
	  done; \
	  $(RELEASE_TOOL) image --out $(IMAGE_LAYOUT)/k8s-$$l --version $(VERSION) --tag $(VERSION)-k8s$$l --revision $(REVISION) --source-date-epoch $(SOURCE_DATE_EPOCH) \
	    $(foreach p,$(PLATFORMS),--platform $(p)=_output/bin/k8s-$$l/$(subst /,_,$(p))); \
	done

# make test checks the image of the host platform only, assembled from bin/ (the binaries e2e
# runs), of the line being built (the default one in make test): cross-compiling Kubernetes for
# arm64, or another line, is another cold compile (minutes), while the assembly is the same code
# for every platform and line. make image and make release build them all.
.PHONY: image-test
image-test: binaries ## The image test: host-platform layout from bin/, config, run, SBOM, push/pull to an in-process registry.
	$(RELEASE_TOOL) image --out _output/image-test --version $(VERSION) --tag $(VERSION)-k8s1.$(KUBE_MINOR) --revision $(REVISION) --source-date-epoch $(SOURCE_DATE_EPOCH) \
	  --platform linux/$(HOST_ARCH)=$(BIN)
	$(MAKE) --no-print-directory image-test-layout IMAGE_LAYOUT=_output/image-test

# The README test (test/readme): every marked shell block of README.md and the chart's README,
# verbatim, in bash from the repository's root, against kube-apiservers and an OCI registry in
# process: the recipe's `make image` and `go run ./hack/release`, helm and kubectl from bin/.
# The blocks get the GOFLAGS a user's shell has (not the test build's), so make image reuses
# the build cache of make binaries. The default line only, as the image (make image-test).
.PHONY: readme-test
readme-test: etcd helm kubectl binaries ## Run README.md's and the chart README's install, upgrade and opt-in blocks verbatim (test/readme).
	$(TEST_ENV) README_TEST_GOFLAGS="$(DEFAULT_GOFLAGS)" $(GO) test $(GOTEST_FLAGS) -count=1 -timeout=30m \
	  -ldflags '$(KUBE_VERSION_LDFLAGS)' ./test/readme/...

# TestRegistryRecipe (the README's install recipe: push, render the chart and the line's overlay
# with the pushed digest, apply them) starts kube-apiserver and etcd: etcd from bin/.
.PHONY: image-test-layout
image-test-layout: etcd ## Run test/image against the layout in IMAGE_LAYOUT (e.g. _output/image/k8s-1.36, one of make image's).
	POOL_SCHEDULER_IMAGE_LAYOUT=$(abspath $(IMAGE_LAYOUT)) $(TEST_ENV) $(GO) test $(GOTEST_FLAGS) -count=1 ./test/image/...

# A release: `make release VERSION=vX.Y.Z` writes _output/release/vX.Y.Z/ (each line's image
# layout as an OCI archive, the chart with every line's digest, install YAMLs per line, kubectl
# plugin archives, krew manifest, SHA256SUMS) and the image layouts
# _output/release/image-vX.Y.Z/k8s-<line>/, which `make push-image` pushes. The kubectl plugin
# (poolctl) does not depend on the line: it is built from the default line.
# .github/workflows/release.yaml runs both on a tag.
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_DIR = _output/release/$(VERSION)
RELEASE_LAYOUT = _output/release/image-$(VERSION)

.PHONY: release
release: ## Release files for VERSION=vX.Y.Z in _output/release/ (every line's image, chart, install YAMLs, plugin, SHA256SUMS).
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release: VERSION=$(VERSION) is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2; exit 1; }
	@[[ "$(sort $(LINES))" == "$(sort $(DEFAULT_LINE) $(OTHER_LINES))" ]] || { echo "make release: a release has every line's image (the chart serves them all); LINES=$(LINES) leaves some of $(DEFAULT_LINE) $(OTHER_LINES) out" >&2; exit 1; }
	$(MAKE) --no-print-directory image VERSION=$(VERSION) IMAGE_LAYOUT=$(RELEASE_LAYOUT)
	@for p in $(PLUGIN_PLATFORMS); do \
	  echo "== kubectl-pool for $$p"; \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} GOGC=$(BUILD_GOGC) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o _output/plugin/$${p%/*}_$${p#*/}/kubectl-pool ./cmd/poolctl; \
	done
	$(RELEASE_TOOL) dist --version $(VERSION) --repository $(IMAGE_REPO) --out $(RELEASE_DIR) \
	  $(foreach l,$(LINES),--line $(l)=$(RELEASE_LAYOUT)/k8s-$(l)) \
	  --image-ref-out $(RELEASE_LAYOUT).ref --source-date-epoch $(SOURCE_DATE_EPOCH) \
	  $(foreach p,$(PLUGIN_PLATFORMS),--plugin $(p)=_output/plugin/$(subst /,_,$(p))/kubectl-pool)

.PHONY: push-image
push-image: ## Push the release's image layouts to IMAGE_REPO (tag VERSION-k8s<line> each, SBOM and, once signed, signature and provenance referrers); credentials from docker login.
	$(check-lines)
	$(RELEASE_TOOL) push --version $(VERSION) --repository $(IMAGE_REPO) $(foreach l,$(LINES),--layout $(RELEASE_LAYOUT)/k8s-$(l))

# The release's chart (values pinning every line's image by digest) as an OCI artifact, for
# `helm install oci://...` and GitOps tools: CHART_REPO/pool-scheduler:<version without v>. Its
# layer is the release's .tgz as is, whose sha256 the signed SHA256SUMS lists.
CHART_REPO ?= oci://ghcr.io/pool-scheduler/charts
.PHONY: push-chart
push-chart: ## Push the release's chart (VERSION) to CHART_REPO as an OCI artifact; credentials from helm registry login or docker login.
	$(RELEASE_TOOL) push-chart --chart $(RELEASE_DIR)/pool-scheduler-$(patsubst v%,%,$(VERSION)).tgz --repository $(CHART_REPO)

# Signing a release (docs/security.md, "Verifying a release"): hack/signing, a module of its own
# (sigstore-go's gRPC/OpenTelemetry/protobuf would fight go.mod's Kubernetes pins), built with
# the test flags without LINE's -modfile and -tags, like test/alerts. make sign-release writes
# Sigstore bundles into the release directory (SHA256SUMS.sigstore.json, one per line's image
# archive, provenance.sigstore.json: SLSA v1) and attaches each image's signature and provenance
# to its layout as OCI referrers, which make push-image pushes. KEY=<private.pem> signs locally
# (make release-key makes a pair); the release workflow signs keyless (KEYLESS=1: a Fulcio
# certificate for the workflow's OIDC identity, every signature logged in Rekor).
# make verify-release checks a release offline: KEY=<public.pem>, or TRUSTED_ROOT=<Sigstore
# trusted_root.json, make trusted-root> with IDENTITY (default: this repository's release
# workflow at the tag VERSION); RELEASE_DIR=<dir> for downloaded files; PULLED=1 also checks
# each line's image in IMAGE_REPO (digest as released, signature and provenance referrers).
SIGNING := GOFLAGS="$(filter-out -modfile=% -tags=%,$(DEV_GOFLAGS))" $(GO) -C hack/signing
RELEASE_KEY ?= release
IDENTITY ?= https://github.com/pool-scheduler/pool-scheduler/.github/workflows/release.yaml@refs/tags/$(VERSION)
TRUSTED_ROOT ?=

.PHONY: signing-test
signing-test: ## Release signing (hack/signing): a key-signed release verified offline and from an in-process registry, tampering refused; keyless against an in-memory Sigstore.
	$(SIGNING) test $(RACE) $(GOTEST_FLAGS) ./...

.PHONY: release-key
release-key: ## An ECDSA P-256 key pair for make sign-release KEY=...: RELEASE_KEY.key (private, default release.key) and RELEASE_KEY.pub.
	$(SIGNING) run . keygen --out $(abspath $(RELEASE_KEY))

.PHONY: sign-release
sign-release: ## Sign the release VERSION (SHA256SUMS, each line's image, SLSA provenance), attaching image bundles to the layouts: KEY=<private.pem>, or KEYLESS=1 (the release workflow).
	$(check-lines)
	@[[ -n "$(KEY)$(KEYLESS)" ]] || { echo "make sign-release: set KEY=<private key PEM> (make release-key), or KEYLESS=1 in GitHub Actions" >&2; exit 2; }
	$(SIGNING) run . sign --release-dir $(abspath $(RELEASE_DIR)) --repository $(IMAGE_REPO) --version $(VERSION) --commit $(REVISION) \
	  $(if $(KEYLESS),--keyless,--key $(abspath $(KEY))) $(foreach l,$(LINES),--layout $(abspath $(RELEASE_LAYOUT)/k8s-$(l)))

.PHONY: verify-release
verify-release: ## Verify the release VERSION offline: SHA256SUMS signature, every file, each image's signature and provenance (KEY=<public.pem>, or TRUSTED_ROOT= and IDENTITY=); PULLED=1: IMAGE_REPO's images too.
	@[[ -n "$(KEY)$(TRUSTED_ROOT)" ]] || { echo "make verify-release: set KEY=<public key PEM>, or TRUSTED_ROOT=<trusted_root.json> (make trusted-root) for a keyless release" >&2; exit 2; }
	$(SIGNING) run . verify --release-dir $(abspath $(RELEASE_DIR)) --repository $(IMAGE_REPO) \
	  $(if $(KEY),--key $(abspath $(KEY)),--trusted-root $(abspath $(TRUSTED_ROOT)) --certificate-identity '$(IDENTITY)') \
	  $(foreach l,$(LINES),$(if $(wildcard $(RELEASE_LAYOUT)/k8s-$(l)/index.json),--layout $(abspath $(RELEASE_LAYOUT)/k8s-$(l)))) \
	  $(if $(PULLED),$(foreach l,$(LINES),--image $(IMAGE_REPO):$(VERSION)-k8s$(l)))

.PHONY: trusted-root
trusted-root: ## Fetch Sigstore's public-good trusted root (TUF) into trusted_root.json, for make verify-release TRUSTED_ROOT=trusted_root.json.
	$(SIGNING) run . trusted-root --out $(CURDIR)/trusted_root.json

# For Docker users: one line's image from the Dockerfile (needs a Docker engine; see README).
# LINE picks the line as for make build (none: the default line); IMAGE is tagged for it.
.PHONY: docker-image
docker-image: ## Build one release line's image with Docker from the Dockerfile (LINE=<minor>, default the default line; needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg REVISION=$(REVISION) --build-arg LINE=$(LINE) -t $(IMAGE) .

.PHONY: clean
clean:
	rm -rf $(BIN) _output
