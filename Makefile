# lifecycled — the two commands of the README, and the pieces they are made of.
# Both work on a fresh Debian machine: they install what they need through apt first.

SWIFT ?= swift

.PHONY: all demo test test-deps deps build install uninstall bench clean test-systemd test-systemd-deps soak soak-smoke bench-smoke \
	clients test-clients client-deps

all: build clients

# libsystemd-dev (sd-daemon, sd-event), libxcb1-dev, libxcb-res0-dev and libxau-dev (the x11 display source and its
# Xauthority cookie), libpulse-dev (the sound-server rail) and pkg-config, through apt, only when missing.
deps:
	@build-aux/apt-need "the daemon's system libraries" pkg-config=pkg-config pc:libsystemd=libsystemd-dev pc:xcb=libxcb1-dev \
		pc:xcb-res=libxcb-res0-dev pc:xau=libxau-dev pc:libpulse=libpulse-dev

build: deps
	$(SWIFT) build

# The display tests' headless sway and its terminal (foot), and their X server (Xvfb), window manager (openbox),
# driver (xdotool, xprop from x11-utils), windows (xterm, xlogo from x11-apps) and cookies (xauth), and strace (which
# counts what the daemon asks of sway).
# The D-Bus tests' private bus (dbus-daemon), their second client (gdbus, libglib2.0-bin) and busctl (systemd);
# their polkit checks' polkitd and its authentication agent (pkttyagent), both in polkitd.
# The audio tests' sound server (pulseaudio) and player (pacat, pulseaudio-utils).
# bindfs: a FUSE file system that cannot exchange two names, for the state files' plain renames.
test-deps:
	@build-aux/apt-need "the display, D-Bus and audio tests" sway=sway foot=foot Xvfb=xvfb openbox=openbox \
		xdotool=xdotool xprop=x11-utils xterm=xterm xlogo=x11-apps xauth=xauth strace=strace dbus-daemon=dbus-daemon \
		gdbus=libglib2.0-bin busctl=systemd /usr/lib/polkit-1/polkitd=polkitd pkttyagent=polkitd \
		pulseaudio=pulseaudio pacat=pulseaudio-utils pipewire=pipewire-bin pipewire-pulse=pipewire-pulse \
		wireplumber=wireplumber bindfs=bindfs

# The main job: the daemon on the shipped demo config (Config/), with a tour of the states.
demo: build
	./Examples/tour.sh

# Unit tests (model, protocol, config, kernel layer) and integration tests (the real daemon, real clients),
# then the C library and the Python package (test-clients).
test: build test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test
	$(MAKE) test-clients

# The client libraries (clients/c, clients/python): what they need from apt (a C compiler, GLib for the GLib
# example, python3-venv), only when missing.
client-deps:
	@build-aux/apt-need "the client libraries" cc=gcc,libc6-dev pkg-config=pkg-config pc:glib-2.0=libglib2.0-dev \
		py:ensurepip=python3-venv py:venv=python3-venv

# liblifecycle (shared, static, pkg-config file) and the C examples.
clients: client-deps
	$(MAKE) -C clients/c

# The C library's conformance vectors and unit tests (plain and under AddressSanitizer), then the Python
# package's pytest suite in a virtual environment it makes (clients/python/.venv), and both libraries' example
# apps against the real daemon (clients/tests, pytest too: it uses the debug build of `swift build`).
test-clients: clients deps
	$(MAKE) -C clients/c check
	bash clients/test.sh

