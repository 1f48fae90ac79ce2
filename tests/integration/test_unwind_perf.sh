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
	read -r share counts <<<"$("$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/chain_share.py" \
		perf "$DATA/$prog.expected" <"$T/$prog.txt")"
	echo "    $counts samples in pp_spin with the whole $(wc -l <"$DATA/$prog.expected")-frame chain under it"
	if "$PP_PYTHON" -c "import sys; sys.exit(0 if $share >= 0.95 else 1)"; then
		pp_ok "$prog: perf --call-graph dwarf shows $prog.expected's chain"
	else
		pp_fail "$prog: perf --call-graph dwarf shows $prog.expected's chain ($counts)"
		awk 'BEGIN { RS = "" } /pp_spin/ { print; exit }' "$T/$prog.txt" | head -40
	fi
done
pp_finish
