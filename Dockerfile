# syntax=docker/dockerfile:1
# One image for every purrfly service: `purrctl relay` or `purrctl balancer`
# (fly/relay.toml and fly/balancer.toml choose which).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION}" -o /out/purrctl ./cmd/purrctl

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/purrctl /usr/local/bin/purrctl
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/purrctl"]
CMD ["relay"]
