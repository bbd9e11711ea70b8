# Builds the imlab binary and a small runtime image for the reference
# server's roles (see compose/docker-compose.yml).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/imlab ./cmd/imlab

FROM debian:12-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/imlab /usr/local/bin/imlab
# /results: the load generators' run directories (a named volume copies
# this ownership), writable by the unprivileged user.
RUN mkdir -p /results && chown nobody:nogroup /results
USER nobody
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/imlab"]
CMD ["up", "--listen", "0.0.0.0:8080"]
