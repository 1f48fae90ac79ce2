#!/bin/bash
# Off-CPU profiles: `record --off-cpu` on tests/programs/pp_waits, whose main thread waits in
# known functions for known shares of its waiting time (a sleep 50 %, a pipe read 33 %, a
# futex 17 %), burns the CPU in between and takes many waits under the threshold:
#  1. the wall-clock folded stacks give those shares within 5 points, in the sleeping state
#     (a busy machine's delays of the woken thread are apart, as runnable or throttled),
#     each with the kernel frames of its wait and (5.17+: the table walker) the whole user
#     stack, main -> run_round -> the function; the flame graph is in wall clock; the OTLP output has an off_cpu/nanoseconds
#     Profile with no period, its samples carrying off_cpu.state, and the event's Profile has
#     none of them; the summary counts the waits and the shorter ones;
#  2. the threshold: with 5 ms the 50 us sleeps leave (nearly) nothing, with 0 they are all
#     there (at least 50 us each);
#  3. `run --off-cpu` sends off_cpu Profiles over OTLP, and in the Pyroscope push a pprof of
#     off-CPU time beside the event's, each as Pyroscope's ingest rules accept it;
#  4. a burner in a cgroup with a 10 % CPU quota: its waits in the throttled state are the
#     time the kernel counts the group throttled, under its burn functions;
#  5. dd with fsync: waits in the D state (disk) through fsync;
#  6. a wait past a process's sched_process_exit (the init of a PID namespace waiting for its
#     members to be reaped): recorded, 300 ms, with its kernel stack.
# Needs root, BPF and perf events; exits 77 otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof

T=$PP_TMP
WAITS="$PP_TEST_BIN_DIR/pp_waits"
CHECK="$PP_PYTHON $PP_SOURCE_DIR/tests/integration/off_cpu_checks.py"
[ -x "$WAITS" ] || pp_skip "tests/programs/pp_waits is not built"

# --- 1. shares, stacks, states, outputs ---------------------------------------------------
pp_log "record --off-cpu -- pp_waits 3"
# a second's warm-up first: the agent builds the new process's unwind tables meanwhile
pp_run "$T/main" "$PEBSPROF" record --off-cpu --top 0 -o "$T/w.folded" -o "$T/w.svg" \
	-o "$T/w.otlp.pb" -- "$WAITS" --warmup 1 3
if [ "$PP_RC" -eq 0 ]; then
	pp_ok "record --off-cpu -- pp_waits exits 0"
else
	pp_fail "record --off-cpu exited $PP_RC"
	pp_show "$T/main.err"
fi
# the table walker unwinds a waiting thread's libc from 5.17 (bpf_loop); before, the kernel's
# frame-pointer walker loses the caller of libc's read and syscall
whole=
[ "$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')" -ge 5017 ] && whole=--whole-user
# a wait whose end no traced switch showed (a kernel may leave a switch untraced: seen on a VM
# whose own agent's switches no tracepoint reports) is recorded at its wakeup without the
# kernel stack it waited in, and the summary counts it
unseen=$(sed -n 's/.* \([0-9][0-9]*\) whose end was not seen ended at their wakeup.*/\1/p' \
	"$T/main.out" | head -1)
pp_check "the waits' shares are 50/33/17 +- 5, sleeping, their kernel frames${whole:+, whole stacks}" \
	$CHECK folded "$T/w.folded" --expect wait_sleep=50,wait_pipe=33,wait_futex=17 --tol 5 \
	--kernel wait_sleep=nanosleep,wait_pipe=pipe_read,wait_futex=futex_wait \
	--unseen "${unseen:-0}" $whole
if grep -q '^off-CPU: [1-9][0-9]* waits of 1.0 ms or more' "$T/main.out" &&
	grep -Eq '; [1-9][0-9]* shorter;' "$T/main.out"; then
	pp_ok "the summary counts the waits and the shorter ones"
else
	pp_fail "the summary has no off-CPU line with waits and shorter ones"
	pp_show "$T/main.out" 20
fi
if [ -z "$(cut -d';' -f1 "$T/w.folded" | sort -u | grep -v '^pp_waits$')" ]; then
	pp_ok "only the command's threads"
else
	pp_fail "stacks of other processes: $(cut -d';' -f1 "$T/w.folded" | sort -u | head -5)"
