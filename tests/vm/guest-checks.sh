#!/bin/bash
# What runs inside each kernel of the matrix (tests/vm/run-matrix.sh starts it with vmrun.sh):
# probe, record on the test workload with its shares, the no-frame-pointer chain unwound with
# tables, the shim live test, the cgroup filter, `run` for a few windows into a local sink,
# processes that exit before the collector reads them, known from the kernel's side-band, and
# off-CPU time (record --off-cpu) with its shares. Writes OUT/result (key=value lines the
# matrix compares with kernels.list) and each step's output under OUT; prints ok/FAIL lines.
#
# usage: guest-checks.sh BUILD_DIR OUT_DIR [CHAIN_DIR]
#   CHAIN_DIR: tests/data/unwind's programs built on the host (a compiler under TCG takes a
#   minute); without it they are built here
set -u
build=${1:?usage: guest-checks.sh BUILD_DIR OUT_DIR}
out=${2:?usage: guest-checks.sh BUILD_DIR OUT_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
pebsprof=$build/collector/pebsprof
workload=$build/tests/pp_workload
py=/usr/bin/python3
mkdir -p "$out"
res=$out/result
: >"$res"
fails=0
put() { echo "$1=$2" >>"$res"; }
t0=$(date +%s)
# each line says when (seconds into the checks), so a slow guest shows where its time went
ok() { echo "ok: $* [$(($(date +%s) - t0)) s]"; }
fail() {
	echo "FAIL: $* [$(($(date +%s) - t0)) s]"
	fails=$((fails + 1))
}
ip link set lo up 2>/dev/null
put kernel "$(uname -r)"

# Guests run under TCG, often beside other work: no check counts on a fixed time. Workloads
# run until killed, captures count their duration from the moment they sample, and waits poll
# for what they need within limits scaled by this guest's speed (slow, from the first shim
# load: about 0.1 s natively, seconds under TCG).
slow=1
# wait_until LIMIT_S CMD...: polls CMD every 0.2 s until it succeeds: 0, or 1 after LIMIT_S * slow
wait_until() {
	local limit=$(($1 * slow * 5)) i=0
	shift
	until "$@"; do
		i=$((i + 1))
		[ $i -ge $limit ] && return 1
		sleep 0.2
	done
}
# exited PID: the process ended (a zombie not yet reaped counts)
exited() {
	! kill -0 "$1" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}
# stop PID...: SIGKILL and reap, quietly
stop() {
	kill -KILL "$@" 2>/dev/null
	wait "$@" 2>/dev/null
}

# --- probe -----------------------------------------------------------------------------------
if "$pebsprof" probe --json >"$out/probe.json" 2>"$out/probe.err"; then
	"$py" - "$out/probe.json" >>"$res" <<'PY'
import json, sys
k = json.load(open(sys.argv[1]))["kernel"]
for key in ("btf", "ringbuf", "cast_to_kern_ctx", "attach_cookie"):
    print(f"probe_{key}={'yes' if k.get(key) else 'no'}")
PY
	ok "probe --json"
else
	fail "probe exited $?"
fi

# --- record on the workload: shares, loss, the shim as this kernel took it ------------------
start=$(date +%s%N)
# The workload runs for wall-clock seconds: on a busy host the guest may give it too little CPU
# in 3 s for 200 samples, and the host taking the guest's CPU away in the middle of its 20 ms
# rounds (time the guest cannot tell from its own) skews the shares of a short run. Then it
# runs again, longer by this guest's slowness (known from the first run's shim load), up to
# three times; the message says how many samples it got and in which run.
wsecs=3
for attempt in 1 2 3; do
	"$pebsprof" record -e cpu-clock -F 499 -o "$out/w.folded" -- "$workload" "$wsecs" \
		>"$out/record.out" 2>"$out/record.err"
	rc=$?
	load_ms=$(sed -n 's/^shim:.*loaded in \([0-9]*\) ms.*/\1/p' "$out/record.out")
	[ "$rc" = 0 ] && "$py" "$src/tests/integration/pprof_shares.py" check-shares folded \
		"$out/w.folded" --expect burn_alpha=50,burn_beta=30,burn_gamma=20 --tol 8 \
		>"$out/shares.txt" 2>&1 && break
	[ "$rc" = 0 ] || break
	wsecs=$((wsecs * 2 + 3 * ((${load_ms:-1000} + 499) / 500)))
	[ "$wsecs" -le 60 ] || wsecs=60
done
put record_attempts "$attempt"
put record_exit "$rc"
shim=$(grep '^shim:' "$out/record.out")
put variant "$(echo "$shim" | sed -n 's/^shim: \([a-z]*\).*/\1/p')"
put load_ms "$(echo "$shim" | sed -n 's/.*loaded in \([0-9]*\) ms.*/\1/p')"
put verified_insns "$(echo "$shim" | sed -n 's/.* \([0-9]*\) instructions verified.*/\1/p')"
load_ms=$(echo "$shim" | sed -n 's/.*loaded in \([0-9]*\) ms.*/\1/p')
slow=$(((${load_ms:-1000} + 499) / 500))
[ "$slow" -ge 1 ] || slow=1
[ "$slow" -le 20 ] || slow=20
put slowness "$slow"
put user_unwind "$(echo "$shim" | sed -n 's/.*user stacks walked by the \([a-z]*\).*/\1/p')"
put samples "$(sed -n 's/^\([0-9]*\) samples in.*/\1/p' "$out/record.out")"
put lost "$(sed -n 's/.*; lost \([0-9]*\) .*/\1/p' "$out/record.out")"
if [ "$rc" = 0 ] && "$py" "$src/tests/integration/pprof_shares.py" check-shares folded \
	"$out/w.folded" --expect burn_alpha=50,burn_beta=30,burn_gamma=20 --tol 8 \
	>"$out/shares.txt" 2>&1; then
	put shares ok
	ok "record: burn shares 50/30/20 +- 8 ($(tr '\n' ' ' <"$out/shares.txt")), run $attempt"
else
	put shares FAIL
	fail "record (exit $rc): shares $(tr '\n' ' ' <"$out/shares.txt" 2>/dev/null)"
fi

# --- unwinding with tables: the 28-frame no-frame-pointer chain comes out whole ------------
chain=${3:-}
if [ -n "$chain" ] && [ -x "$chain/chain" ]; then
	echo "built on the host: $chain" >"$out/chain-build.txt"
else
	chain=/tmp/pp-chain
	sh "$src/tests/data/unwind/build.sh" "$chain" >"$out/chain-build.txt" 2>&1 || chain=
fi
if [ -n "$chain" ]; then
	# The chain spins until killed; sampling starts once it has spun 0.1 s (its only user
	# time), and 2 s count from the attach, however slow. With one vCPU the agent's own start
	# (tables, symbols) can take most of those 2 s from it: a run with fewer than 50 samples
	# in pp_spin says too little to judge and runs again, longer by this guest's slowness, up
	# to three times.
	: >"$out/chain.err"
	(cd "$chain" && PP_CHAIN_SPIN=3600 exec ./chain) &
	cpid=$!
	spun() { [ "$(awk '{print $14}' "/proc/$1/stat" 2>/dev/null)" -ge 10 ] 2>/dev/null; }
	wait_until 30 spun "$cpid" || echo "the chain had not spun 0.1 s in $((30 * slow)) s" >>"$out/chain.err"
	mode=
	csecs=2
	for cattempt in 1 2 3; do
		"$pebsprof" record -e cpu-clock -F 499 -d "$csecs" -p "$cpid" -o "$out/chain.folded" \
			>"$out/chain.out" 2>>"$out/chain.err"
		# Before 5.17 the table walker is the bounded loop, which walks user-mode samples only
		# (record.h): the whole chain is asked of those; samples in the kernel under the
		# chain, more of them on a busy host, get what frame pointers give.
		grep -q "in a bounded loop" "$out/chain.out" && mode=--user-mode
		read -r frac share <<<"$("$py" "$src/tests/integration/chain_share.py" folded \
			"$out/chain.folded" "$src/tests/data/unwind/chain.expected" $mode)"
		[ "${share#*/}" -ge 50 ] 2>/dev/null && break
		csecs=$((csecs * 2 * slow))
		[ "$csecs" -le 60 ] || csecs=60
	done
	stop "$cpid"
	put chain_attempts "$cattempt"
	if [ "${share#*/}" = 0 ]; then
		put chain_whole no
		fail "record -p chain: no sample in the chain's leaf in $cattempt runs: $(grep -E '^[0-9]+ samples' "$out/chain.out"); heaviest: $(awk '{print $NF "\t" $0}' "$out/chain.folded" 2>/dev/null | sort -nr | head -n1 | cut -f2 | cut -c1-300); $(grep -v '^pebsprof: \(cpu-clock requested\|wrote\)' "$out/chain.err" | tail -n3 | tr '\n' ' ')"
	else
		whole=$("$py" -c "print('ok' if ${frac:-0} >= 0.95 else 'no')")
		put chain_whole "$whole"
		what="the whole chain in $share samples in the leaf${mode:+ (user mode: the bounded walker)}, run $cattempt"
		if [ "$whole" = ok ]; then
			ok "record -p chain: $what"
		else
			fail "record -p chain: only $what (want 95 %)"
		fi
	fi
else
	put chain_whole "not built"
	fail "the unwinding test programs did not build: $(tail -n2 "$out/chain-build.txt")"
fi

# --- the shim live test: every variant this kernel should load -------------------------------
"$build/tests/test_shim_live" >"$out/shim_live.txt" 2>&1
rc=$?
put shim_live "$([ $rc = 0 ] && echo ok || echo FAIL)"
put shim_live_summary "$(tail -n1 "$out/shim_live.txt" | tr ' ' '_')"
# the kctx variants load from 6.2 (bpf_cast_to_kern_ctx); before, the test skips them
put kctx_variants "$(grep -q '^SKIP kctx_variants' "$out/shim_live.txt" && echo skipped || echo loaded)"
# the table walker loads from 5.17 (bpf_loop); before, the test skips it
put table_walker "$(grep -q '^SKIP table_walker_variants' "$out/shim_live.txt" && echo skipped || echo loaded)"
[ $rc = 0 ] && ok "test_shim_live: $(tail -n1 "$out/shim_live.txt")" ||
	fail "test_shim_live: $(grep -E '^FAIL|failed:|ip_filter=' "$out/shim_live.txt" | head -6 | tr '\n' ' ')"

# --- the cgroup filter: a workload inside a cgroup and one outside ---------------------------
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
cg=${cg2:-/sys/fs/cgroup}/pp-vm-inside
mkdir -p "$cg"
cp "$workload" /tmp/pp_inside
cp "$workload" /tmp/pp_outside
/tmp/pp_inside 3600 >/dev/null &
inside=$!
echo "$inside" >"$cg/cgroup.procs"
/tmp/pp_outside 3600 >/dev/null &
outside=$!
"$pebsprof" record -a -d 2 -F 499 --cgroup "$cg" -o "$out/cg.folded" >"$out/cg.out" \
	2>"$out/cg.err"
rc=$?
stop "$inside" "$outside"
mode=$(sed -n 's/.*cgroup filter \(in the kernel\|in user space\).*/\1/p' "$out/cg.out")
put cgroup_filter "$(case $mode in 'in the kernel') echo kernel ;; 'in user space') echo user ;; *) echo none ;; esac)"
if [ $rc = 0 ] && grep -q '^pp_inside' "$out/cg.folded" && ! grep -q '^pp_outside' "$out/cg.folded"; then
	ok "cgroup filter ($mode): only the cgroup's workload"
else
	fail "cgroup filter (exit $rc, $mode): $(cut -d';' -f1 "$out/cg.folded" 2>/dev/null | sort -u | tr '\n' ' ')"
fi
rmdir "$cg" 2>/dev/null

# --- run: a few windows into a local sink ----------------------------------------------------
mkdir -p "$out/sink"
"$py" "$src/tests/tools/pp_http_sink.py" --port 0 --dir "$out/sink" --script '[]' \
	>"$out/sink.port" 2>"$out/sink.err" &
sink=$!
for _ in $(seq 100); do grep -q PORT "$out/sink.port" 2>/dev/null && break; sleep 0.1; done
port=$(awk '/PORT/ { print $2 }' "$out/sink.port")
"$workload" 3600 >/dev/null &
wl=$!
"$pebsprof" run --interval 2 --endpoint "http://127.0.0.1:$port/v1development/profiles" \
	>"$out/run.out" 2>"$out/run.err" &
agent=$!
# two windows delivered (the agent's start, a TCG guest's, takes what it takes), then stop
two_requests() { [ "$(ls "$out/sink" | grep -c 'body$')" -ge 2 ]; }
wait_until 30 two_requests || echo "run: fewer than 2 requests after $((30 * slow)) s" >>"$out/run.err"
kill -TERM "$agent"
wait_until 30 exited "$agent" || stop "$agent"
wait "$agent"
rc=$?
stop "$wl" "$sink"
reqs=$(ls "$out/sink" | grep -c 'body$')
put run_requests "$reqs"
if [ $rc = 0 ] && [ "$reqs" -ge 2 ]; then
	ok "run: $reqs requests reached the sink, exit 0"
else
	fail "run: exit $rc, $reqs requests"
fi

# --- processes gone before the collector read them: known from the kernel's side-band -------
# A script recorded as a command (started once the shim is attached) stops the collector, its
# parent (SIGSTOP), while three runs of the workload start, burn 1 s and exit, then resumes
# it: it names their samples from what the kernel reported of their mappings. The copy is on
# the scratch file system, not the guest's overlay root: the kernel reports an overlay file's
# backing inode, which a path through the overlay cannot be checked against.
gone_exe=$out/pp_gone
cp "$workload" "$gone_exe"
"$pebsprof" record -e cpu-clock -F 499 -o "$out/gone.folded" -- sh -c \
	'kill -STOP $PPID; for i in 1 2 3; do "$1" 1 >/dev/null 2>&1; done; kill -CONT $PPID' \
	sh "$gone_exe" >"$out/gone.out" 2>"$out/gone.err"
rc=$?
images=$(sed -n 's/^processes: \([0-9]*\) images.*/\1/p' "$out/gone.out")
# named: in the workload's functions; orphans: no user frame but [unknown], a sample without
# its process (stack_checks.py orphans). Its start-up, ld.so and the kernel's exec, takes a
# larger share the slower the guest: it counts as neither.
read -r orphans total <<<"$("$py" "$src/tests/integration/stack_checks.py" orphans folded \
	"$out/gone.folded" pp_gone 2>/dev/null)"
named=$(awk '{ split($1, f, ";"); if (f[1] == "pp_gone" && /burn_/) h += $NF }
	END { print h + 0 }' "$out/gone.folded" 2>/dev/null)
put sideband "$([ "${images:-0}" -gt 0 ] && echo ok || echo none)"
if [ $rc = 0 ] && [ "${images:-0}" -gt 0 ] && [ "${total:-0}" -gt 0 ] &&
	[ $((named * 100)) -ge $((total * 50)) ] && [ $((orphans * 100)) -le $((total * 2)) ]; then
	ok "gone before read: $named of $total samples of exited processes in their functions, $orphans without their process (side-band: $images images)"
else
	fail "gone before read (exit $rc): $named of $total named, $orphans without their process, side-band images ${images:-none}"
fi

# --- off-CPU: where pp_waits waits (a sleep, a pipe, a futex: 50/33/17 %), and where the
# stacks are taken (the kprobe as threads resume, or the switch tracepoint) ----------------------
# the warm-up (outside the rounds checked) lets the agent build the process's unwind tables
# first, which under TCG takes seconds, by this guest's slowness
"$pebsprof" record --off-cpu --top 0 -o "$out/off.folded" -- "$build/tests/pp_waits" \
	--warmup $((slow + 1)) 2 >"$out/off.out" 2>"$out/off.err"
rc=$?
at=$(sed -n 's/^off-CPU: .*; stacks taken at \([^ ;]*\).*/\1/p' "$out/off.out")
put off_cpu_at "${at:-none}"
# the table walker unwinds a waiting thread's libc from 5.17 (bpf_loop); before, the kernel's
# frame-pointer walker loses the caller of libc's read and syscall
whole=
kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
[ "$kv" -ge 5017 ] && whole=--whole-user
if [ $rc = 0 ] && "$py" "$src/tests/integration/off_cpu_checks.py" folded "$out/off.folded" \
	--expect wait_sleep=50,wait_pipe=33,wait_futex=17 --tol 8 \
	--kernel wait_sleep=nanosleep,wait_pipe=pipe_read,wait_futex=futex_wait $whole \
	>"$out/off.txt" 2>&1; then
	put off_cpu ok
	ok "record --off-cpu: waits 50/33/17 +- 8 ($(grep -v error "$out/off.txt" | tr '\n' ' ')), stacks at $at${whole:+, whole user stacks}"
else
	put off_cpu FAIL
	fail "record --off-cpu (exit $rc): $(tr '\n' ' ' <"$out/off.txt" 2>/dev/null) $(tail -n2 "$out/off.err")"
fi

put checks_failed "$fails"
exit $((fails > 0))
