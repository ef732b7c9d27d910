# warmpod image: only the static binary, nothing else.
# Use it as the ENTRYPOINT of a helper image that has a shell:
#   COPY --from=<this image> /warmpod /usr/local/bin/warmpod
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# No inlining in the packages of the one TLS request, nor in those of logs, errors and
# control replies (see COLDPKGS in the Makefile).
RUN CGO_ENABLED=0 go build -trimpath \
      -gcflags=crypto/...=-l -gcflags=vendor/golang.org/x/crypto/...=-l \
      -gcflags=math/big=-l -gcflags=encoding/asn1=-l -gcflags=net/url=-l \
      -gcflags=fmt=-l -gcflags=reflect=-l -gcflags=encoding/json=-l \
      -ldflags "-s -w -X main.version=${VERSION}" -o /warmpod ./cmd/warmpod

# The final stage; Dockerfile.prebuilt is the same stage fed with a binary built outside
# (CI builds it offline with `make image`, since no base image can be pulled there).
FROM scratch
COPY --from=build /warmpod /warmpod
ENTRYPOINT ["/warmpod"]