fi
grep -q 'Wall clock (on and off the CPU)' "$T/w.svg" && grep -q 'off-CPU: sleeping' "$T/w.svg" &&
	pp_ok "the flame graph is wall clock, waits marked by state" ||
	pp_fail "the flame graph is not in wall clock or has no [off-CPU: sleeping] frames"
if pp_otlp_python "$PP_SOURCE_DIR/../shared/reference/opentelemetry-proto" "$T/gen" \
	>"$T/gen.err" 2>&1; then
	pp_check "OTLP: an off_cpu/nanoseconds Profile without a period, off_cpu.state on its samples" \
		$CHECK otlp "$T/gen" "$T/w.otlp.pb"
else
	pp_skip_check "OTLP: protoc could not build the reference schema's classes"
fi

# --- 2. the threshold -------------------------------------------------------------------------
pp_log "record --off-cpu --off-cpu-threshold 0 and 5ms -- pp_waits 2"
pp_run "$T/t0" "$PEBSPROF" record -q --off-cpu --off-cpu-threshold 0 -o "$T/t0.folded" -- \
	"$WAITS" 2
pp_run "$T/t5" "$PEBSPROF" record -q --off-cpu --off-cpu-threshold 5ms -o "$T/t5.folded" -- \
	"$WAITS" 2
# their sleeping time: a busy machine may keep a woken thread from its CPU for 5 ms, which
# makes a wait to record, its delay shown apart as runnable
short0=$($CHECK time "$T/t0.folded" wait_short sleeping)
short5=$($CHECK time "$T/t5.folded" wait_short sleeping)
sleep5=$($CHECK time "$T/t5.folded" wait_sleep sleeping)
# 400 sleeps of about 50 us (a little less off the CPU: the timer is armed first) with no
# threshold; under 5 ms only those delayed 100 times over
if [ "${short0:-0}" -ge 10000000 ] && [ "${short5:-0}" -lt $((short0 / 4)) ] &&
	[ "${sleep5:-0}" -ge 500000000 ]; then
	pp_ok "the threshold: 50 us sleeps $((short0 / 1000000)) ms sleeping with 0, $((short5 / 1000000)) ms with 5ms; the 20 ms sleeps stay ($((sleep5 / 1000000)) ms)"
else
	pp_fail "the threshold: 50 us sleeps ${short0:-?} ns sleeping with 0, ${short5:-?} ns with 5ms (want >= 10 ms, < a quarter); 20 ms sleeps ${sleep5:-?} ns (want >= 500 ms)"
fi

# --- 3. run --off-cpu: the agent sends off_cpu profiles over OTLP and in the push -----------
pp_log "run --off-cpu, OTLP and the Pyroscope push"
"$WAITS" 30 >/dev/null 2>&1 &
W=$!
PP_BG_PIDS="${PP_BG_PIDS:-} $W"
pp_start_sink otlp '[]'
pp_run_for 3 "$T/ro" --off-cpu --endpoint "http://127.0.0.1:$SINK_PORT/v1development/profiles" \
	--interval 1
kill "$SINK" 2>/dev/null
pp_check "run --off-cpu (OTLP): SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
got=
for body in "$T"/otlp/req-*.body; do
	[ -s "$body" ] && [ -d "$T/gen" ] && $CHECK otlp "$T/gen" "$body" >"$T/ro.check" 2>&1 &&
		got=$body && break
done
if [ -n "$got" ]; then
	pp_ok "run --off-cpu (OTLP): a request with off_cpu Profiles ($(cat "$T/ro.check"))"
elif [ ! -d "$T/gen" ]; then
	pp_skip_check "run --off-cpu (OTLP): no reference schema classes"
else
	pp_fail "run --off-cpu (OTLP): no request with an off_cpu Profile"
	pp_show "$T/ro.check"
	pp_show "$T/ro.err"
fi
pp_start_sink pyro '[]'
pp_run_for 3 "$T/rp" --off-cpu --exporter pyroscope --endpoint "http://127.0.0.1:$SINK_PORT" \
	--interval 1 --service-name shop
