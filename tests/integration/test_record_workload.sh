#!/bin/bash
# End-to-end: `pebsprof record` on a workload with known CPU shares (tests/programs/pp_workload),
# its outputs read by independent decoders (go tool pprof, an XML parser), its shares compared
# with the expected 50/30/20 and with `perf record` on the same workload; then the ways of
# choosing what to profile: a command with a child process, -p PID and -a.
# Needs root, BPF and perf events; exits 77 with the reason otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
pp_require_go_pprof

T=$PP_TMP
FUNCS=burn_alpha,burn_beta,burn_gamma
EXPECT=burn_alpha=50,burn_beta=30,burn_gamma=20
TOL=7

# check_profile NAME RAW PID: shares and caller chains of one workload process in a decoded
# pprof profile.
check_profile() {
	local name=$1 raw=$2 pid=$3
	pp_check "$name: burn shares of pid $pid are 50/30/20 +- $TOL" \
		pp_py check-shares pprof "$raw" --pid "$pid" --expect $EXPECT --tol $TOL
	pp_check "$name: burn_alpha <- run_phase <- main" \
		pp_py check-callers pprof "$raw" --pid "$pid" --func burn_alpha --caller run_phase \
		--above main
	pp_check "$name: burn_beta <- run_phase <- main" \
		pp_py check-callers pprof "$raw" --pid "$pid" --func burn_beta --caller run_phase \
		--above main
	pp_check "$name: burn_gamma <- via_gamma <- run_phase <- main" \
		pp_py check-callers pprof "$raw" --pid "$pid" --func burn_gamma --caller via_gamma \
		--above run_phase,main
}

# --- 1. a command: all three outputs, exit status, labels ----------------------------------
# The workloads run for CPU time, not wall time (--cpu-ms): the checks need samples, and on a
# busy machine 6 s of wall time gave the workload 0.6 s of CPU.
pp_log "record -- pp_workload --cpu-ms 1500"
pp_run "$T/main" "$PEBSPROF" record -e cpu-clock -F 999 -o "$T/w.pb.gz" -o "$T/w.folded" \
	-o "$T/w.svg" -- "$PP_WORKLOAD" --pidfile "$T/w.pid" --rusage "$T/w.rusage" --cpu-ms 1500 120
if [ "$PP_RC" -eq 0 ]; then
	pp_ok "record -- workload exits 0"
else
	pp_fail "record -- workload exited $PP_RC (expected 0)"
	pp_show "$T/main.err"
fi
WPID=$(head -n1 "$T/w.pid" 2>/dev/null)
[ -n "$WPID" ] || pp_fail "the workload did not write its pid (did it start?)"
if grep -q burn_alpha "$T/main.out" "$T/main.err"; then
	pp_ok "the summary names the top function burn_alpha"
else
	pp_fail "the summary printed after the capture does not name burn_alpha"
	pp_show "$T/main.out" 20
fi
grep -Eiq 'sample' "$T/main.out" "$T/main.err" && grep -Eiq 'lost|loss' "$T/main.out" "$T/main.err" &&
	pp_ok "the summary reports sample and loss counts" ||
	pp_fail "the summary has no sample/loss counts"
# agent cpu: TOTAL s (main M, unwinder U, ..., exited E): the parts are the total's
cpu_line=$(grep '^agent cpu: ' "$T/main.out")
if echo "$cpu_line" | awk '{
	gsub(/[(),]/, " "); t = $3; n = 0; sum = 0; main = 0
	for (i = 5; i < NF; i += 2) { sum += $(i + 1); n++; if ($i == "main") main = $(i + 1) }
	exit !(t > 0 && main > 0 && n >= 3 && sum >= t - 0.001 * n && sum <= t + 0.02)
}'; then
	pp_ok "the summary gives the agent's CPU by thread, the parts its total: $cpu_line"
else
	pp_fail "no agent cpu line whose parts make its total: '$cpu_line'"
fi

