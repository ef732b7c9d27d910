# warmpod — build, test, demo. `make help` lists the targets.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/warmpod
PKGS_DEB  := runc busybox-static tini dumb-init catatonit python3 procps

.PHONY: help build test unit e2e demo deps vet size clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## static, stripped binary with a version stamp → bin/warmpod
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/warmpod
	@ls -l $(BIN) | awk '{print "built", $$NF, $$5, "bytes"}'

deps: ## install what the tests need (Debian: runc, busybox-static, the anchor inits)
	@missing=""; for p in $(PKGS_DEB); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	$(GO) mod download

vet: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet ./...

test: deps vet build ## everything CI runs: unit tests with -race, then the runc end-to-end tests
	WARMPOD_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 ./...

unit: ## unit tests only (no root needed)
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

e2e: deps build ## end-to-end tests: warmpod as PID 1 of real runc containers
	WARMPOD_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -v ./e2e/

demo: deps build ## the whole cycle in a runc container: warm, job with a token, end, idle exit
	./scripts/demo.sh $(CURDIR)/$(BIN)

size: build ## print the binary size and check it is static
	@ls -l $(BIN) | awk '{print $$5, "bytes"}'; file $(BIN) 2>/dev/null || true

clean:
	rm -rf bin
