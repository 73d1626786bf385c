# syntax=docker/dockerfile:1
# Build: make docker-image   (or: docker build -t pool-scheduler .)
# Without Docker, `make image` assembles the same image (user, entrypoint, binaries, labels; see
# internal/ociimage) as a multi-arch OCI layout; test/static checks the two agree.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
RUN make binaries VERSION=${VERSION} COMMIT=${COMMIT}

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
