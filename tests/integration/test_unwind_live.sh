#!/bin/bash
# Unwinding with .eh_frame tables in the shim, live (--user-unwind auto, the default):
#  1. tests/data/unwind's chains (C and C++, -O2 without frame pointers, through two shared
#     libraries, one with frame pointers in the middle): every sample in the leaf holds the
#     whole expected chain, in order, at least as often as perf --call-graph dwarf does on
#     the same program; frame pointers alone (--user-unwind fp) lose it; tables only
#     (--user-unwind dwarf) keep it; with the frame-pointer library's table taken away, auto
#     steps through it by frame pointers and dwarf stops there, counted;
#  2. a command started by record: its first samples may walk frame pointers, then tables;
#  3. churn: 300 short-lived processes under record: those installed before they ended are
#     released on exit, the files they share compiled once, nothing left live at the end;
#  4. restarts: a second start reads every table the first compiled from the table cache, and
#     symbol tables from the symbol table cache, and compiles none, the chains as whole;
#     altered cache files are refused and compiled again.
# Needs root, BPF and perf events; exits 77 otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof

T=$PP_TMP
DATA=$PP_SOURCE_DIR/tests/data/unwind
sh "$DATA/build.sh" "$T/chain" >/dev/null || pp_skip "the test programs did not build (cc, c++)"

SHARE="$PP_PYTHON $PP_SOURCE_DIR/tests/integration/chain_share.py"
# whole_share FOLDED EXPECTED: "share whole/spin" of pp_spin samples holding the chain
whole_share() { $SHARE folded "$1" "$2"; }

perf_share() { # PROG: perf --call-graph dwarf's share on the same program, or "" without perf
	command -v perf >/dev/null || return 0
	(cd "$T/chain" && PP_CHAIN_SPIN=1.5 perf record -q -e cpu-clock -F 499 --call-graph dwarf \
		-o "$T/$1.perf" "./$1" >/dev/null 2>&1) || return 0
	perf script -i "$T/$1.perf" -F ip,sym 2>/dev/null | $SHARE perf "$DATA/$1.expected" |
		cut -d' ' -f1
}

# record_chain NAME PROG LIBDIR SECONDS ARGS...: PROG from the chain build, spinning (its
# libraries from LIBDIR first, when given), recorded with -p and ARGS for SECONDS into
# NAME.folded / NAME.out; sets share and counts (whole_share) for it
record_chain() {
	local name=$1 prog=$2 libdir=$3 secs=$4 pid
	shift 4
	# it spins until killed: beside the matrix, loading the shim took longer than a spin of
	# twice the capture, and the program was gone before it was sampled
	(cd "${CHAIN_DIR:-$T/chain}" && LD_LIBRARY_PATH=$libdir PP_CHAIN_SPIN=600 exec "./$prog") &
	pid=$!
	PP_BG_PIDS="${PP_BG_PIDS:-} $pid"
	# running once its chain library is mapped (a busy machine is slow to start it)
	pp_wait_line "$pid" "/proc/$pid/maps" "${libdir:-libpp_chain}" 30 ||
		pp_fail "$name: $prog did not load its libraries${libdir:+ from $libdir}"
	pp_run "$T/$name" "$PEBSPROF" record -e cpu-clock -F 999 -d "$secs" -p "$pid" "$@" \
		-o "$T/$name.folded"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ "$PP_RC" -eq 0 ] || { pp_fail "$name: record exited $PP_RC"; pp_show "$T/$name.err"; }
	read -r share counts <<<"$(whole_share "$T/$name.folded" "$DATA/$prog.expected")"
}

for prog in chain chain_cxx; do
	record_chain "$prog" "$prog" "" 2
	peer=$(perf_share "$prog")
	grep '^unwind' "$T/$prog.out" | sed 's/^/    /'
	echo "    whole chain in $counts samples in the leaf ($share); perf --call-graph dwarf: ${peer:-not run}"
	if "$PP_PYTHON" -c "import sys; s=$share; p=${peer:-0}; sys.exit(0 if s >= 0.95 and s >= p else 1)"; then
		pp_ok "$prog: the whole $(wc -l <"$DATA/$prog.expected")-frame chain in $counts samples, perf's share ${peer:-n/a}"
	else
		pp_fail "$prog: the whole chain in $counts samples ($share), perf's share ${peer:-n/a}"
	fi
	grep -q 'unwinding: [1-9][0-9]* frames by table' "$T/$prog.out" &&
		pp_ok "$prog: frames unwound by table counted" ||
		pp_fail "$prog: no frames by table in the summary"
done