if pp_pprof_raw "$T/w.pb.gz" "$T/w.raw"; then
	pp_ok "go tool pprof decodes w.pb.gz"
	types=$(pp_py sample-types "$T/w.raw" | tr -d ' ' | tr '\n' ' ')
	[ "$types" = "samples/count cpu/nanoseconds " ] &&
		pp_ok "sample types are samples/count cpu/nanoseconds" ||
		pp_fail "sample types are '$types' (expected samples/count cpu/nanoseconds)"
	grep -q '^PeriodType: cpu nanoseconds' "$T/w.raw" && pp_ok "period type cpu/nanoseconds" ||
		pp_fail "period type: $(grep PeriodType "$T/w.raw")"
	pids=$(pp_py label-values "$T/w.raw" pid | tr -d ' ' | tr '\n' ' ')
	[ "$pids" = "$WPID " ] && pp_ok "pid label is the workload's pid $WPID" ||
		pp_fail "pid labels are '$pids' (expected only $WPID)"
	for key in tid thread_name process_name; do
		n=$(pp_py label-values "$T/w.raw" $key | wc -l)
		[ "$n" -ge 1 ] && pp_ok "samples carry label $key" || pp_fail "no sample has label $key"
	done
	pp_py label-values "$T/w.raw" process_name | grep -q pp_workload &&
		pp_ok "process_name label is pp_workload" ||
		pp_fail "process_name label values: $(pp_py label-values "$T/w.raw" process_name)"
	check_profile "command" "$T/w.raw" "$WPID"
	# Nothing lost on the way: the samples cover the CPU time the workload used (cpu-clock
	# on a VM delivers a little under the nominal rate; a lost batch shows as far less).
	cpu=$(awk '{print $1 + $2}' "$T/w.rusage" 2>/dev/null)
	pp_check "command: sample count matches the workload's CPU time" \
		pp_py check-rate pprof "$T/w.raw" --pid "$WPID" --hz 999 --cpu-seconds "${cpu:-0}"
	# The other views of Go's pprof must work on the file too.
	go tool pprof -symbolize=none -top "$T/w.pb.gz" >"$T/w.top" 2>&1 &&
		grep -q burn_alpha "$T/w.top" && pp_ok "pprof -top lists burn_alpha" ||
		{ pp_fail "pprof -top does not list burn_alpha"; pp_show "$T/w.top"; }
	go tool pprof -symbolize=none -traces "$T/w.pb.gz" >"$T/w.traces" 2>&1 &&
		grep -q via_gamma "$T/w.traces" && pp_ok "pprof -traces shows via_gamma" ||
		{ pp_fail "pprof -traces does not show via_gamma"; pp_show "$T/w.traces"; }
	# pprof's convention: process addresses inside their Mapping, from which the file offset
	# and, through the program headers, the ELF address of the named function follow.
	libc=$(awk '$NF ~ /\/libc\.so\.6$/ { print $NF; exit }' /proc/self/maps)
	pp_check "pprof: Location.address is the process's, and leads to the ELF symbol" \
		pp_py check-addresses "$T/w.raw" "$(readlink -f "$PP_WORKLOAD")" ${libc:+"$libc"}
else
	pp_fail "go tool pprof cannot read w.pb.gz"
	pp_show "$T/w.raw.err"
fi

# The folded root is the comm perf shows, not the executable's name: started through a link
# named worker-alias, the task is called so (as perf script's comm column says).
ln -s "$PP_WORKLOAD" "$T/worker-alias"
pp_run "$T/alias" "$PEBSPROF" record -q -e cpu-clock -F 499 -o "$T/alias.folded" -- \
	"$T/worker-alias" 1
pp_check "folded: the root is the comm (worker-alias), not the executable (pp_workload)" \
	grep -Eq '^worker-alias;.*main;run_phase' "$T/alias.folded"

if grep -Eq '^pp_workload;.*main;run_phase;.* [0-9]+$' "$T/w.folded"; then
	pp_ok "folded lines start with pp_workload; and hold main;run_phase"
else
	pp_fail "no folded line 'pp_workload;...main;run_phase;... N'"
	pp_show "$T/w.folded"
fi
pp_check "folded: burn shares 50/30/20 +- $TOL" \
	pp_py check-shares folded "$T/w.folded" --expect $EXPECT --tol $TOL
pp_check "SVG parses as XML and names burn_alpha" pp_py svg-names "$T/w.svg" burn_alpha

