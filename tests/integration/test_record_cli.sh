#!/bin/bash
# The `pebsprof record` command line as users meet it: every bad input exits 2 (usage or
# configuration) or 1 (runtime failure) with exactly one line on stderr naming the problem,
# never a crash; no privileges -> 1 with a message; SIGINT ends a capture early and still
# writes a valid profile; `probe` and `probe --json` work.
# Needs root (to drop privileges on purpose, and for the captures); exits 77 otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_pebsprof
T=$PP_TMP

# expect_error RC REGEX DESCRIPTION -- ARGS...: pebsprof ARGS exits RC (never >= 128), writes
# exactly one line to stderr, and that line matches the extended REGEX (case-insensitive).
expect_error() {
	local want=$1 re=$2 what=$3 n line
	shift 4
	pp_run "$T/e" timeout -s KILL 60 "$PEBSPROF" "$@"
	n=$(wc -l <"$T/e.err")
	line=$(head -n1 "$T/e.err")
	if [ "$PP_RC" -eq 137 ]; then
		pp_fail "$what: pebsprof $* hung (killed after 60 s)"
		pp_show "$T/e.err"
	elif [ "$PP_RC" -ge 128 ]; then
		pp_fail "$what: pebsprof $* crashed or exited out of range (exit $PP_RC)"
		pp_show "$T/e.err"
	elif [ "$PP_RC" -ne "$want" ]; then
		pp_fail "$what: pebsprof $* exited $PP_RC (expected $want): $line"
	elif [ "$n" -ne 1 ]; then
		pp_fail "$what: pebsprof $* wrote $n lines to stderr (expected exactly 1)"
		pp_show "$T/e.err"
	elif ! grep -Eiq -- "$re" "$T/e.err"; then
		pp_fail "$what: the message does not match /$re/: $line"
	else
		pp_ok "$what: exit $want, \"$line\""
	fi
}

# --- usage and configuration errors: exit 2 -------------------------------------------------
expect_error 2 'nonsense' "unknown event" -- record -e nonsense -d 1 -o "$T/x.pb.gz"
expect_error 2 '(-F|freq).*0|0.*(-F|freq)' "zero frequency" -- record -F 0 -d 1 -o "$T/x.pb.gz"
expect_error 2 'abc' "non-numeric frequency" -- record -F abc -d 1 -o "$T/x.pb.gz"
expect_error 2 '(-d|duration).*-1|-1.*(-d|duration)' "negative duration" -- \
	record -d -1 -o "$T/x.pb.gz"
expect_error 2 'bogus-option' "unknown option" -- record --bogus-option -d 1
expect_error 2 'user-unwind.*frames' "unknown user-stack walker" -- \
	record --user-unwind frames -d 1 -o "$T/x.pb.gz"
expect_error 2 'frob' "unknown subcommand" -- frob
expect_error 2 'x\.txt|\.txt' "unknown output extension" -- record -d 1 -o "$T/x.txt"
expect_error 2 '(-F|-c|freq|period).*(-F|-c|freq|period)' "both -F and -c" -- \
	record -F 99 -c 1000 -d 1 -o "$T/x.pb.gz"
expect_error 2 '(-p|-a|pid|system)' "both -p and -a" -- record -p 1 -a -d 1 -o "$T/x.pb.gz"

# A wrong value the user must fix (a pid that does not exist, a command that cannot run, an
# event this machine lacks) is a configuration error too; what the environment refuses
# (outputs, privileges) is a runtime failure.
expect_error 2 '999999' "nonexistent pid" -- record -p 999999 -d 1 -o "$T/x.pb.gz"
expect_error 2 '/nonexistent' "command that cannot start" -- record -o "$T/x.pb.gz" -- /nonexistent

# --- runtime failures: exit 1 ---------------------------------------------------------------
expect_error 1 '/proc/x\.pb\.gz' "output under /proc" -- record -d 1 -o /proc/x.pb.gz
mkdir -p "$T/ro"
if mount -t tmpfs -o ro,size=1m pp-ro "$T/ro" 2>/dev/null; then
	expect_error 1 "$T/ro/x\\.folded" "output in a read-only directory" -- \
		record -d 1 -o "$T/ro/x.folded"
	umount "$T/ro"
else
	echo "skipped: read-only directory case (cannot mount a read-only tmpfs here)"
fi
expect_error 1 '/nonexistent-dir' "output in a missing directory" -- \
	record -d 1 -o /nonexistent-dir/x.svg
# No output file is left behind by a failed start.
[ ! -e "$T/x.pb.gz" ] && pp_ok "failed runs leave no output file" ||
	pp_fail "a failed run left $T/x.pb.gz behind"

# `cycles` needs a hardware PMU. Where there is none it is a configuration error naming the
# event; where there is one the capture works.
if [ -e /sys/bus/event_source/devices/cpu/events/cpu-cycles ] ||
	[ -e /sys/bus/event_source/devices/cpu_core ]; then
	pp_run "$T/cyc" "$PEBSPROF" record -e cycles -d 1 -o "$T/c.pb.gz"
	[ "$PP_RC" -eq 0 ] && pp_ok "cycles on a machine with a PMU works" ||
		pp_fail "cycles on a machine with a PMU exited $PP_RC: $(head -n1 "$T/cyc.err")"
	rm -f "$T/c.pb.gz"
