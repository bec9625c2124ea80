#!/bin/bash
# A test CI runs, not make test: lifecycled under a real systemd (252, Debian bookworm) booted as init of a real kernel (Debian's
# cloud kernel) in a qemu VM, on pure cgroup2 with its controllers (cpu, io, memory), which a container cannot have.
# What it proves: crash recovery. The apps live in systemd scopes, the daemon's service cgroup stays a leaf, and
# after a SIGKILL, a SIGSEGV and a watchdog timeout of the main process systemd starts the daemon again, which
# re-adopts every app and leaves none stopped. Then a real memory squeeze in the apps' slice (systemd/vm-squeeze.sh):
# memory protection of the apps in front, lifecycled's jetsam, and what earlyoom and systemd-oomd do with the same.
#
#   sudo systemd/test-in-vm.sh                    # from the repository root; needs root
#   make test-systemd-vm
#
# Steps (docs/SYSTEMD-CONTAINER.md, "The VM mode"):
#   1. builds lifecycled and lifectl as test-in-container.sh does (or takes LIFECYCLED_BIN_DIR);
#   2. debootstraps a bookworm tree with systemd, udev and linux-image-cloud-amd64 ONCE into $WORK/root and makes a
#      root disk image of it ($WORK/root.img, cached); the VM runs it with -snapshot, so the image never changes;
#   3. puts the binaries (with the squeeze's app and squeezer, built static here), the unit and the check scripts on
#      a second small disk, mounted at /check in the VM;
#   4. boots the VM (KVM when a guest runs under it, else TCG), whose check unit writes PASS/FAIL lines to /check/out
#      and powers off; the results are read back from the disk image with debugfs.
#
# Environment:
#   LIFECYCLED_VM_DIR        work directory (default /var/tmp/lifecycled-vm)
#   LIFECYCLED_VM_MIRROR     Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   LIFECYCLED_VM_REBUILD=1  debootstrap the tree and make the image again
#   LIFECYCLED_VM_TIMEOUT    seconds the VM may run (default 1200 with the squeeze, 600 without)
#   SQUEEZE=0                skip the memory squeeze (systemd/vm-squeeze.sh, docs/MEMORY.md), which runs by default
#   LIFECYCLED_VM_ACCEL      auto (default: KVM if a guest runs under it, else TCG), kvm or tcg
#   LIFECYCLED_VM_PLACEMENT  "cgroupfs" runs the daemon with LIFECYCLED_PLACEMENT=cgroupfs (its delegated-subtree
#                            placement, for comparison: that is the run where crash recovery fails)
#   LIFECYCLED_BIN_DIR       use lifecycled and lifectl from this directory instead of building them
#
# Needs: root, qemu-system-x86 (apt-get install --no-install-recommends qemu-system-x86), debootstrap,
# e2fsprogs (mkfs.ext4 -d, debugfs), a C compiler with a static libc (cc, libc6-dev), swift (unless
# LIFECYCLED_BIN_DIR).
set -u -o pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
WORK=${LIFECYCLED_VM_DIR:-/var/tmp/lifecycled-vm}
ROOT=$WORK/root
IMAGE=$WORK/root.img
MIRROR=${LIFECYCLED_VM_MIRROR:-http://deb.debian.org/debian}
SQUEEZE=${SQUEEZE:-1}
# The squeeze takes minutes of the VM under TCG (docs/MEMORY.md); every wait in it has its own bound, so this one
# only stops a VM that hangs.
if [ "$SQUEEZE" = 0 ]; then TIMEOUT=${LIFECYCLED_VM_TIMEOUT:-600}; else TIMEOUT=${LIFECYCLED_VM_TIMEOUT:-1200}; fi
PLACEMENT=${LIFECYCLED_VM_PLACEMENT:-}
t_start=$(date +%s)

die() { echo "test-in-vm: $*" >&2; exit 2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and the image need it)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: apt-get install --no-install-recommends qemu-system-x86"
command -v debugfs >/dev/null && command -v mkfs.ext4 >/dev/null || die "e2fsprogs missing"
command -v cc >/dev/null || die "cc missing (the squeeze's app and squeezer are built here): apt-get install gcc libc6-dev"
mkdir -p "$WORK" || die "cannot create $WORK"

# --- 1. binaries ------------------------------------------------------------------------------------------------
if [ -n "${LIFECYCLED_BIN_DIR:-}" ]; then
    BIN=$LIFECYCLED_BIN_DIR
else
    command -v swift >/dev/null || die "swift missing (or set LIFECYCLED_BIN_DIR)"
    t=$(now)
    echo "== building lifecycled and lifectl (release, static Swift stdlib) from a copy of $here"
    rm -rf "$WORK/src" && mkdir -p "$WORK/src"
    (cd "$here" && tar --exclude=./.build --exclude=./.git -cf - .) | tar -C "$WORK/src" -xf - || die "copying the sources failed"
    for p in lifecycled lifectl; do
        (cd "$WORK/src" && swift build -c release --static-swift-stdlib --scratch-path "$WORK/build" --product "$p") \
            >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; die "swift build --product $p failed ($WORK/build.log)"; }
    done
    BIN=$WORK/build/release
    echo "   built in $(elapsed "$t") s"