# lld lays segments out sharing file pages (p_vaddr = p_offset + 0x1000): every table must be
# placed by the executable segment, or the walk reads wrong rows and invents callers
if sh "$DATA/build.sh" "$T/chain_lld" lld >/dev/null 2>&1; then
	for prog in chain chain_cxx; do
		CHAIN_DIR=$T/chain_lld record_chain "lld_$prog" "$prog" "" 2
		bad=$($SHARE edges "$T/lld_$prog.folded" "$DATA/$prog.expected")
		"$PP_PYTHON" -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" &&
			pp_ok "lld: $prog's whole chain in $counts samples" ||
			pp_fail "lld: $prog's whole chain in $counts samples only ($share)"
		pp_check "lld: $prog: no sample with an invented caller ($bad)" [ "${bad%%/*}" -eq 0 ]
	done
else
	pp_skip_check "lld: ld.lld is not installed (Debian package lld)"
fi

# frame pointers alone lose the chain on the same program: the test above can fail
record_chain fp chain "" 1 --user-unwind fp
"$PP_PYTHON" -c "import sys; sys.exit(0 if $share < 0.05 else 1)" &&
	pp_ok "--user-unwind fp: the whole chain in $counts samples only" ||
	pp_fail "--user-unwind fp: the whole chain in $counts samples (frame pointers cannot)"

# mixed in the shim: libpp_chain_fp.so without .eh_frame_hdr has no table, so its two frames
# take frame-pointer steps between table frames; in dwarf mode the stack ends there
mkdir -p "$T/notable"
cp "$T/chain/libpp_chain_fp.so" "$T/notable/"
objcopy --remove-section=.eh_frame_hdr "$T/notable/libpp_chain_fp.so" 2>/dev/null
for mode in auto dwarf; do
	record_chain "mixed-$mode" chain "$T/notable" 1 --user-unwind "$mode"
	grep '^unwind' "$T/mixed-$mode.out" | sed 's/^/    /'
	if [ "$mode" = auto ]; then
		"$PP_PYTHON" -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" &&
			grep -q 'unwinding: [0-9]* frames by table, [1-9][0-9]* by frame pointer' \
				"$T/mixed-$mode.out" &&
			pp_ok "auto, a library without a table in the middle: the whole chain in $counts samples (frame-pointer steps there)" ||
			pp_fail "auto, a library without a table in the middle: the whole chain in $counts samples"
	else
		"$PP_PYTHON" -c "import sys; sys.exit(0 if $share < 0.05 else 1)" &&
			grep -q 'walks stopped early [1-9][0-9]* (by table: no CFI [1-9]' "$T/mixed-$mode.out" &&
			pp_ok "dwarf, a library without a table: the stack ends there, counted ($counts whole)" ||
			pp_fail "dwarf, a library without a table: $counts whole, stops not counted"
	fi
done

# tables only (dwarf): every file here has one, the frame-pointer library included
record_chain dwarf chain "" 1 --user-unwind dwarf
"$PP_PYTHON" -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" &&
	grep -q 'unwinding: [0-9]* frames by table, 0 by frame pointer' "$T/dwarf.out" &&
	pp_ok "--user-unwind dwarf: the whole chain in $counts samples, no frame-pointer step" ||
	{ pp_fail "--user-unwind dwarf: the whole chain in $counts samples"; pp_show "$T/dwarf.out"; }