# --- 1b. the kernel's user-stack walker gives the same stacks as the shim's -----------------
# The shim's default walk (--user-unwind auto) goes on with libc's unwind table below main,
# to _start, where frame pointers end at main or one frame below (libc keeps none): compared
# from main down.
pp_log "record --user-unwind kernel -- pp_workload --cpu-ms 1000"
pp_run "$T/kwalk" "$PEBSPROF" record -e cpu-clock -F 999 --user-unwind kernel -o "$T/k.pb.gz" \
	-o "$T/k.folded" -- "$PP_WORKLOAD" --pidfile "$T/k.pid" --cpu-ms 1000 120
[ "$PP_RC" -eq 0 ] && pp_ok "record --user-unwind kernel exits 0" ||
	{ pp_fail "record --user-unwind kernel exited $PP_RC"; pp_show "$T/kwalk.err"; }
KPID=$(head -n1 "$T/k.pid" 2>/dev/null)
pp_pprof_raw "$T/k.pb.gz" "$T/k.raw" && check_profile "kernel walker" "$T/k.raw" "$KPID" ||
	pp_fail "--user-unwind kernel: go tool pprof cannot read k.pb.gz"
# The stacks of samples taken in the burn functions (user mode, no kernel frames), as sets.
burn_stacks() { # from main down: what is above main differs by walker
	sed -n 's/^\(.*;burn_[a-z]*\) [0-9]*$/\1/p' "$1" |
		sed 's/^\([^;]*\);.*;main;/\1;main;/' | sort -u
}
if grep -q '^pp_workload;_start;__libc_start_main;__libc_start_call_main;main;run_phase;burn_alpha ' \
	"$T/w.folded"; then
	pp_ok "the shim's unwind tables walk libc below main to _start"
else
	pp_fail "no burn_alpha stack reaches _start through libc (unwind tables)"
fi
if [ -n "$(burn_stacks "$T/w.folded")" ] &&
	[ "$(burn_stacks "$T/w.folded")" = "$(burn_stacks "$T/k.folded")" ]; then
	pp_ok "the shim's and the kernel's walks give the same burn stacks:" \
		"$(burn_stacks "$T/w.folded" | tr '\n' ' ')"
else
	pp_fail "the burn stacks differ between the shim's walk and the kernel's"
	diff <(burn_stacks "$T/w.folded") <(burn_stacks "$T/k.folded") | head -n 20
fi

# --- 2. the exit status of the command is ours ---------------------------------------------
pp_run "$T/exit3" "$PEBSPROF" record -e cpu-clock -o "$T/exit3.folded" -- "$PP_WORKLOAD" --exit 3 1
[ "$PP_RC" -eq 3 ] && pp_ok "record -- workload --exit 3 returns 3" ||
	{ pp_fail "record -- workload --exit 3 returned $PP_RC"; pp_show "$T/exit3.err"; }

# --- 3. perf on the same workload agrees -----------------------------------------------------
if command -v perf >/dev/null; then
	pp_log "perf record -- pp_workload --cpu-ms 1500"
	if perf record -q -e cpu-clock -F 999 -g -o "$T/perf.data" -- "$PP_WORKLOAD" \
		--rusage "$T/perf.rusage" --cpu-ms 1500 120 >"$T/perf.out" 2>&1 &&
		perf script -i "$T/perf.data" -F comm,pid,tid,ip,sym >"$T/perf.txt" 2>"$T/perf.err"; then
		pp_check "perf: burn shares 50/30/20 +- $TOL (the workload itself is right)" \
			pp_py check-shares perf "$T/perf.txt" --expect $EXPECT --tol $TOL
		cpu=$(awk '{print $1 + $2}' "$T/perf.rusage" 2>/dev/null)
		pp_check "perf: sample count matches the workload's CPU time (the method holds)" \
			pp_py check-rate perf "$T/perf.txt" --hz 999 --cpu-seconds "${cpu:-0}"
		[ -s "$T/w.raw" ] &&
			pp_check "pebsprof and perf agree per function within $TOL points" \
				pp_py compare pprof "$T/w.raw" perf "$T/perf.txt" --pid1 "$WPID" \
				--funcs $FUNCS --tol $TOL
	else
		pp_fail "perf record/script failed on the workload"
		pp_show "$T/perf.out"
	fi
