#!/bin/bash
# Builds lifecycled_VERSION_ARCH.deb, liblifecycle1_… and liblifecycle-dev_… with dpkg-deb from one
# `make install DESTDIR=` staging tree (PREFIX=/usr). Called by `make deb` (docs/PACKAGING.md), which passes:
#   VERSION         the package version (the daemon's version and a build number: 0.1.0-3)
#   BINDIR_SOURCE   prebuilt lifecycled and lifectl, or empty to let make install build the release binaries
#   OUTDIR          where the .deb files go (default: the repository root)
#   DEB_COMPRESS    dpkg-deb's compressor (default xz, Debian's own)
#   LINTIAN         1 (default): run lintian on the result and fail on an error
set -eu -o pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
: "${VERSION:?VERSION unset (make deb sets it)}"
BINDIR_SOURCE=${BINDIR_SOURCE:-}
OUTDIR=${OUTDIR:-$here}
DEB_COMPRESS=${DEB_COMPRESS:-xz}
LINTIAN=${LINTIAN:-1}
ARCH=$(dpkg --print-architecture)
MULTIARCH=$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH)
MAINTAINER="lifecycled maintainers <maintainers@users.noreply.a-seed-93427f5d.example>"

# dpkg-shlibdeps wants a debian/control beside the packages' trees (debian/PACKAGE), as in a source package: an
# empty one is enough, since every library comes from the system, none from these packages.
work=$here/.build/deb
rm -rf "$work" && mkdir -p "$work/debian"
: >"$work/debian/control"
stage=$work/stage

echo "== make install DESTDIR=$stage PREFIX=/usr"
make -s -C "$here" install DESTDIR="$stage" PREFIX=/usr UNITDIR=/lib/systemd/system LIBDIR=/usr/lib/$MULTIARCH \
    ${BINDIR_SOURCE:+BINDIR_SOURCE="$BINDIR_SOURCE"} >"$work/install.log" \
    || { cat "$work/install.log" >&2; exit 1; }

# Debian's layout: binaries stripped of debug sections, man pages gzipped, docs in /usr/share/doc/PACKAGE.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/lifecycled" "$stage/usr/bin/lifectl" \
    "$stage/usr/lib/$MULTIARCH/liblifecycle.so.1".*
strip --strip-debug --remove-section=.comment "$stage/usr/lib/$MULTIARCH/liblifecycle.a"
find "$stage/usr/share/man" -type f -exec gzip -9n {} +
# Shared libraries are not programs: Debian wants them 0644.
chmod 0644 "$stage/usr/lib/$MULTIARCH/liblifecycle.so.1".*

# The three packages' trees, cut from the staging tree.
lib=$work/debian/liblifecycle1
dev=$work/debian/liblifecycle-dev
daemon=$work/debian/lifecycled
move() { # move FROM-TREE TO-TREE PATH…: the paths, relative to the trees
    local from=$1 to=$2; shift 2
    for p in "$@"; do mkdir -p "$to/$(dirname "$p")" && mv "$from/$p" "$to/$p"; done
}
mkdir -p "$lib" "$dev" "$daemon"
(cd "$stage" && move "$stage" "$lib" "usr/lib/$MULTIARCH"/liblifecycle.so.1*)
(cd "$stage" && move "$stage" "$dev" usr/include/lifecycle.h "usr/lib/$MULTIARCH/liblifecycle.so" "usr/lib/$MULTIARCH/liblifecycle.a" \
    "usr/lib/$MULTIARCH/pkgconfig/lifecycle.pc" usr/share/man/man3)
rmdir -p "$stage/usr/lib/$MULTIARCH/pkgconfig" "$stage/usr/include" 2>/dev/null || true
cp -a "$stage/." "$daemon/"

date=$(date -R -d "@$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)")
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
for tree in "$lib" "$dev" "$daemon"; do
    package=$(basename "$tree")
    doc=$tree/usr/share/doc/$package
    install -D -m 0644 "$here/packaging/copyright" "$doc/copyright"
    printf '%s (%s) unstable; urgency=medium\n\n  * Built from %s.\n\n -- %s  %s\n' \
        "$package" "$VERSION" "$commit" "$MAINTAINER" "$date" | gzip -9n >"$doc/changelog.Debian.gz"
    chmod 0644 "$doc/changelog.Debian.gz"
    mkdir -p "$tree/DEBIAN"
done

# The runtime dependencies: dpkg-shlibdeps reads the binaries' NEEDED entries and the installed libraries'
# symbols files, so each dependency carries the lowest version that has every symbol the binaries use.
shlibs() { (cd "$work" && dpkg-shlibdeps -O -e"$1" "${@:2}" 2>"$work/shlibdeps.log" | sed -n 's/^shlibs:Depends=//p') \
    || { cat "$work/shlibdeps.log" >&2; exit 1; }; }
daemon_depends=$(shlibs "$daemon/usr/bin/lifecycled" -e"$daemon/usr/bin/lifectl")
lib_depends=$(shlibs "$lib/usr/lib/$MULTIARCH/liblifecycle.so.1")
[ -n "$daemon_depends" ] && [ -n "$lib_depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependency" >&2; exit 1; }

control() { # control PACKAGE-TREE DEPENDS
    local tree=$1 package; package=$(basename "$1")
    sed -e "s|@VERSION@|$VERSION|" -e "s|@ARCH@|$ARCH|" -e "s|@MAINTAINER@|$MAINTAINER|" -e "s|@SHLIBS@|$2|" \
        -e "s|@SIZE@|$(du -sk --exclude=DEBIAN "$tree" | cut -f1)|" "$here/packaging/$package/control.in" >"$tree/DEBIAN/control"
}
control "$daemon" "$daemon_depends"
control "$lib" "$lib_depends"
control "$dev" ""

# Every file under /etc is the administrator's once installed: dpkg keeps a changed one across upgrades.
(cd "$daemon" && find etc -type f | sed 's|^|/|' | sort) >"$daemon/DEBIAN/conffiles"
install -m 0755 "$here/packaging/lifecycled/postinst" "$here/packaging/lifecycled/prerm" "$here/packaging/lifecycled/postrm" "$daemon/DEBIAN/"
# The library: who provides the soname, and ldconfig run once dpkg is done.
echo "liblifecycle 1 liblifecycle1 (>= ${VERSION%-*})" >"$lib/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$lib/DEBIAN/triggers"
chmod 0644 "$lib/DEBIAN/shlibs" "$lib/DEBIAN/triggers" "$daemon/DEBIAN/conffiles"

mkdir -p "$OUTDIR"
debs=()
for tree in "$daemon" "$lib" "$dev"; do
    (cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
    chmod 0644 "$tree/DEBIAN/md5sums"
    deb=$OUTDIR/$(basename "$tree")_${VERSION}_$ARCH.deb
    dpkg-deb --root-owner-group -Z"$DEB_COMPRESS" --build "$tree" "$deb" >/dev/null
    debs+=("$deb")
    echo "   $deb ($(du -h "$deb" | cut -f1)): Depends: $(dpkg-deb -f "$deb" Depends)"
done

if [ "$LINTIAN" = 1 ]; then
    command -v lintian >/dev/null || { echo "build-deb: lintian missing (apt-get install lintian, or LINTIAN=0)" >&2; exit 1; }
    echo "== lintian (fails on an error; docs/PACKAGING.md explains each warning that stays)"
    lintian --fail-on error --tag-display-limit 0 "${debs[@]}" | sed 's/^/   /'
fi