# Installation, with the usual PREFIX (default /usr/local) and DESTDIR (a staging root for packages and tests):
#   $(PREFIX)/bin                                lifecycled, lifectl
#   $(UNITDIR)                                   lifecycled.service (ExecStart=, ExecReload= set to $(PREFIX)/bin), .socket
#   $(USERUNITDIR)                               lifecycled.service for a desktop session (systemctl --user)
#   $(PREFIX)/share/man/man{1,5,8}               lifectl(1), lifecycled.conf(5), lifecycled(8)
#   $(PREFIX)/share/bash-completion/completions  lifectl
#   /etc/lifecycled/lifecycled.conf, apps/       only if there is no lifecycled.conf yet (no demo apps)
#   $(DBUSPOLICYDIR), $(POLKITACTIONDIR)         the D-Bus API's bus policy and polkit action (docs/DBUS.md)
#   $(PREFIX)/include, $(LIBDIR), man3           liblifecycle: lifecycle.h, the shared and static libraries,
#                                                lifecycle.pc ($(LIBDIR)/pkgconfig), lifecycle(3) and a page per function
# The units go to systemd's vendor directory under the prefix, not /etc/systemd/system: that one is the
# administrator's (systemctl edit, drop-ins, masks), which an install must not overwrite nor an uninstall
# delete. systemd searches /usr/local/lib/systemd/system and /usr/lib/systemd/system; with another PREFIX,
# pass UNITDIR=/etc/systemd/system. `make uninstall` takes the same variables and removes exactly those
# files, never the configuration.
# The Swift runtime is linked statically, and lifectl is a static executable (-static-executable): a command's
# time is mostly its start-up, which the dynamic loader and its page faults would dominate (bench/lifectl-latency.sh,
# docs/BENCHMARKS.md). It links glibc statically, which is safe because lifectl never calls the NSS functions
# (getpwnam, getaddrinfo…) that a static glibc cannot serve; its own scratch path, since its flags differ from the
# daemon's.
# BINDIR_SOURCE=DIR installs the lifecycled and lifectl found in DIR instead of building the static release
# binaries (minutes): the tests pass the debug build (swift build --show-bin-path).
PREFIX ?= /usr/local
BINDIR_SOURCE ?=
BINDIR = $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
MANDIR = $(PREFIX)/share/man
COMPLETIONDIR = $(PREFIX)/share/bash-completion/completions
UNITDIR = $(PREFIX)/lib/systemd/system
USERUNITDIR = $(PREFIX)/lib/systemd/user
CONFDIR = /etc/lifecycled
# Where the bus daemon and polkitd read them, whatever the prefix: neither looks under /usr/local.
DBUSPOLICYDIR ?= /usr/share/dbus-1/system.d
POLKITACTIONDIR ?= /usr/share/polkit-1/actions
RELEASE := -c release --static-swift-stdlib --scratch-path .build/static
RELEASE_LIFECTL := -c release --scratch-path .build/static-executable -Xswiftc -static-executable
INSTALLED = $(BINDIR)/lifecycled $(BINDIR)/lifectl \
	$(UNITDIR)/lifecycled.service $(UNITDIR)/lifecycled.socket $(USERUNITDIR)/lifecycled.service \
	$(MANDIR)/man1/lifectl.1 $(MANDIR)/man5/lifecycled.conf.5 $(MANDIR)/man8/lifecycled.8 \
	$(COMPLETIONDIR)/lifectl \
	$(DBUSPOLICYDIR)/org.lifecycled.Lifecycle1.conf $(POLKITACTIONDIR)/org.lifecycled.policy

install: clients $(if $(BINDIR_SOURCE),,deps)
ifeq ($(BINDIR_SOURCE),)
	$(SWIFT) build $(RELEASE) --product lifecycled
	$(SWIFT) build $(RELEASE_LIFECTL) --product lifectl
