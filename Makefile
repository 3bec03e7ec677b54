# faultline — see README.md.
GO ?= go
# make deps installs it (pinned in scripts/deps.sh); make test checks .goreleaser.yaml with it
GORELEASER ?= $(shell $(GO) env GOPATH)/bin/goreleaser
# Bounds each test binary, the scenarios' above all: beside a CPU hog it
# took 30 min 10 s (its whole catalogue, gates and explore at once), and CI
# allows 90 min for the whole run.
TEST_TIMEOUT ?= 60m

.PHONY: deps build test test-docker scenarios report report-production vet clean bench bench-go images

## deps: install PostgreSQL and RabbitMQ from the distribution when missing
deps:
	@bash scripts/deps.sh

## images: the docker provider's images and the faultline image, built here from Debian's packages (scripts/images.sh)
images:
	@bash scripts/images.sh

## test-docker: the docker provider's own test and the reference's gate on it, with images built here (scripts/test-docker.sh; not in make test, see docs/ci.md)
test-docker:
	@bash scripts/test-docker.sh

## build: compile everything, and the pipeline programs into bin/
build:
	$(GO) build ./...
	$(GO) build -o bin/ ./system/cmd/order ./system/cmd/relay ./system/cmd/inventory

vet:
	$(GO) vet ./...
	cd protocol && $(GO) vet ./...
	cd examples/watermill-outbox && GOWORK=off $(GO) vet ./...
	cd examples/cdc-outbox && GOWORK=off $(GO) vet ./...

## test: every test, the scenarios included (real PostgreSQL, RabbitMQ, Toxiproxy)
test: vet
	cd protocol && $(GO) test -count=1 ./...
	cd protocol && GOWORK=off GOOS=darwin $(GO) build ./... && GOWORK=off GOOS=windows $(GO) build ./...
	$(GORELEASER) check
	cd examples/node-outbox && node --test test/
	@# The scenarios' package holds most of the suite's time: started first,
	@# beside the other packages, rather than after those ahead of it in
	@# go test's order. Both must pass.
	@$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./scenarios & scenarios=$$!; \
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/scenarios$$'); rest=$$?; \
	wait $$scenarios; test $$? -eq 0 -a $$rest -eq 0
	cd examples/gotest && $(GO) test -count=1 -run 'TestReliability/^unroutable-then-routable$$' ./...

## scenarios: the scenario catalogue on the correct pipeline, with each run's figures
scenarios:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v -run 'TestScenarios' ./scenarios

## report: the main job — the gate (correct pipeline + every variant) with its report in reports/latest/
report:
	$(GO) run ./cmd/faultline gate

## report-production: the gate with production's windows too — a clustered broker, a failing-over database (README, "Production")
report-production:
	$(GO) run ./cmd/faultline gate --profile production

## bench: throughput of the relay, the consumer and the pipeline against their baselines, as ratios (BENCH_JSON)
BENCH_JSON ?= reports/bench.json
bench:
	$(GO) run ./cmd/faultline bench --json $(BENCH_JSON)

## bench-go: Go benchmarks of the hot paths (relay claim and status writes on real PostgreSQL, event log, checker)
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./system/relay ./harness/check
	cd protocol && $(GO) test -run '^$$' -bench . -benchmem ./eventlog ./crashpoint

clean:
	rm -rf bin
