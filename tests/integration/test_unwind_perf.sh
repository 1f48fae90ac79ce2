#!/bin/bash
# The unwinding test programs (tests/data/unwind) against perf record --call-graph dwarf, the
# independent reference: on each program, built at -O2 without frame pointers (C and C++,
# through two shared libraries, one with frame pointers), perf's stacks in the leaf hold the
# chain written in PROG.expected, in order. The unwinder's tests (test_unwind_walk) require
# the same chain, so both agree with perf. Needs root and perf; exits 77 otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_perf_events
command -v perf >/dev/null || pp_skip "no perf (Debian's linux-perf)"

T=$PP_TMP
DATA=$PP_SOURCE_DIR/tests/data/unwind
sh "$DATA/build.sh" "$T/chain" >/dev/null || pp_skip "the test programs did not build (cc, c++)"

for prog in chain chain_cxx; do
	(cd "$T/chain" && PP_CHAIN_SPIN=1.5 perf record -q -e cpu-clock -F 499 \
		--call-graph dwarf -o "$T/$prog.data" "./$prog" >/dev/null 2>&1)
	perf script -i "$T/$prog.data" -F ip,sym 2>/dev/null >"$T/$prog.txt"
	# every sample in pp_spin: the frames under it must be the expected chain, in order
	if "$PP_PYTHON" - "$T/$prog.txt" "$DATA/$prog.expected" <<'PY'; then
import sys
want = [l.strip() for l in open(sys.argv[2]) if l.strip()]
samples = [[l for l in b.split("\n") if l.strip()]
           for b in open(sys.argv[1]).read().split("\n\n") if b.strip()]
stacks = [[l.split(None, 1)[1].strip() if len(l.split(None, 1)) > 1 else "?" for l in s]
          for s in samples]
spin = [s for s in stacks if s and s[0] == "pp_spin"]
whole = [s for s in spin if s[1:1 + len(want)] == want]
print("    %d samples, %d in pp_spin, %d with the whole %d-frame chain under it"
      % (len(stacks), len(spin), len(whole), len(want)))
bad = [s for s in spin if s[1:1 + len(want)] != want]
if bad:
    print("    first incomplete:", " <- ".join(bad[0][:40]))
sys.exit(0 if spin and len(whole) >= 0.95 * len(spin) else 1)
PY
		pp_ok "$prog: perf --call-graph dwarf shows $prog.expected's chain"
	else
		pp_fail "$prog: perf --call-graph dwarf shows $prog.expected's chain"
	fi
done
pp_finish