else
	expect_error 2 'cycles|PMU' "cycles without a hardware PMU" -- record -e cycles -d 1 -o "$T/c.pb.gz"
fi

# --- no privileges: exit 1 with a message that says what is missing -------------------------
if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
	# The output directory is writable by anyone, so only the missing privileges can fail.
	mkdir -p "$T/np" && chmod 1777 "$T/np"
	pp_run "$T/np" setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
		"$PEBSPROF" record -d 1 -o "$T/np/np.pb.gz"
	n=$(wc -l <"$T/np.err")
	if [ "$PP_RC" -eq 126 ] || [ "$PP_RC" -eq 127 ]; then
		echo "skipped: non-root case (nobody cannot execute $PEBSPROF: exit $PP_RC)"
	elif [ "$PP_RC" -eq 1 ] && [ "$n" -eq 1 ] &&
		grep -Eiq 'privilege|root|sudo|CAP_(BPF|PERFMON|SYS_ADMIN)' "$T/np.err"; then
		pp_ok "unprivileged: exit 1, \"$(cat "$T/np.err")\""
	else
		pp_fail "unprivileged: exit $PP_RC, $n stderr lines (expected 1 and 1 privileges line)"
		pp_show "$T/np.err"
	fi
else
	echo "skipped: non-root case (setpriv or user nobody missing)"
fi

# --- SIGINT ends a capture early and still writes --------------------------------------------
# Job control gives the background job default SIGINT handling (a non-interactive shell
# would start it with SIGINT ignored, which is not what a user's Ctrl-C meets).
set -m
"$PEBSPROF" record -e cpu-clock -a -d 30 -o "$T/int.pb.gz" >"$T/int.out" 2>"$T/int.err" &
REC=$!
set +m
PP_BG_PIDS=$REC
sleep 2
start=$(date +%s)
kill -INT "$REC"
pp_wait_pid "$REC" 10
took=$(($(date +%s) - start))
PP_BG_PIDS=
if [ "$PP_RC" -eq 0 ]; then
	pp_ok "SIGINT: exit 0 after ${took}s"
else
	pp_fail "SIGINT: exit $PP_RC after ${took}s (expected 0 within 10 s)"
	pp_show "$T/int.err"
fi
if command -v go >/dev/null; then
	pp_require_go_pprof
	if pp_pprof_raw "$T/int.pb.gz" "$T/int.raw" && grep -q '^Samples:' "$T/int.raw" &&
		[ "$(sed -n '/^Samples:/,/^Locations/p' "$T/int.raw" | grep -c ': ')" -gt 0 ]; then
		pp_ok "SIGINT: int.pb.gz is a valid profile with samples"
	else
		pp_fail "SIGINT: int.pb.gz is not a valid profile with samples"
		pp_show "$T/int.raw.err"
	fi
else
	gzip -t "$T/int.pb.gz" 2>/dev/null && pp_ok "SIGINT: int.pb.gz is valid gzip" ||
		pp_fail "SIGINT: int.pb.gz missing or not gzip"
	echo "skipped: decoding int.pb.gz (go tool pprof unavailable)"
fi

# --- probe ------------------------------------------------------------------------------------
pp_run "$T/probe" "$PEBSPROF" probe
[ "$PP_RC" -eq 0 ] && [ -s "$T/probe.out" ] && pp_ok "probe exits 0 and prints a report" ||
	{ pp_fail "probe exited $PP_RC"; pp_show "$T/probe.err"; }
grep -q 'cpu-clock' "$T/probe.out" && pp_ok "probe names cpu-clock as what auto picks here" ||
	pp_fail "probe does not mention cpu-clock"
pp_run "$T/probej" "$PEBSPROF" probe --json
if [ "$PP_RC" -eq 0 ] && "$PP_PYTHON" -m json.tool "$T/probej.out" >/dev/null 2>"$T/json.err"; then
	pp_ok "probe --json exits 0 and is valid JSON"
else
	pp_fail "probe --json exited $PP_RC or is not valid JSON"
	pp_show "$T/json.err"
	pp_show "$T/probej.out"
fi

# --- a kernel without BTF (a recorded sysfs tree of a machine that has none) ---------------------
expect_error 1 'no BTF.*CONFIG_DEBUG_INFO_BTF' "kernel without BTF" -- \
	record --sysfs-root "$PP_SOURCE_DIR/tests/data/sysfs/novm-pmu/sys" -d 1 -o "$T/nobtf.pb.gz"

