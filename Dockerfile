# faultline with everything its local provider needs, on Debian 12:
# PostgreSQL 15, RabbitMQ 3.10 (its management plugin ships in the package;
# the local provider enables it in each broker's own enabled_plugins file)
# and Chromium (the report's screenshot). A team gates its pipeline with
#
#   docker run --rm -v "$PWD:/src" -w /src faultline/faultline gate --target faultline.yaml
#
# and adds its own toolchain by building FROM this image (docs/ci.md).
#
# No registry is needed: every stage starts from faultline/bookworm:base,
# which `make images` makes with debootstrap from Debian's mirror, and the
# Go toolchain comes from the Go module proxy (golang.org/toolchain).
#   make images            # the base, then this image as faultline/faultline:local
#   docker build -t faultline/faultline:local .   # once the base exists
ARG BASE=faultline/bookworm:base

# --- build: the static faultline binary -----------------------------------
FROM ${BASE} AS build
ARG GO_VERSION=1.26.8
ARG GOPROXY=https://proxy.golang.org
# PEM certificates of a TLS-inspecting egress proxy, if the build's network
# has one (scripts/images.sh passes the host's /usr/local/share/ca-certificates):
# trusted in this stage only, never in the images made from it.
ARG EXTRA_CA_CERTS=""
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl unzip \
 && rm -rf /var/lib/apt/lists/* \
 && if [ -n "$EXTRA_CA_CERTS" ]; then printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/extra.crt && update-ca-certificates; fi
RUN arch="$(dpkg --print-architecture)" \
 && curl -fsSL -o /tmp/go.zip "${GOPROXY%%,*}/golang.org/toolchain/@v/v0.0.1-go${GO_VERSION}.linux-${arch}.zip" \
 && unzip -q /tmp/go.zip -d /tmp/go \
 && mv "/tmp/go/golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-${arch}" /usr/local/go \
 && rm -rf /tmp/go /tmp/go.zip
ENV PATH=/usr/local/go/bin:$PATH \
    GOPROXY=${GOPROXY} \
    GOTOOLCHAIN=local \
    GOFLAGS=-buildvcs=false \
    CGO_ENABLED=0
WORKDIR /src
# The workspace (go.work) resolves the protocol module from ./protocol
# until its version is published (docs/release.md).
COPY go.mod go.sum go.work go.work.sum ./
COPY protocol/go.mod protocol/go.sum* protocol/
COPY examples/gotest/go.mod examples/gotest/
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags=-s -o /out/faultline ./cmd/faultline

# --- toxiproxy: the docker provider's Toxiproxy (FAULTLINE_TOXIPROXY_IMAGE)
# faultline links Toxiproxy 2.5.0's server and runs it when started with
# FAULTLINE_TOXIPROXY_SERVER=1 (proxies/toxiserver), API on 0.0.0.0:8474.
FROM ${BASE} AS toxiproxy
COPY --from=build /out/faultline /usr/local/bin/faultline
ENV FAULTLINE_TOXIPROXY_SERVER=1 \
    LOG_LEVEL=info
EXPOSE 8474
ENTRYPOINT ["/usr/local/bin/faultline", "-host", "0.0.0.0", "-port", "8474"]

# --- faultline: the CLI with the local provider's services (the default) --
FROM ${BASE} AS faultline
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates postgresql-15 rabbitmq-server chromium fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/faultline /usr/local/bin/faultline
# The local provider starts PostgreSQL and RabbitMQ itself, as nobody when
# it runs as root (PostgreSQL refuses root), on loopback, in a temporary
# folder; no service of the packages runs.
ENV FAULTLINE_INFRA=local \
    LANG=C.UTF-8
WORKDIR /src
ENTRYPOINT ["faultline"]
CMD ["--help"]
