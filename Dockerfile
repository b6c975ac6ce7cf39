# The outboxd image: a static binary (scripts/build, as the release builds
# it) on a minimal non-root base.
#   docker build --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse --short=12 HEAD) \
#     --build-arg DATE=$(git log -1 --format=%cI) -t outboxd .
#   docker run --rm -e OUTBOXD_PG_URL=... -e OUTBOXD_NATS_URL=... -p 9187:9187 outboxd run
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN VERSION="$VERSION" COMMIT="$COMMIT" DATE="$DATE" bash scripts/build /out/outboxd "$TARGETOS" "$TARGETARCH"

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
LABEL org.opencontainers.image.title="outboxd" \
      org.opencontainers.image.description="Transactional outbox relay: PostgreSQL logical replication to NATS JetStream" \
      org.opencontainers.image.source="https://github.com/outboxd/outboxd" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$COMMIT" \
      org.opencontainers.image.created="$DATE"
COPY --from=build /out/outboxd /usr/local/bin/outboxd
# Inside a container the metrics, health and status page listen on every
# interface, so that probes and Prometheus reach them.
ENV OUTBOXD_METRICS_ADDR=:9187
EXPOSE 9187
USER nonroot:nonroot
ENTRYPOINT ["outboxd"]
CMD ["run"]