kill "$SINK" 2>/dev/null
pp_check "run --off-cpu (push): SIGTERM exits 0" [ "$PP_RC" -eq 0 ]
# the checker takes the OTLP classes made above and the pprof ones beside them
if [ -d "$T/gen" ] && (cd "$PP_SOURCE_DIR/../shared/reference/pprof" &&
	protoc --python_out="$T/gen" proto/profile.proto) 2>/dev/null; then
	kinds=$(for body in "$T"/pyro/req-*.body; do
		"$PP_PYTHON" "$PP_SOURCE_DIR/tests/conformance/pyroscope_check.py" "$T/gen" ingest \
			"$body" shop 2>&1
	done | sort | uniq -c)
	if grep -q 'ok: process_cpu:off_cpu:nanoseconds::' <<<"$kinds" &&
		grep -q 'ok: process_cpu:cpu:nanoseconds' <<<"$kinds" && ! grep -q REJECTED <<<"$kinds"; then
		pp_ok "run --off-cpu (push): the event's and off-CPU pprofs, each accepted by /ingest's rules"
	else
		pp_fail "run --off-cpu (push): wanted accepted cpu and off_cpu pushes, got: $kinds"
	fi
else
	pp_skip_check "run --off-cpu (push): protoc cannot build the pprof classes"
fi
kill "$W" 2>/dev/null

# --- 4. a CPU quota that throttles: waits of a runnable task, told apart --------------------
# a cgroup of the cpu controller with 10 ms of CPU every 100 ms (cgroup v2's cpu.max where the
# controller is on the unified hierarchy, else v1's cfs quota), and the highest weight, so that
# on a busy machine its burner still gets the CPU when it may and waits mostly for the quota
pp_log "record --off-cpu -p: pp_workload in a cgroup with a 10 % CPU quota"
cg=
v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -n "$v2" ] && grep -qw cpu "$v2/cgroup.controllers" 2>/dev/null; then
	grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control"
	cg=$v2/pp-offcpu-$$
	mkdir "$cg" && PP_CGROUP_EXTRA="${PP_CGROUP_EXTRA:-} $cg" &&
		echo "10000 100000" >"$cg/cpu.max" && echo 10000 >"$cg/cpu.weight" || cg=
else
	v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
	[ -n "$v1" ] && cg=$v1/pp-offcpu-$$ && mkdir "$cg" &&
		PP_CGROUP_EXTRA="${PP_CGROUP_EXTRA:-} $cg" && echo 100000 >"$cg/cpu.cfs_period_us" &&
		echo 10000 >"$cg/cpu.cfs_quota_us" && echo 262144 >"$cg/cpu.shares" || cg=
fi

# the kernel's own count of the time the group waited for its quota, in ms (cpu.stat: v2's
# throttled_usec, v1's throttled_time in ns)
cg_throttled_ms() {
	awk '$1 == "throttled_usec" { print int($2 / 1e3) } $1 == "throttled_time" { print int($2 / 1e6) }' \
		"$1/cpu.stat" 2>/dev/null
}

if [ -z "$cg" ]; then
	pp_skip_check "throttling: no cgroup of the cpu controller could be made here"
else
	BURN=$(pp_start_in_cgroup "$cg" 120)
	PP_BG_PIDS="${PP_BG_PIDS:-} $BURN"
	# until the kernel counts 2 s of throttling from when the event is open (at 10 % of a CPU
	# about 2.2 s; longer on a busy machine): pebsprof's figure is held to the kernel's
	pp_record_until "$T/thr" 2000 cg_throttled_ms "$cg" -- --off-cpu --top 0 -p "$BURN" \
		-o "$T/thr.folded"
	kernel=$PP_GREW
	pp_rmdir_cgroup "$cg" 10
	thr=$(sed -n 's/^off-CPU: .* ms: runnable [0-9.]*, throttled \([0-9]*\)\..*/\1/p' "$T/thr.out")
	run=$(sed -n 's/^off-CPU: .* ms: runnable \([0-9]*\)\..*/\1/p' "$T/thr.out")
	under=$(awk '/\[off-CPU: throttled\]/ && /burn_/ { n += $NF } END { print int(n / 1e6) }' \
		"$T/thr.folded")
	echo "    kernel: $kernel ms throttled; pebsprof: throttled ${thr:-?} ms, runnable ${run:-?} ms"
	# pebsprof misses a wait that began before its program was attached or ended after it
	# stopped (one period each), and counts a throttled thread's wait for a CPU once its
	# quota is back as part of the throttled wait
	if [ "${thr:-0}" -ge $((kernel * 7 / 10)) ] && [ "${thr:-0}" -le $((kernel * 3 / 2 + 200)) ] &&
		[ "${under:-0}" -ge $((thr / 2)) ]; then
		pp_ok "throttled: $thr ms waiting for the quota as the kernel counted $kernel ms, $under ms of it in burn_*"
	else
		pp_fail "throttled: ${thr:-?} ms waiting for the quota, the kernel counted $kernel ms (want 70-150 %), ${under:-?} ms in burn_*"
		pp_show "$T/thr.out" 20
	fi