endif
	binaries="$(BINDIR_SOURCE)"; [ -n "$$binaries" ] || binaries="$$($(SWIFT) build $(RELEASE) --show-bin-path)"; \
	lifectl_binaries="$(BINDIR_SOURCE)"; [ -n "$$lifectl_binaries" ] || lifectl_binaries="$$($(SWIFT) build $(RELEASE_LIFECTL) --show-bin-path)"; \
	install -D -m 0755 "$$binaries/lifecycled" "$(DESTDIR)$(BINDIR)/lifecycled" && \
	install -D -m 0755 "$$lifectl_binaries/lifectl" "$(DESTDIR)$(BINDIR)/lifectl"
	install -d "$(DESTDIR)$(UNITDIR)"
	sed -e 's|^ExecStart=/usr/local/bin/lifecycled |ExecStart=$(BINDIR)/lifecycled |' \
		-e 's|^ExecReload=/usr/local/bin/lifectl |ExecReload=$(BINDIR)/lifectl |' systemd/lifecycled.service \
		> "$(DESTDIR)$(UNITDIR)/lifecycled.service"
	grep -q '^ExecStart=$(BINDIR)/lifecycled ' "$(DESTDIR)$(UNITDIR)/lifecycled.service" \
		&& grep -q '^ExecReload=$(BINDIR)/lifectl ' "$(DESTDIR)$(UNITDIR)/lifecycled.service" \
		|| { echo "make install: could not set ExecStart= and ExecReload= in lifecycled.service" >&2; exit 1; }
	chmod 0644 "$(DESTDIR)$(UNITDIR)/lifecycled.service"
	install -m 0644 systemd/lifecycled.socket "$(DESTDIR)$(UNITDIR)/lifecycled.socket"
	install -d "$(DESTDIR)$(USERUNITDIR)"
	sed -e 's|^ExecStart=/usr/local/bin/lifecycled |ExecStart=$(BINDIR)/lifecycled |' \
		-e 's|^ExecReload=/usr/local/bin/lifectl |ExecReload=$(BINDIR)/lifectl |' systemd/user/lifecycled.service \
		> "$(DESTDIR)$(USERUNITDIR)/lifecycled.service"
	grep -q '^ExecStart=$(BINDIR)/lifecycled ' "$(DESTDIR)$(USERUNITDIR)/lifecycled.service" \
		|| { echo "make install: could not set ExecStart= in the user's lifecycled.service" >&2; exit 1; }
	chmod 0644 "$(DESTDIR)$(USERUNITDIR)/lifecycled.service"
	install -D -m 0644 docs/man/lifectl.1 "$(DESTDIR)$(MANDIR)/man1/lifectl.1"
	install -D -m 0644 docs/man/lifecycled.conf.5 "$(DESTDIR)$(MANDIR)/man5/lifecycled.conf.5"
	install -D -m 0644 docs/man/lifecycled.8 "$(DESTDIR)$(MANDIR)/man8/lifecycled.8"
	install -D -m 0644 completion/lifectl.bash "$(DESTDIR)$(COMPLETIONDIR)/lifectl"
	install -D -m 0644 share/dbus-1/system.d/org.lifecycled.Lifecycle1.conf "$(DESTDIR)$(DBUSPOLICYDIR)/org.lifecycled.Lifecycle1.conf"
	install -D -m 0644 share/polkit-1/actions/org.lifecycled.policy "$(DESTDIR)$(POLKITACTIONDIR)/org.lifecycled.policy"
	[ -e "$(DESTDIR)$(CONFDIR)/lifecycled.conf" ] || install -D -m 0644 Config/lifecycled.conf "$(DESTDIR)$(CONFDIR)/lifecycled.conf"
	install -d "$(DESTDIR)$(CONFDIR)/apps"
	$(MAKE) -s -C clients/c install PREFIX="$(PREFIX)" LIBDIR="$(LIBDIR)" DESTDIR="$(DESTDIR)"
	@if [ "$(UNITDIR)" != /etc/systemd/system ] && [ -e "$(DESTDIR)/etc/systemd/system/lifecycled.service" ]; then \
		echo "Note: $(DESTDIR)/etc/systemd/system/lifecycled.service (an earlier install?) overrides $(UNITDIR)/lifecycled.service"; \
	fi
	@[ -n "$(DESTDIR)" ] || echo "Next: systemctl daemon-reload && systemctl enable --now lifecycled.socket lifecycled.service"
	@[ -n "$(DESTDIR)" ] || echo "  or, in a desktop session: systemctl --user daemon-reload && systemctl --user enable --now lifecycled"

uninstall:
	rm -f $(addprefix "$(DESTDIR),$(addsuffix ",$(INSTALLED)))
	$(MAKE) -s -C clients/c uninstall PREFIX="$(PREFIX)" LIBDIR="$(LIBDIR)" DESTDIR="$(DESTDIR)"
	@echo "Kept the configuration in $(DESTDIR)$(CONFDIR)"