# --- root without CAP_BPF and CAP_PERFMON (a container that dropped them): told what it lacks ----
if command -v setpriv >/dev/null; then
	pp_run "$T/nocap" timeout -s KILL 60 setpriv --bounding-set=-bpf,-perfmon,-sys_admin \
		--inh-caps=-bpf,-perfmon,-sys_admin -- "$PEBSPROF" record -d 1 -o "$T/nocap.pb.gz"
	pp_check "uid 0 without CAP_BPF/CAP_PERFMON: a privilege error, not 'needs Linux 5.8'" \
		bash -c "[ $PP_RC -eq 1 ] && grep -q 'lacks CAP_BPF and CAP_PERFMON although it runs as uid 0' '$T/nocap.err' &&
			! grep -q '5.8' '$T/nocap.err'"
	pp_run "$T/nocapp" setpriv --bounding-set=-bpf,-perfmon,-sys_admin \
		--inh-caps=-bpf,-perfmon,-sys_admin -- "$PEBSPROF" probe
	pp_check "probe without CAP_BPF: bpf() refused (EPERM) is said, features unknown, not 'no'" \
		bash -c "grep -qE 'bpf\(\) refused \(EPERM\) +yes' '$T/nocapp.out' &&
			grep -qE 'BPF ring buffer +unknown \(bpf\(\) refused' '$T/nocapp.out'"
else
	echo "  (setpriv missing: the capability checks are skipped)"
fi

# --- the DaemonSet's capabilities, and nothing else, suffice (no SYS_RESOURCE, no SYSLOG) --------
if command -v setpriv >/dev/null; then
	# the workloads run until killed: a busy machine may take seconds to load the shim
	"$PP_WORKLOAD" 0 >/dev/null 2>&1 &
	WLP=$!
	pp_run "$T/mincap" timeout -s KILL 60 setpriv \
		--bounding-set=-all,+bpf,+perfmon,+sys_ptrace,+dac_read_search,+checkpoint_restore \
		--inh-caps=-all -- \
		"$PEBSPROF" record -a -d 2 -o "$T/mincap.folded"
	kill "$WLP" 2>/dev/null
	wait "$WLP" 2>/dev/null
	pp_check "BPF, PERFMON, SYS_PTRACE, DAC_READ_SEARCH, CHECKPOINT_RESTORE alone: samples, user and kernel frames named" \
		bash -c "[ $PP_RC -eq 0 ] && grep -q 'pp_workload;.*burn_alpha' '$T/mincap.folded' &&
			grep -qE ';[a-z_][a-z0-9_.]*_\[k\]' '$T/mincap.folded'"
fi

# --- without CAP_SYS_PTRACE another user's process is unreadable: said at start, counted ---------
if command -v setpriv >/dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$PP_WORKLOAD" 0 >/dev/null 2>&1 &
	WLP=$!
	sleep 0.3
	pp_run "$T/noptrace" timeout -s KILL 60 setpriv --bounding-set=-sys_ptrace,-sys_admin \
		--inh-caps=-sys_ptrace,-sys_admin -- "$PEBSPROF" record -a -d 2 -o "$T/noptrace.folded"
	kill "$WLP" 2>/dev/null
	wait "$WLP" 2>/dev/null
	pp_check "no CAP_SYS_PTRACE: said once at start-up" \
		bash -c "[ \$(grep -c 'without CAP_SYS_PTRACE' '$T/noptrace.err') -eq 1 ]"
	pp_check "no CAP_SYS_PTRACE: the samples of unreadable processes are counted, not silent" \
		grep -qE '^[1-9][0-9]* samples from processes whose maps or binaries could not be read' \
		"$T/noptrace.out"
fi

# --- kernel frames named with the host's /proc mounted elsewhere (the DaemonSet's /host/proc)
# and no CAP_SYSLOG (kallsyms then shows zeros): the kernel is asked through BPF instead ----------
mkdir -p "$T/hostproc"
if command -v setpriv >/dev/null && mount -t proc proc "$T/hostproc" 2>/dev/null; then
	pp_run "$T/ks" timeout -s KILL 60 setpriv --bounding-set=-syslog --inh-caps=-syslog -- \
		"$PEBSPROF" record -a -d 2 --proc-root "$T/hostproc" -o "$T/ks.folded"
	umount "$T/hostproc"
	pp_check "proc-root on the host's procfs, no CAP_SYSLOG: kernel frames are named" \
		bash -c "[ $PP_RC -eq 0 ] && grep -qE ';[a-z_][a-z0-9_.]*_\[k\]' '$T/ks.folded' &&
			! grep -q 'kernel frames stay unnamed' '$T/ks.err'"
else
	echo "  (cannot mount a procfs or no setpriv: the kernel-symbol check is skipped)"
fi

# --- on a terminal, a progress line while it runs ---------------------------------------------
if command -v script >/dev/null; then
	script -qec "$PEBSPROF record -a -d 2.5 -o $T/tty.pb.gz" /dev/null >"$T/tty.out" 2>&1
	pp_check "on a TTY: a progress line with the sample count" \
		grep -qE 'recording [0-9]+ s, [0-9]+ samples' "$T/tty.out"
	"$PEBSPROF" record -a -d 1.5 -o "$T/notty.pb.gz" >"$T/notty.out" 2>&1
	pp_check "not on a TTY: no progress line" bash -c "! grep -q 'recording ' '$T/notty.out'"
else
	echo "  (script(1) missing: the TTY progress check is skipped)"
fi

pp_finish
