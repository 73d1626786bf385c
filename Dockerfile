# syntax=docker/dockerfile:1
# Build: make docker-image [LINE=1.36]   (or: docker build [--build-arg LINE=1.36] -t pool-scheduler .)
# Without Docker, `make image` assembles the same image (user, entrypoint, binaries, labels; see
# internal/ociimage) as a multi-arch OCI layout per release line; test/static checks the two agree.
FROM golang:1.26.8 AS build
WORKDIR /src
# The release line to build (docs/compatibility.md): a Kubernetes minor with a lines/k8s-<minor>/
# directory (its go.mod and pins), as `make binaries LINE=...`; empty builds the default line (go.mod).
ARG LINE=
COPY go.mod go.sum ./
COPY lines/ lines/
RUN GOFLAGS="${LINE:+-modfile=/src/lines/k8s-${LINE}/go.mod}" go mod download
COPY . .
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
# BIN: the binaries land in bin/ whatever the line (make puts another line's in bin/k8s-<minor>/).
RUN make binaries VERSION=${VERSION} COMMIT=${COMMIT} LINE=${LINE} BIN=/src/bin

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.0.0-dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="pool-scheduler" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/pool-scheduler/pool-scheduler"
COPY --from=build /src/bin/pool-scheduler /src/bin/pool-labeler /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pool-scheduler"]