# The Debian packages (docs/PACKAGING.md): lifecycled_$(DEB_VERSION)_ARCH.deb (the daemon, lifectl, the units,
# /etc/lifecycled), liblifecycle1 (the shared library) and liblifecycle-dev (header, static library, pkg-config
# file, man pages), built with dpkg-deb from a `make install DESTDIR=` tree with PREFIX=/usr, then checked with
# lintian (an error fails the build). The version is the daemon's own (daemonVersion, the one place it is written)
# and a build number: `make deb DEB_BUILD=2` makes a package that upgrades the one of DEB_BUILD=1.
# BINDIR_SOURCE=DIR packages prebuilt lifecycled and lifectl, as for make install. dpkg-dev (dpkg-shlibdeps)
# and lintian come through apt, only when missing.
VERSION := $(shell sed -n 's/^public let daemonVersion = "\(.*\)"$$/\1/p' Sources/LifecycleDaemon/Daemon/Daemon.swift)
DEB_BUILD ?= 1
DEB_VERSION ?= $(VERSION)-$(DEB_BUILD)
DEB_OUTDIR ?= $(CURDIR)
# dpkg-deb's compressor, and LINTIAN=0 to skip lintian (the tests' second build).
DEB_COMPRESS ?= xz
LINTIAN ?= 1
.PHONY: deb deb-deps
deb: deb-deps
	@[ -n "$(VERSION)" ] || { echo "make deb: no daemonVersion in Sources/LifecycleDaemon/Daemon/Daemon.swift" >&2; exit 1; }
	VERSION="$(DEB_VERSION)" BINDIR_SOURCE="$(BINDIR_SOURCE)" OUTDIR="$(DEB_OUTDIR)" DEB_COMPRESS="$(DEB_COMPRESS)" \
		LINTIAN="$(LINTIAN)" bash packaging/build-deb.sh

deb-deps:
	@build-aux/apt-need --no-recommends "make deb" dpkg-shlibdeps=dpkg-dev lintian=lintian

# lifecycled beside supervisord, s6 and runit (installed from Debian's packages, run in private temp folders)
# and the physical floors, the display and desktop benchmarks and the desktop beside xsuspender, in one run that writes
# the whole report: docs/BENCHMARKS.md, its raw tables in docs/bench/ and its chart. About 20 min on 2 cores;
# `bash bench/run.sh --smoke` (N=10, one repetition) in about a minute, `--large` adds 10,000 apps.
bench: deps
	bash bench/run.sh

# The bench in smoke mode (N=10, one repetition, every part small; a few minutes after the build): CI runs it to keep the harness
# working. Never writes docs/; exits non-zero only when the harness breaks, never for a missed target.
bench-smoke: deps
	bash bench/run.sh --smoke

# lifecycled under a real systemd (root; docs/SYSTEMD-CONTAINER.md; CI runs SYSTEMD_MODE=all, make test does not). SYSTEMD_MODE=container (default):
# PID 1 in a systemd-nspawn container on a debootstrap tree: systemctl start/status/reload/restart/stop,
# journalctl, the apps' cgroups, then a user's systemctl --user lifecycled adopting, freezing and thawing a scope;
# then the package case in a boot of its own (make deb twice, apt install, an upgrade that keeps the apps running,
# apt remove and purge: docs/PACKAGING.md); first run about 5 min and 380 MB under /var/tmp/lifecycled-nspawn,
# later runs about 2.5 min (the incremental release build, two boots of about 16 s, the packages, a boot of 13 s). SYSTEMD_MODE=vm: Debian's kernel and systemd booted in qemu on pure cgroup2 with its controllers:
# crash recovery after SIGKILL, SIGSEGV and a watchdog timeout of the daemon, then the memory squeeze (jetsam beside
# earlyoom and systemd-oomd, docs/MEMORY.md; SQUEEZE=0 skips it); first run about 6 min and 900 MB under
# /var/tmp/lifecycled-vm, later runs about 4 min under TCG on a quiet host (9 beside other work), 1.5 without the
# squeeze (seconds of boot under KVM).
# SYSTEMD_MODE=all: both.
SYSTEMD_MODE ?= container
test-systemd: test-systemd-deps
	@case "$(SYSTEMD_MODE)" in \
		container) bash systemd/test-in-container.sh ;; \
		vm) bash systemd/test-in-vm.sh ;; \
		all) bash systemd/test-in-container.sh; c=$$?; bash systemd/test-in-vm.sh; v=$$?; [ $$c = 0 ] && [ $$v = 0 ] ;; \
		*) echo "SYSTEMD_MODE: container, vm or all" >&2; exit 2 ;; \
	esac

