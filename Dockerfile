# syntax=docker/dockerfile:1

# Build: a static binary, no cgo (SQLite is pure Go), so the runtime image
# needs no libc.
FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# timetzdata embeds the time zone database, so schedules in any zone work
# in an image without one.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -tags timetzdata \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/herald ./cmd/herald \
 && mkdir -p /out/home

# Run: distroless static has CA certificates and a non-root user, and
# nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/herald /usr/local/bin/herald
# HERALD_HOME holds the SQLite file when the store is sqlite; mount a
# volume there to keep it.
COPY --from=build --chown=65532:65532 /out/home /var/lib/herald
ENV HERALD_HOME=/var/lib/herald \
    HERALD_HTTP_ADDR=0.0.0.0:8642
# Listening on every interface needs HERALD_API_KEY: without it the
# gateway refuses to start.
EXPOSE 8642
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/herald"]
CMD ["gateway"]