fi
for b in lifecycled lifectl; do [ -x "$BIN/$b" ] || die "$BIN/$b missing"; done

# --- 2. the tree and its root image, built once ---------------------------------------------------------------
if [ "${LIFECYCLED_VM_REBUILD:-0}" = 1 ]; then rm -rf "$ROOT" "$IMAGE"; fi
# The libraries the binaries link (libsystemd, libxcb for the x11 source, libpulse for the audio rail): a tree
# cached before one of them was added is built again, and a tree that still lacks one stops the run with its name.
needed=$(readelf -d "$BIN/lifecycled" "$BIN/lifectl" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | sort -u)
missing_in_tree() { local lib; for lib in $needed; do ls "$ROOT"/usr/lib/*/"$lib" "$ROOT"/lib/*/"$lib" >/dev/null 2>&1 || echo "$lib"; done; }
if [ -n "$(missing_in_tree)" ]; then rm -f "$ROOT/.lifecycled-tree-complete"; fi
# The squeeze's comparison needs earlyoom and systemd-oomd in the tree: one cached before they were added is built again.
for program in usr/bin/earlyoom lib/systemd/systemd-oomd; do
    [ -e "$ROOT/$program" ] || rm -f "$ROOT/.lifecycled-tree-complete"
done
if [ ! -e "$ROOT/.lifecycled-tree-complete" ]; then
    command -v debootstrap >/dev/null || die "debootstrap missing: apt-get install debootstrap"
    rm -rf "$ROOT" "$IMAGE"
    t=$(now)
    echo "== debootstrap --variant=minbase bookworm $ROOT with a kernel (once; cached afterwards)"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,libxcb1,libxcb-res0,libpulse0,udev,kmod,initramfs-tools,linux-image-cloud-amd64,earlyoom,systemd-oomd \
        bookworm "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed ($WORK/debootstrap.log)"; }
    # Installed for the squeeze's comparison only, which starts them itself: at boot they would act on every check.
    find "$ROOT/etc/systemd/system" -type l \( -name earlyoom.service -o -name 'systemd-oomd.*' \) -path '*.wants/*' -delete
    touch "$ROOT/.lifecycled-tree-complete"
    echo "   debootstrap took $(elapsed "$t") s"
