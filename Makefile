# lifecycled — the two commands of the README, and the pieces they are made of.
# Both work on a fresh Debian machine: they install what they need through apt first.

SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all demo test deps build install bench clean

all: build

# libsystemd-dev (sd-daemon, sd-event) and pkg-config, through apt, only when missing.
deps:
	@if ! pkg-config --exists libsystemd 2>/dev/null; then \
		echo "Installing libsystemd-dev and pkg-config through apt"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsystemd-dev pkg-config >/dev/null; \
	fi

build: deps
	$(SWIFT) build

# The main job: the daemon on the shipped demo config (Config/), with a tour of the states.
demo: build
	./Examples/tour.sh

# Unit tests (model, protocol, config, kernel layer) and integration tests (the real daemon, real clients).
test: build
	$(SWIFT) build --build-tests
	$(SWIFT) test

# Installs the binaries, the unit and an example configuration (not the demo apps).
# The Swift runtime is linked statically: lifectl starts in about half the time (bench/lifectl-latency.sh).
PREFIX ?= /usr/local
RELEASE := -c release --static-swift-stdlib --scratch-path .build/static
install: deps
	$(SWIFT) build $(RELEASE) --product lifecycled
	$(SWIFT) build $(RELEASE) --product lifectl
	install -D -m 0755 "$$($(SWIFT) build $(RELEASE) --show-bin-path)/lifecycled" $(DESTDIR)$(PREFIX)/bin/lifecycled
	install -D -m 0755 "$$($(SWIFT) build $(RELEASE) --show-bin-path)/lifectl" $(DESTDIR)$(PREFIX)/bin/lifectl
	install -D -m 0644 systemd/lifecycled.service $(DESTDIR)/etc/systemd/system/lifecycled.service
	[ -e $(DESTDIR)/etc/lifecycled/lifecycled.conf ] || install -D -m 0644 Config/lifecycled.conf $(DESTDIR)/etc/lifecycled/lifecycled.conf
	install -d $(DESTDIR)/etc/lifecycled/apps

# How fast lifectl answers, against the floor (process start-up, a C client). The full comparison with
# supervisord, s6 and runit is a later step.
bench: deps
	bash bench/lifectl-latency.sh

clean:
	rm -rf .build
