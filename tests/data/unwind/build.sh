#!/bin/sh
# Build the unwinding test programs (chain.h) into $1: chain (C), chain_cxx (C++) and their
# libraries, all at -O2 without frame pointers but libpp_chain_fp.so, built with them. With a
# second argument "fp" everything has frame pointers (the benchmarks' same-stacks peer).
set -eu
src=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
cd "$out"
nofp="-O2 -g -fomit-frame-pointer -fno-optimize-sibling-calls -I$src"
[ "${2:-}" = fp ] && nofp="-O2 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -I$src"
cc -O2 -g -fno-omit-frame-pointer -fPIC -shared -I"$src" -o libpp_chain_fp.so "$src/chain_fp.c"
cc $nofp -fPIC -shared -o libpp_chain.so "$src/chain_lib.c" -L. -lpp_chain_fp -Wl,-rpath,"$out"
cc $nofp -o chain "$src/chain_main.c" -L. -lpp_chain -Wl,-rpath,"$out"
c++ $nofp -o chain_cxx "$src/chain_main.cc" -L. -lpp_chain -Wl,-rpath,"$out"