fi
lacking=$(missing_in_tree)
[ -z "$lacking" ] || die "the tree lacks $(echo $lacking) that lifecycled links: add its package to debootstrap's --include"
KERNEL=$(ls "$ROOT"/boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
INITRD=$(ls "$ROOT"/boot/initrd.img-* 2>/dev/null | sort -V | tail -1)
[ -n "$KERNEL" ] && [ -n "$INITRD" ] || die "no kernel or initrd in $ROOT/boot (rebuild with LIFECYCLED_VM_REBUILD=1)"
if [ ! -e "$IMAGE" ]; then
    t=$(now)
    : >"$ROOT/etc/machine-id"
    echo lifecycled-vm >"$ROOT/etc/hostname"
    mkdir -p "$ROOT/check"
    printf '/dev/vda / ext4 rw,errors=remount-ro 0 1\n/dev/vdb /check ext4 rw,nofail 0 2\n' >"$ROOT/etc/fstab"
    # The check unit lives in the image; what it runs comes from the check disk at each boot.
    cat >"$ROOT/etc/systemd/system/lifecycled-check.service" <<'EOF'
[Unit]
Description=lifecycled checks (test-in-vm.sh)
RequiresMountsFor=/check
[Service]
Type=exec
ExecStart=/bin/bash /check/check.sh
StandardOutput=journal+console
StandardError=journal+console
EOF
    size=$(( $(du -sm "$ROOT" | cut -f1) + 600 ))
    mkfs.ext4 -q -F -L lifecycled-root -d "$ROOT" "$IMAGE" "${size}M" >/dev/null 2>&1 || { rm -f "$IMAGE"; die "mkfs.ext4 -d $ROOT failed"; }
    echo "   root image made in $(elapsed "$t") s"
fi
echo "== tree: $ROOT; image $IMAGE ($(du -sm "$IMAGE" | cut -f1) MB used); kernel $(basename "$KERNEL")"

# --- 3. the check disk --------------------------------------------------------------------------------------------
# One check disk per placement, so that the two runs can go side by side.
CHECK=$WORK/check${PLACEMENT:+-$PLACEMENT}
CHECKIMG=$CHECK.img
OUT=$WORK/out${PLACEMENT:+-$PLACEMENT}
rm -rf "$CHECK" "$OUT"; mkdir -p "$CHECK/bin" "$CHECK/out" "$OUT"
cp "$BIN/lifecycled" "$BIN/lifectl" "$CHECK/bin/"
cp "$here/systemd/lifecycled.service" "$CHECK/"
cp "$here/systemd/vm-check.sh" "$CHECK/check.sh"
# The squeeze runs unless SQUEEZE=0 (a quicker run of the other checks).
if [ "$SQUEEZE" != 0 ]; then cp "$here/systemd/vm-squeeze.sh" "$CHECK/squeeze.sh"; fi
# The squeeze's app (a real client, on liblifecycle's sources) and its squeezer, static: the VM's tree has no compiler.
cc -O2 -std=gnu11 -static -I"$here/clients/c/include" -o "$CHECK/bin/vm-app" "$here/systemd/vm-app.c" "$here"/clients/c/src/*.c \
    && cc -O2 -std=gnu11 -static -o "$CHECK/bin/vm-squeezer" "$here/systemd/vm-squeezer.c" \
    || die "building the squeeze's vm-app and vm-squeezer failed"
echo "${PLACEMENT}" >"$CHECK/placement"
mkfs.ext4 -q -F -L lifecycled-check -d "$CHECK" "$CHECKIMG" 512M >/dev/null 2>&1 || die "mkfs.ext4 of the check disk failed"

# --- 4. boot ------------------------------------------------------------------------------------------------------
# KVM when a guest really runs under it: /dev/kvm can be there and KVM_CREATE_VM succeed while a guest stalls after
# its first lines or never starts (nested in some VMs). So the kernel is booted under KVM with no root disk: where
# KVM works it panics ("Unable to mount root fs") and qemu exits (-no-reboot) within seconds.
accel="-accel tcg,thread=multi"
case ${LIFECYCLED_VM_ACCEL:-auto} in
    tcg) ;;
    kvm) accel="-accel kvm" ;;
    auto)
        if [ -w /dev/kvm ]; then
            probe=$WORK/kvm-probe-$$.log
            timeout 20 qemu-system-x86_64 -accel kvm -m 256 -nodefaults -no-reboot -display none -nic none \
                -serial "file:$probe" -kernel "$KERNEL" -append "console=ttyS0 panic=-1" >/dev/null 2>&1
            if grep -qs -e 'Unable to mount root' -e 'Kernel panic' "$probe"; then
                accel="-accel kvm"
            else
                echo "   /dev/kvm is there, but a kernel under KVM did not reach its panic without a root disk in 20 s: TCG"
            fi
            rm -f "$probe"
        fi ;;
    *) die "LIFECYCLED_VM_ACCEL: auto, kvm or tcg" ;;
esac
echo "== booting the VM ($accel, placement: ${PLACEMENT:-default})"
t=$(now)
timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 $accel -m 1536 -smp 2 -nodefaults -no-reboot \
    -display none -serial "file:$OUT/console.log" -nic none \
    -kernel "$KERNEL" -initrd "$INITRD" \
    -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 systemd.wants=lifecycled-check.service panic=-1" \
    -drive "file=$IMAGE,if=virtio,format=raw,snapshot=on" \
    -drive "file=$CHECKIMG,if=virtio,format=raw" >"$OUT/qemu.log" 2>&1
rc=$?
dt=$(elapsed "$t")
echo "   VM ran $dt s (boot, checks, poweroff); qemu exit status $rc"
for f in results details; do debugfs -R "dump /out/$f $OUT/$f" "$CHECKIMG" >/dev/null 2>&1; done
failed=0
if [ ! -s "$OUT/results" ]; then
    echo "FAIL VM boots: no results; console:"; tail -40 "$OUT/console.log"; cat "$OUT/qemu.log"
    failed=1
else
    grep -E '^(PASS|FAIL|SKIP|INFO)' "$OUT/results" | sed 's/^/   /'
    grep -q '^DONE' "$OUT/results" || { echo "   FAIL checks did not finish (timeout ${TIMEOUT}s?)"; failed=1; }
    grep -q '^FAIL' "$OUT/results" && failed=1
fi
echo "   details: $OUT/details, console: $OUT/console.log"
echo "== cost: $(( $(date +%s) - t_start )) s wall in total (VM $dt s); disk: tree $(du -sm "$ROOT" | cut -f1) MB, image $(du -sm "$IMAGE" | cut -f1) MB"
if [ $failed = 0 ]; then echo "== PASS"; else echo "== FAIL"; fi
exit $failed
