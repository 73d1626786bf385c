# syntax=docker/dockerfile:1
# Build: make image   (or: docker build -t pool-scheduler .)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
ARG COMMIT=unknown
RUN make binaries VERSION=${VERSION} COMMIT=${COMMIT}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/pool-scheduler /src/bin/pool-labeler /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pool-scheduler"]