# What both modes need on the host: systemd-nspawn, debootstrap, qemu (without its recommends: no GUI),
# e2fsprogs for the VM's images, and dpkg-dev and lintian for the container's package case (make deb).
test-systemd-deps:
	@build-aux/apt-need --no-recommends "make test-systemd boots a container and a VM" \
		systemd-nspawn=systemd-container debootstrap=debootstrap qemu-system-x86_64=qemu-system-x86 debugfs=e2fsprogs \
		readelf=binutils dpkg-shlibdeps=dpkg-dev lintian=lintian

# The soak test (root): 500 real apps, random transitions and notification storms from 4 controller processes for
# 8 minutes (SOAK_SECONDS=… to change), then the invariants (one active app, suspended apps stopped, no zombie, the
# daemon's fds and RSS back to their level, no unknown process, the daemon answers); about 10 min in all. soak-smoke
# is the CI version: 60 apps, 3 controllers, 40 s (about 75 s). Both build into their own scratch path
# (SOAK_SCRATCH, default /tmp/soak-build) and run in a private temporary directory (soak/README.md).
soak: deps
	SWIFT="$(SWIFT)" bash soak/run.sh

soak-smoke: deps
	SWIFT="$(SWIFT)" bash soak/run.sh --smoke

# Fuzzing (docs/RELIABILITY.md): libFuzzer on the line framer and the messages of both sockets (fuzz-protocol),
# on the config parser (fuzz-config) and on liblifecycle's line reader and dispatch (fuzz-linereader, C, clang), built with -sanitize=fuzzer,address from Fuzz/, starting from Fuzz/corpus/;
# and on the Python package's reader and dispatch (fuzz-python: atheris from PyPI, in a venv in FUZZ_SCRATCH).
# `make fuzz` runs each for FUZZ_SECONDS (default 600); `make fuzz-smoke`, the CI version, for FUZZ_SMOKE_SECONDS
# (default 60). The build (FUZZ_SCRATCH, default .build/fuzz) takes a few minutes the first time, seconds after.
# A finding stops with the input's path: add it to Fuzz/regressions/ (FuzzRegressionTests replays it) and fix.
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_SECONDS ?= 60
FUZZ_SCRATCH ?= $(CURDIR)/.build/fuzz
.PHONY: fuzz fuzz-smoke check-sanitizers

fuzz: deps
	SWIFT="$(SWIFT)" FUZZ_SCRATCH="$(FUZZ_SCRATCH)" bash Fuzz/run.sh $(FUZZ_SECONDS)

fuzz-smoke: deps
	SWIFT="$(SWIFT)" FUZZ_SCRATCH="$(FUZZ_SCRATCH)" bash Fuzz/run.sh $(FUZZ_SMOKE_SECONDS)

# The whole test suite built with AddressSanitizer, then with ThreadSanitizer (the daemon and lifectl the
# integration tests run are the sanitized builds too), each in its own scratch path under SANITIZER_SCRATCH.
# LeakSanitizer is off: the Swift runtime's caches look like leaks at exit (leaks are checked by the RSS tests).
# About 10 min on 2 cores from a clean scratch path (docs/RELIABILITY.md says what they require).
SANITIZER_SCRATCH ?= $(CURDIR)/.build
check-sanitizers: deps
	ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --sanitize=address --scratch-path "$(SANITIZER_SCRATCH)/asan"
	TSAN_OPTIONS=halt_on_error=0 $(SWIFT) test --sanitize=thread --scratch-path "$(SANITIZER_SCRATCH)/tsan"

clean:
	rm -rf .build
	$(MAKE) -C clients/c clean
