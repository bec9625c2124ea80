#!/bin/sh
# The library as a user gets it: `make install PREFIX=P` into a temporary prefix (after a build with the default
# one), then a program compiled and linked with `pkg-config --cflags --libs lifecycle` and run, and a man page
# for every function the installed header declares. Run by `make check` from clients/c.
set -u
CC=${CC:-cc}
failures=0
fail() { echo "FAIL installed: $*" >&2; failures=$((failures + 1)); }

prefix=$(mktemp -d /tmp/liblifecycle-install.XXXXXX) || exit 1
trap 'rm -rf "$prefix"' EXIT
make -s install PREFIX="$prefix" >"$prefix.log" 2>&1 || { cat "$prefix.log" >&2; rm -f "$prefix.log"; echo "FAIL installed: make install PREFIX=$prefix" >&2; exit 1; }
rm -f "$prefix.log"

# pkg-config: the prefix given at install, and a program that compiles, links and runs with its flags.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --variable=prefix lifecycle)" = "$prefix" ] || fail "lifecycle.pc says prefix=$(pkg-config --variable=prefix lifecycle), not $prefix"
cat >"$prefix/check.c" <<'EOF'
#include <lifecycle.h>
#include <poll.h>
#include <stdio.h>
static int became_active;
static int on_active(lifecycle_message *m, void *userdata) { (void)m; (void)userdata; became_active = 1; return 0; }
int main(void) {
        lifecycle *l;
        if (lifecycle_new_standalone(&l) < 0) return 1;
        lifecycle_callbacks callbacks = { .did_become_active = on_active };
        lifecycle_set_callbacks(l, &callbacks, sizeof callbacks, NULL);
        lifecycle_start(l);
        for (int i = 0; i < 100 && !became_active; i++) {
                struct pollfd p = { lifecycle_get_fd(l), POLLIN, 0 };
                poll(&p, 1, 100);
                while (lifecycle_process(l) > 0) ;
        }
        printf("%s\n", lifecycle_state_to_string(lifecycle_get_state(l)));
        lifecycle_unref(l);
        return became_active ? 0 : 1;
}
EOF
# shellcheck disable=SC2046 # pkg-config's output is a list of flags
if $CC -o "$prefix/check" "$prefix/check.c" $(pkg-config --cflags --libs lifecycle) \
        -Wl,-rpath,"$(pkg-config --variable=libdir lifecycle)" 2>"$prefix/cc.log"; then
    out=$("$prefix/check" 2>"$prefix/stderr.log") || fail "the program linked against $prefix/lib failed: $out"
    [ "$out" = active ] || fail "the program printed '$out', not 'active'"
    [ -s "$prefix/stderr.log" ] && fail "the program wrote to stderr: $(cat "$prefix/stderr.log")"
    ldd "$prefix/check" | grep -q "$prefix/lib/liblifecycle.so.1" || fail "the program does not load $prefix/lib/liblifecycle.so.1"
else
    fail "compiling with pkg-config --cflags --libs lifecycle: $(cat "$prefix/cc.log")"
fi

# Every function of the installed header: a page in man3, itself or a ".so" page naming one that exists and lists
# the function in its NAME section. The header's list is checked against the library's exports too, so that a
# function the parse missed cannot pass unseen.
functions=$($CC -E -P "$prefix/include/lifecycle.h" | tr '\n' ' ' \
    | grep -oE '\blifecycle_[a-z0-9_]+[[:space:]]*\(' | tr -d '( ' | sort -u)
exports=$(nm -D --defined-only "$prefix/lib/liblifecycle.so.1" | awk '$2 == "T" { print $3 }' | sed 's/@.*//' | sort -u)
[ "$functions" = "$exports" ] || fail "the header's functions and the library's exports differ: $(printf '%s\n' "$functions" "$exports" | sort | uniq -u | tr '\n' ' ')"
[ "$(printf '%s\n' "$functions" | wc -l)" -ge 40 ] || fail "found only $(printf '%s\n' "$functions" | wc -l) functions in the header"
man3=$prefix/share/man/man3
for f in $functions; do
    page=$man3/$f.3
    if [ ! -f "$page" ]; then fail "no man page for $f ($page)"; continue; fi
    target=$(sed -n 's/^\.so man3\///p' "$page")
    [ -z "$target" ] || page=$man3/$target
    [ -f "$page" ] || { fail "$f.3 includes $target, which is not installed"; continue; }
    sed -n '/^\.SH NAME/,/\\-/p' "$page" | grep -qw "$f" || fail "$f is not in the NAME section of $(basename "$page")"
done
# The pages the header's comments name, lifecycle_process(3) and the like, are installed too.
for named in $(grep -oE '[a-z_.-]+\(3\)' "$prefix/include/lifecycle.h" | sed 's/(3)$//' | sort -u); do
    [ -f "$man3/$named.3" ] || fail "lifecycle.h names $named(3), which is not installed"
done
if command -v man >/dev/null 2>&1; then
    for f in $functions; do man -w -M "$prefix/share/man" 3 "$f" >/dev/null 2>&1 || fail "man -w 3 $f finds nothing"; done
fi

if [ $failures = 0 ]; then echo "ok   installed: pkg-config prefix, a linked program, man pages for $(printf '%s\n' "$functions" | wc -l) functions"
else echo "FAIL installed: $failures failures"; fi
[ $failures = 0 ]