else
	echo "skipped: the comparison with perf (perf is not installed: apt-get install linux-perf)"
fi

# --- 4. children of the command are profiled ------------------------------------------------
pp_log "record -- pp_workload --fork --cpu-ms 1000"
pp_run "$T/fork" "$PEBSPROF" record -e cpu-clock -F 999 -o "$T/f.pb.gz" -- "$PP_WORKLOAD" --fork \
	--pidfile "$T/f.pid" --cpu-ms 1000 120
[ "$PP_RC" -eq 0 ] && pp_ok "record -- workload --fork exits 0" ||
	{ pp_fail "record -- workload --fork exited $PP_RC"; pp_show "$T/fork.err"; }
PARENT=$(sed -n 1p "$T/f.pid" 2>/dev/null)
CHILD=$(sed -n 2p "$T/f.pid" 2>/dev/null)
if [ -n "$CHILD" ] && pp_pprof_raw "$T/f.pb.gz" "$T/f.raw"; then
	pp_py pids pprof "$T/f.raw" --func burn_alpha >"$T/f.pids"
	grep -Eq "^ *$PARENT " "$T/f.pids" && pp_ok "fork: parent pid $PARENT sampled" ||
		pp_fail "fork: no burn_alpha samples from the parent $PARENT"
	grep -Eq "^ *$CHILD " "$T/f.pids" && pp_ok "fork: child pid $CHILD sampled" ||
		{ pp_fail "fork: no burn_alpha samples from the child $CHILD"; pp_show "$T/f.pids"; }
	check_profile "fork child" "$T/f.raw" "$CHILD"
else
	pp_fail "fork: no profile or no child pid"
fi

# --- 5. -p PID: attach to a running process -------------------------------------------------
pp_log "record -p PID, stopped by Ctrl-C"
"$PP_WORKLOAD" 0 &
PID=$!
PP_BG_PIDS="$PID"
pp_record_cpu "$T/pid" "$PID" 1000 -e cpu-clock -F 999 -p "$PID" -o "$T/p.pb.gz"
[ "$PP_RC" -eq 0 ] && pp_ok "record -p $PID exits 0 on Ctrl-C" ||
	{ pp_fail "record -p $PID exited $PP_RC"; pp_show "$T/pid.err"; }
if pp_pprof_raw "$T/p.pb.gz" "$T/p.raw"; then
	pids=$(pp_py label-values "$T/p.raw" pid | tr -d ' ' | tr '\n' ' ')
	[ "$pids" = "$PID " ] && pp_ok "-p: only pid $PID sampled" ||
		pp_fail "-p: pid labels are '$pids' (expected only $PID)"
	check_profile "-p" "$T/p.raw" "$PID"
else
	pp_fail "-p: go tool pprof cannot read p.pb.gz"
	pp_show "$T/p.raw.err"
fi

# --- 6. -a: system-wide, while the same workload still runs -------------------------------
pp_log "record -a, stopped by Ctrl-C"
kill -0 "$PID" 2>/dev/null || pp_fail "the workload ended before the -a run"
pp_record_cpu "$T/all" "$PID" 1000 -e cpu-clock -F 999 -a -o "$T/a.pb.gz"
[ "$PP_RC" -eq 0 ] && pp_ok "record -a exits 0 on Ctrl-C" ||
	{ pp_fail "record -a exited $PP_RC"; pp_show "$T/all.err"; }
if pp_pprof_raw "$T/a.pb.gz" "$T/a.raw"; then
	pp_py label-values "$T/a.raw" pid | grep -qx " *$PID" &&
		pp_ok "-a: the workload's pid $PID is in the profile" ||
		pp_fail "-a: the workload's pid $PID is missing"
	check_profile "-a" "$T/a.raw" "$PID"
else
	pp_fail "-a: go tool pprof cannot read a.pb.gz"
	pp_show "$T/a.raw.err"
fi
kill "$PID" 2>/dev/null
wait "$PID" 2>/dev/null
PP_BG_PIDS=

pp_finish