fi

# --- 5. a disk wait: fsync on the file system of the test's directory -------------------------
pp_log "record --off-cpu -- dd conv=fsync"
if [ "$(stat -f -c %T "$T")" = tmpfs ]; then
	pp_skip_check "disk waits: $T is on tmpfs, where fsync does not wait"
else
	# every wait (threshold 0): a fast disk may take less than 1 ms a flush
	pp_run "$T/dd" "$PEBSPROF" record --off-cpu --off-cpu-threshold 0 --top 0 \
		-o "$T/dd.folded" -- sh -c "for i in 1 2 3 4 5 6 7 8; do
			dd if=/dev/urandom of='$T/dd.bin' bs=1M count=4 conv=fsync 2>/dev/null; done"
	disk=$(awk '/^dd;/ && /\[off-CPU: disk\]/ && /fsync/ { n += $NF } END { print int(n / 1e6) }' \
		"$T/dd.folded")
	if [ "$PP_RC" -eq 0 ] && [ "${disk:-0}" -ge 1 ]; then # 32 MiB flushed in 8 fsyncs
		pp_ok "disk waits: dd's fsync waited $disk ms in the D state, its stacks through fsync"
	else
		pp_fail "disk waits: no D-state wait of dd through fsync (exit $PP_RC)"
		grep '^dd;' "$T/dd.folded" | cut -c1-300 | head -5 | sed 's/^/    | /'
	fi
fi

# --- 6. a wait in a process's exit ----------------------------------------------------------
# Past its sched_process_exit a process never returns to user mode, yet may still wait: the
# init of a PID namespace waits in do_exit until its namespace is reaped. record -a (a command's
# own filter lets go of a process at its exit): the wait, 300 ms, with its kernel stack.
pp_log "record -a --off-cpu: the init of a PID namespace waits in its exit"
"$PEBSPROF" record -a --off-cpu --top 0 -d 60 -o "$T/ex.folded" >"$T/ex.out" 2>"$T/ex.err" &
rec=$!
# ready once the agent holds its link on sched_switch, the last of the off-CPU programs attached
ready=
for ((i = 0; i < 600; i++)); do
	kill -0 "$rec" 2>/dev/null || break
	if grep -qs 'tp_name:[[:space:]]*sched_switch' /proc/"$rec"/fdinfo/*; then
		ready=1
		break
	fi
	sleep 0.1
done
if [ -z "$ready" ]; then
	pp_fail "exit waits: the agent did not attach its off-CPU programs within 60 s"
	pp_show "$T/ex.err"
elif ! "$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/exit_wait.py" 0.3 >"$T/exw.out" 2>&1; then
	pp_skip_check "exit waits: no PID namespace or ptrace here ($(head -c 200 "$T/exw.out"))"
else
	kill -INT "$rec" 2>/dev/null
	pp_wait_pid "$rec" 60
	rec=
	ms=$(awk '/^python3[^;]*;/ && /zap_pid_ns_processes/ && /\[off-CPU: sleeping\]/ { n += $NF } END { print int(n / 1e6) }' \
		"$T/ex.folded" 2>/dev/null)
	if [ "$PP_RC" -eq 0 ] && [ "${ms:-0}" -ge 200 ]; then
		pp_ok "exit waits: the namespace's init waited $ms ms in its exit, its kernel stack through do_exit"
	else
		pp_fail "exit waits: ${ms:-no} ms of waiting in zap_pid_ns_processes (want >= 200; exit $PP_RC)"
		grep 'do_exit' "$T/ex.folded" | cut -c1-300 | head -5 | sed 's/^/    | /'
	fi
fi
[ -n "$rec" ] && kill -INT "$rec" 2>/dev/null && pp_wait_pid "$rec" 60

pp_finish
