# tare's container image: the static tare binary on an empty base, run as
# user 65532, with no shell. deploy/image builds the same image without a
# container engine (an OCI layout: go run ./deploy/image).
#
#   docker build -t registry.example.com/tare:v0.9.0 --build-arg VERSION=v0.9.0 .
#   docker push registry.example.com/tare:v0.9.0
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 …
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=linux GOARCH=$TARGETARCH go build -trimpath -tags timetzdata \
        -ldflags "-s -w -X main.version=${VERSION}" -o /out/tare ./cmd/tare \
    && mkdir -p /out/etc /out/tmp && chmod 1777 /out/tmp \
    && printf 'tare:x:65532:65532:tare:/nonexistent:/sbin/nologin\n' > /out/etc/passwd \
    && printf 'tare:x:65532:\n' > /out/etc/group

FROM scratch
COPY --from=build /out/ /
ARG VERSION=dev
LABEL org.opencontainers.image.title="tare" \
      org.opencontainers.image.description="open-loop load tester that says whether the host was quiet enough to trust the figures" \
      org.opencontainers.image.source="https://github.com/tare-dev/tare" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}"
ENV PATH=/
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/tare"]
CMD ["--help"]