# restarts: the agent started again finds the tables it compiled in its table cache (none
# compiled, the same whole chains); a cache whose files were altered is refused file by file
# and compiled again; without a cache every start compiles
# cnum WORD FILE: the count before WORD on the table cache's line
cnum() { sed -n "s/^unwind table cache: \(.*[^0-9]\)\{0,1\}\([0-9][0-9]*\) $1.*/\2/p" "$2"; }
for run in cold warm altered; do
	[ "$run" = altered ] && for f in "$T/restart-cache"/*.uwt; do
		printf X | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null
	done
	PEBSPROF_UNWIND_TABLE_CACHE=$T/restart-cache PEBSPROF_SYMBOL_TABLE_CACHE=$T/restart-symbols \
		record_chain "restart-$run" chain "" 1
	grep '^unwind table\|^symbol table' "$T/restart-$run.out" | sed 's/^/    /'
	sym_read=$(sed -n 's/^symbol table cache: \([0-9]*\) tables read.*/\1/p' "$T/restart-$run.out")
	sym_stored=$(sed -n 's/^symbol table cache: .* ms, \([0-9]*\) stored.*/\1/p' "$T/restart-$run.out")
	built=$(sed -n 's/^unwind tables: \([0-9]*\) built.*/\1/p' "$T/restart-$run.out")
	read_n=$(cnum 'tables read' "$T/restart-$run.out")
	stored=$(cnum stored "$T/restart-$run.out")
	refused=$(cnum refused "$T/restart-$run.out")
	case $run in
	cold) cold_built=${built:-0}
		pp_check "restart: the first start compiles its ${built:-?} tables and keeps them (stored ${stored:-?})" \
			[ "${built:-0}" -ge 3 -a "${stored:-0}" -eq "${built:-0}" -a "${read_n:-1}" -eq 0 ]
		# the chain's own files were built a moment ago: kept once their ctime settles
		pp_check "restart: the first start keeps the symbol tables of the files it read (${sym_stored:-?}, libc's among them)" \
			[ "${sym_stored:-0}" -ge 1 -a "${sym_read:-1}" -eq 0 ] ;;
	warm) pp_check "restart: the second start compiles none (${built:-?}) and reads ${read_n:-?} of ${cold_built} from the cache" \
			[ "${built:-1}" -eq 0 -a "${read_n:-0}" -eq "$cold_built" ]
		pp_check "restart: the second start reads symbol tables back (${sym_read:-?}), its frames named as the first's" \
			[ "${sym_read:-0}" -ge 1 ] ;;
	altered) pp_check "restart: altered files are refused (${refused:-?}) and compiled again (${built:-?})" \
			[ "${refused:-0}" -eq "$cold_built" -a "${built:-0}" -eq "$cold_built" -a "${read_n:-1}" -eq 0 ] ;;
	esac
	"$PP_PYTHON" -c "import sys; sys.exit(0 if $share >= 0.95 else 1)" &&
		pp_ok "restart ($run): the whole chain in $counts samples" ||
		pp_fail "restart ($run): the whole chain in $counts samples"
done
record_chain restart-none chain "" 1 --unwind-table-cache none
pp_check "without a table cache (none), record says so" \
	grep -q '^unwind table cache: none' "$T/restart-none.out"
pp_check "without a table cache, the tables are compiled" \
	grep -q '^unwind tables: [1-9][0-9]* built' "$T/restart-none.out"

# a command record starts: installed on its first samples, tables after
pp_run "$T/cmd" "$PEBSPROF" record -e cpu-clock -F 999 -o "$T/cmd.folded" -- \
	env PP_CHAIN_SPIN=2 "$T/chain/chain"
read -r share counts <<<"$(whole_share "$T/cmd.folded" "$DATA/chain.expected")"
"$PP_PYTHON" -c "import sys; sys.exit(0 if $PP_RC == 0 and $share >= 0.85 else 1)" &&
	pp_ok "record -- chain: the whole chain in $counts samples (the first walk frame pointers)" ||
	{ pp_fail "record -- chain (exit $PP_RC): the whole chain in $counts samples"; pp_show "$T/cmd.err"; }

# churn: 300 short-lived processes, two at a time
cat >"$T/churn.sh" <<SH
for i in \$(seq 150); do PP_CHAIN_SPIN=0.04 "$T/chain/chain"; done &
for i in \$(seq 150); do PP_CHAIN_SPIN=0.04 "$T/chain/chain"; done
wait
SH
pp_run "$T/churn" "$PEBSPROF" record -e cpu-clock -F 999 -o "$T/churn.folded" -- sh "$T/churn.sh"
line=$(grep '^unwind tables:' "$T/churn.out")
echo "    $line"
num() { echo "$line" | sed -n "s/$1/\1/p"; }
installs=$(num '.* \([0-9]*\) process installs.*')
released=$(num '.* \([0-9]*\) released,.*')
live=$(num '.* \([0-9]*\) live,.*')
built=$(num '^unwind tables: \([0-9]*\) built.*')
used=$(num '.*; \([0-9]*\) of [0-9]* rows.*')
# every process installed is released by its exit (a rescan counts as an install too);
# nothing stays live but the command itself, whose exit ends the capture and may come after
# the last read on a busy machine; the few files they all map are compiled once
if [ "$PP_RC" -eq 0 ] && [ "${installs:-0}" -ge 100 ] && [ "${live:-99}" -le 1 ] &&
	[ "${released:-0}" -ge 100 ] && [ "${built:-99}" -le 8 ] && [ "${used:-0}" -lt 100000 ]; then
	pp_ok "churn: $installs installs, $released released, $live live at the end, $built tables built, $used rows"
else
	pp_fail "churn (exit $PP_RC): installs ${installs:-?}, released ${released:-?}, live ${live:-?}, built ${built:-?}, rows ${used:-?}"
	pp_show "$T/churn.err"
fi
pp_finish
