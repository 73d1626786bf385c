# Settings of the Makefile: shell, Go flags, release lines, version stamps, test flags.
# Included by the Makefile after its help target; each setting says why it is what it is.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO      ?= go
BIN     := $(CURDIR)/bin
MODULE  := github.com/pool-scheduler/pool-scheduler
include hack/versions.env
# The default release line, the minor of go.mod's Kubernetes (before LINE overrides KUBE_VERSION).
DEFAULT_LINE := 1.$(word 2,$(subst ., ,$(KUBE_VERSION)))

# Release lines, one per supported Kubernetes minor, built from this tree (docs/compatibility.md).
# The default line (1.34) is go.mod with hack/versions.env's pins. LINE=<minor> (e.g.
# `make build LINE=1.36`) builds another: lines/k8s-<minor>/go.mod through -modfile (the same
# module path, so packages, patterns and build info stay as they are), its versions.env (read
# after hack/versions.env: KUBE_VERSION, GO_TAGS, ...) and its build tags, into bin/k8s-<minor>/.
# Exported, GOFLAGS reaches every go command of the recipes and the go commands that tests start;
# -modfile is absolute because those may run in another directory. etcd is the default line's
# (bin/etcd) for every line: DEFAULT_GOFLAGS leave out the line's flags, which a make started
# from a LINE recipe (make line-deep's integration) inherits in GOFLAGS. Without LINE nothing
# here applies.
LINE ?=
DEFAULT_GOFLAGS := $(strip $(filter-out -modfile=% -tags=%,$(GOFLAGS)))
ETCD_BIN := $(CURDIR)/bin/etcd
GOMOD_FILES := go.mod go.sum
ifneq ($(LINE),)
LINE_DIR := $(CURDIR)/lines/k8s-$(LINE)
ifeq ($(wildcard $(LINE_DIR)/versions.env),)
$(error LINE=$(LINE): there is no lines/k8s-$(LINE)/versions.env; lines: default (no LINE) $(patsubst $(CURDIR)/lines/k8s-%,%,$(wildcard $(CURDIR)/lines/k8s-*)))
endif
include $(LINE_DIR)/versions.env
# (A nested make of the same line inherits them: filtered out first, so they are not doubled.)
export GOFLAGS := $(strip $(filter-out -modfile=% -tags=%,$(GOFLAGS)) -modfile=$(LINE_DIR)/go.mod $(if $(GO_TAGS),-tags=$(GO_TAGS)))
BIN := $(CURDIR)/bin/k8s-$(LINE)
GOMOD_FILES := $(LINE_DIR)/go.mod $(LINE_DIR)/go.sum
endif

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
# The Kubernetes version a binary reports (a kube-apiserver linked into a test too: helm checks a
# chart's kubeVersion against it).
KUBE_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR)
LDFLAGS := -s -w \
  -X $(MODULE)/pkg/version.Version=$(VERSION) \
  -X $(MODULE)/pkg/version.GitCommit=$(COMMIT) \
  $(KUBE_VERSION_LDFLAGS)
IMAGE_REPO ?= ghcr.io/pool-scheduler/pool-scheduler
# One image per release line, tagged <VERSION>-k8s<line> (the line LINE builds; make docker-image).
IMAGE   ?= $(IMAGE_REPO):$(VERSION)-k8s1.$(KUBE_MINOR)
# The full commit (OCI revision label) and its time: image layers, labels and SBOMs are stamped
# with it, so the same commit gives the same image digest.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# Test and tool builds skip inlining and DWARF (-gcflags='all=-l -dwarf=false'): compiling
# Kubernetes dominates their cost, and both add to it (binaries are linked with -s -w, which
# drops DWARF anyway; stack traces and pprof do not need it). Shipped binaries (make build) and
# benchmarks (make bench) are compiled normally. GOFLAGS takes the quoted value as one flag.
DEV_GOFLAGS := $(strip $(GOFLAGS) '-gcflags=all=-l -dwarf=false')
# The compiler is a Go program: with GOGC=400 it collects garbage less often, and compiles
# faster for a little more memory. Only `go build` gets it: test binaries and benchmarks run
# with the default GOGC.
BUILD_GOGC ?= 400
# Tests that start kube-apiserver find etcd on PATH.
TEST_ENV := PATH="$(if $(LINE),$(BIN):)$(CURDIR)/bin:$$PATH" GOFLAGS="$(DEV_GOFLAGS)"
GOTEST_FLAGS ?=
# The unit and integration suites run under the race detector (it needs cgo: a C compiler).
# RACE= runs them without it.
RACE ?= -race
# The integration suite runs the whole kube-scheduler, and v1.34.10's has a data race of its own:
# the backoff queue updates a queued pod's PodInfo (PodInfo.Update, from the pod informer) while
# handleSchedulingFailure hands the same PodInfo to the nominator (PodInfo.GetPod), whenever
# DefaultPreemption finds no candidate; both accesses are in k8s.io/kubernetes/pkg/scheduler/framework
# (types.go). Upstream tracks this family of races in
# kubernetes/kubernetes#132025 and #139340 (fixed on master in 2026; v1.34.10 has no fix) and runs its own
# integration suite under -race only in a separate job for that reason. So that one package is
# compiled without race instrumentation (for a package, the last -gcflags pattern that matches wins;
# the compiler's -race=false undoes the go command's -race): ours, client-go and the rest of
# Kubernetes stay instrumented. RACE= turns the detector off for both suites.
RACE_UNINSTRUMENTED := k8s.io/kubernetes/pkg/scheduler/framework
INTEGRATION_RACE ?= $(if $(RACE),$(RACE) '-gcflags=$(RACE_UNINSTRUMENTED)=-l -dwarf=false -race=false')

# The suites that start control planes print thousands of log lines after a failing test, so
# its "--- FAIL" and its messages end far above the output's tail (which is all a CI summary
# keeps). Their output is also written to _output/<suite>.log, and on failure this repeats the
# failed tests and their messages last.
FAILURE_SUMMARY = summarize() { if [ "$$status" -ne 0 ]; then echo "== failed tests and their messages (full output: $$1):"; grep -E -- '--- FAIL|^\s+[A-Za-z0-9_]+_test\.go:[0-9]+: |^panic: |^FAIL' "$$1" | tail -80; fi; }; summarize
