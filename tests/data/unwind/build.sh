#!/bin/sh
# Build the unwinding test programs (chain.h) into $1: chain (C), chain_cxx (C++) and their
# libraries, all at -O2 without frame pointers but libpp_chain_fp.so, built with them. With a
# second argument "fp" everything has frame pointers (the benchmarks' same-stacks peer); with
# "lld" everything is linked by LLVM's lld (its segments share file pages: p_vaddr = p_offset
# + 0x1000), which exits 3 when lld is not installed.
set -eu
src=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
cd "$out"
nofp="-O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls -I$src"
ld=
[ "${2:-}" = fp ] && nofp="-O2 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -I$src"
if [ "${2:-}" = lld ]; then
	command -v ld.lld >/dev/null || exit 3
	ld=-fuse-ld=lld
fi
cc $ld -O2 -g -fno-omit-frame-pointer -fPIC -shared -I"$src" -o libpp_chain_fp.so "$src/chain_fp.c"
cc $ld $nofp -fPIC -shared -o libpp_chain.so "$src/chain_lib.c" -L. -lpp_chain_fp -Wl,-rpath,"$out"
cc $ld $nofp -o chain "$src/chain_main.c" -L. -lpp_chain -Wl,-rpath,"$out"
c++ $ld $nofp -o chain_cxx "$src/chain_main.cc" -L. -lpp_chain -Wl,-rpath,"$out"
