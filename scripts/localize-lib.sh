#!/bin/sh
# localize-lib.sh IN.a OUT.a - the installed static library: every object
# of IN.a (the internal libkvtier_internal.a) linked into one relocatable
# object (ld -r), every defined global but kvt_* made local (objcopy), and
# that one object archived as OUT.a.  A program linking OUT.a sees only the
# public API, as it does with libkvtier.so (lib/libkvtier.map); internal
# names such as io_open or arena_init cannot collide with its own.
# Internal names stay global inside the one object, so the library's own
# calls between its files still resolve (ld -r resolves them first).
set -eu
in=$1
out=$2
LD=${LD:-ld}
OBJCOPY=${OBJCOPY:-objcopy}
AR=${AR:-ar}
tmp=$out.tmp.o
"$LD" -r -o "$tmp" --whole-archive "$in"
"$OBJCOPY" -w --keep-global-symbol='kvt_*' "$tmp"
rm -f "$out"
"$AR" rcs "$out" "$tmp"
rm -f "$tmp"
