#!/bin/bash
# Short-lived processes: programs built here without frame pointers, one with its symbols and
# one stripped (another program: its own build id).
#  1. churn under `record -a`: 30 of each, one after another, the first running 150 ms of CPU, the
#     stripped one 30 ms:
#     their samples name the function (the first) and the file (the stripped one), and the
#     first one's stacks are whole (they reach main and _start) from its first samples: the
#     unwind list of each is made from the kernel's reports of its mappings as they come, and
#     samples taken before it was in carry a copy of their stack, walked once it is; neither
#     program's stacks end early but in its exec and exit (code mapped after its list was
#     written, or its list still its parent's: copies too);
#  2. gone before the collector looked, under `record -- sh SCRIPT` (the script starts once
#     the shim is attached): the script stops the collector (SIGSTOP) while 10 of the first
#     run 50 ms each and exit, then resumes it: /proc no longer has them, yet their
#     samples are theirs (none in no file; "process gone" counts only a few samples of
#     processes older than the agent) and named, the file found through the root of the
#     shell that started them, and their stacks whole, walked from their copies;
#  3. the churn of 1. with every file's table partial (--unwind-partial-fdes 1: a deferred
#     row over its code, the FDEs a walk reaches found then): the same named, whole stacks,
#     from the rows the walks of stack copies found; then twice with a table cache: the
#     first keeps the FDEs its walks found, the second looks them up again at its start,
#     its stacks as whole.
# Needs root, BPF and perf events; exits 77 otherwise.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof

T=$PP_TMP
CHECK="$PP_PYTHON $PP_SOURCE_DIR/tests/integration/stack_checks.py"
command -v cc >/dev/null || pp_skip "no C compiler (cc) to build the test programs"

# They run for CPU time, not wall time: the share of their samples that is start-up (the
# kernel's exec, ld.so) is then the same on a busy machine as on an idle one, where a
# wall-time loop got less CPU for its work and failed the 95% checks below (92% in one run).
for prog in pp_short pp_short_strip; do
	cat >"$T/$prog.c" <<SRC
#include <stdlib.h>
#include <time.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}
__attribute__((noinline)) static unsigned long ${prog}_work(double secs)
{
	volatile unsigned long x = 0;
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < 1000; i++)
			x += i;
	return x;
}
int main(int argc, char **argv)
{
	return (int)(${prog}_work(argc > 1 ? atof(argv[1]) : 0.03) & 1);
}
SRC
	cc -O2 -fomit-frame-pointer -o "$T/$prog" "$T/$prog.c" || pp_skip "cc could not build $prog"
done
strip "$T/pp_short_strip"

# record_while NAME SCRIPT: record at 999 Hz while SCRIPT runs (the command starts once the
# shim is attached; its children are followed); NAME.folded and NAME.out
record_while() {
	pp_run "$T/$1" "$PEBSPROF" record -e cpu-clock -F 999 -o "$T/$1.folded" -- sh "$2"
}

# own_perf_link PID: PID holds a BPF perf_event link (its fdinfo's link_type: a name, or the
# number 7 on kernels that print it so). The node's other links say nothing of ours: tests run
# beside each other, and another's link seen here let the script start before ours was there.
own_perf_link() {
	grep -Eqs 'link_type:[[:space:]]*(perf|perf_event|7)$' /proc/"$1"/fdinfo/*
}

# record_all NAME SCRIPT [ARG...]: record -a at 999 Hz (and ARGs), SCRIPT run once the shim
# is attached (its perf_event links are there: 5.15+, as on the machines the tests run on),
# then SIGINT
record_all() {
	local pid i name=$1 script=$2
	shift 2
	"$PEBSPROF" record -a -e cpu-clock -F 999 -d 300 "$@" -o "$T/$name.folded" >"$T/$name.out" \
		2>"$T/$name.err" &
	pid=$!
	for i in $(seq 300); do
		own_perf_link "$pid" && break
		sleep 0.1
	done
	own_perf_link "$pid" ||
		pp_fail "record -a: no perf_event link after 30 s (before 5.15 the shim attaches without)"
	sh "$script"
	kill -INT "$pid"
	pp_wait_pid "$pid" 60
}

# share NAME PROG WHAT: "hits total" of PROG's samples in NAME.folded whose stack holds WHAT
# (PROG: the thread's name, as folded stacks begin)
share() {
	awk -v prog="$2" -v what="$3" '{
		n = $NF; split($1, f, ";"); if (f[1] != prog) next
		t += n; if (index($0, what)) h += n
	} END { print h + 0, t + 0 }' "$T/$1.folded"
}

# in_function NAME: the check that pp_short's samples are in pp_short_work. Those that
# are not are its start-up (the kernel's exec, ld.so), its exit and main's strtod: 2.6% of
# them on an idle machine, 5.8% in a CI run with the suite and the kernel matrix beside it,
# so the share of all has a floor, and those under main (where a misnamed frame would show)
# are held to 98%
in_function() {
	local named total main
	read -r named total < <(share "$1" pp_short pp_short_work)
	read -r main _ < <(share "$1" pp_short ";main;")
	pp_check "$1: pp_short's samples in its function: $named of $total, of $main under main" \
		test "$total" -ge 100 -a $((named * 100)) -ge $((total * 90)) -a \
		$((named * 100)) -ge $((main * 98))
}

# 1. churn
cat >"$T/churn.sh" <<SH
for i in \$(seq 30); do "$T/pp_short" 0.15; "$T/pp_short_strip" 0.03; done
SH
record_all churn "$T/churn.sh"
[ "$PP_RC" -eq 0 ] || pp_fail "churn: record exited $PP_RC"
grep -E '^(processes|unwind tables|symbol files|stack copies of those samples):' "$T/churn.out" | sed 's/^/    /'
read -r whole wtotal _ < <($CHECK whole folded "$T/churn.folded" pp_short)
read -r sfile stotal < <(share churn pp_short_strip "pp_short_strip+0x")
in_function churn
# frame pointers alone: about a quarter. Samples taken before the process's tables were in
# carry the top of its stack, walked once they are: whole too, busy machine or not
pp_check "churn: pp_short's stacks whole from its first samples: $whole of $wtotal" \
	test "$wtotal" -ge 100 -a $((whole * 100)) -ge $((wtotal * 95))
read -r copies walked copies_whole < <(sed -n 's/^stack copies of those samples: \([0-9]*\), walked once their tables were in \([0-9]*\) (whole \([0-9]*\);.*/\1 \2 \3/p' "$T/churn.out")
# the node's other programs' copies too (the suite's compilers and interpreters, whose deep
# stacks outgrow a copy): pp_short's whole stacks above are what must hold
pp_check "churn: stack copies of samples before their tables, walked later: ${walked:-?} of ${copies:-?}, ${copies_whole:-?} whole" \
	test "${walked:-0}" -ge 1 -a "${copies_whole:-0}" -ge 1
# 30 ms is short: many of its samples are its start-up, attributed there: in ld.so before
# it hands over (under its _dl_start, _dl_start_user) and in the kernel's exec, whose user
# frame is the caller's execve (its registers are still the caller's; "[unknown]" where the
# caller's image is not known): 7% here on an idle machine (29% of them were outside its
# file in a CI run beside the kernel matrix, some of them stacks that stopped in libc). Of
# the rest, all but a few are in its file; few are in no file (22 of 994 in one run)
read -r sunknown _ < <(share churn pp_short_strip "[unknown]")
read -r sstart _ < <(share churn pp_short_strip ";_dl_start")
read -r sexec _ < <(share churn pp_short_strip "pp_short_strip;execve;")
pp_check "churn: pp_short_strip's samples in its file: $sfile of $stotal, $sstart in ld.so's start, $sexec in its exec, $sunknown in no file" \
	test "$stotal" -ge 30 -a $((sfile * 100)) -ge $(((stotal - sstart - sexec - sunknown) * 95)) -a \
	$((sunknown * 100)) -le $((stotal * 5))
# stacks that end early, less those that cannot go on (in the exec, whose registers are the
# old image's, or the exit, whose memory is gone): the stripped program's were 5% when its
# first samples walked the list of the process it was forked from, or its list from before
# ld.so mapped libc (the walk stopped in libc's clock_gettime), 0.3% since
for prog in pp_short pp_short_strip; do
	read -r short stotal < <($CHECK short folded "$T/churn.folded" "$prog" 2>"$T/short-$prog")
	what="churn: $prog's stacks short outside its exec and exit: $short of $stotal"
	if [ "$stotal" -ge 30 ] && [ $((short * 100)) -le $((stotal * 2)) ]; then
		pp_ok "$what"
	else
		pp_fail "$what"
		sed 's/^/    /' "$T/short-$prog"
	fi
done
images=$(sed -n 's/^processes: \([0-9]*\) images.*/\1/p' "$T/churn.out")
pp_check "churn: the processes came from the kernel's reports ($images images)" \
	test "${images:-0}" -ge 60

# 2. gone before the collector looked
# the script stops the collector (its parent) while the programs run, and resumes it after
cat >"$T/gone.sh" <<SH
kill -STOP \$PPID
for i in \$(seq 10); do "$T/pp_short" 0.05; done
kill -CONT \$PPID
SH
record_while gone "$T/gone.sh"
[ "$PP_RC" -eq 0 ] || pp_fail "gone: record exited $PP_RC"
grep -E '^(processes|symbol files):|process gone' "$T/gone.out" | sed 's/^/    /'
read -r named total < <(share gone pp_short pp_short_work)
# every user frame named: none in no file ([unknown]), none a bare file offset
read -r bare _ < <(share gone pp_short "+0x")
read -r unknown _ < <(share gone pp_short "[unknown]")
# samples without their process: no user frame but [unknown] (stack_checks.py orphans)
read -r orphans _ < <($CHECK orphans folded "$T/gone.folded" pp_short)
pp_check "gone: pp_short's samples named though it had exited: $((total - bare - unknown)) of $total ($named in its function)" \
	test "$total" -ge 20 -a $(((total - bare - unknown) * 100)) -ge $((total * 90)) -a \
	$((named * 100)) -ge $((total * 50))
gone=$(sed -n 's/.*process gone \([0-9]*\).*/\1/p' "$T/gone.out")
relative=$(sed -n "s/.*, \([0-9]*\) in a relative's root.*/\1/p" "$T/gone.out")
# processes older than the agent that exit while it is stopped are gone too (the shell's
# sleeps): a few, against pp_short's hundreds
pp_check "gone: pp_short's samples all with their process: $orphans without; process gone ${gone:-?} in all" \
	test "$orphans" -eq 0 -a $((${gone:-999} * 20)) -lt "$total"
pp_check "gone: files opened through a relative's root (${relative:-?})" test "${relative:-0}" -ge 1
# their samples came before any table (the collector was stopped): walked from their copies
# once it ran again, from the mappings the kernel reported, though the processes had exited
read -r whole wtotal _ < <($CHECK whole folded "$T/gone.folded" pp_short)
pp_check "gone: pp_short's stacks whole though it exited before its tables: $whole of $wtotal" \
	test "$wtotal" -ge 20 -a $((whole * 100)) -ge $((wtotal * 90))

# 3. partial tables: every file's rows found as walks of stack copies reach its code
# (no table cache: files compiled at an earlier start would be read whole from it)
record_all partial "$T/churn.sh" --unwind-partial-fdes 1 --unwind-table-cache none
[ "$PP_RC" -eq 0 ] || pp_fail "partial: record exited $PP_RC"
grep -E '^(partial unwind tables|unwind tables|stack copies):' "$T/partial.out" | sed 's/^/    /'
read -r whole wtotal _ < <($CHECK whole folded "$T/partial.folded" pp_short)
in_function partial
pp_check "partial: pp_short's stacks whole: $whole of $wtotal" \
	test "$wtotal" -ge 100 -a $((whole * 100)) -ge $((wtotal * 95))
# partial_line NAME: files, FDEs found at an earlier start, FDEs found, frames, meetings
partial_line() {
	sed -n 's/^partial unwind tables: \([0-9]*\) files (\([0-9]*\) FDEs found at an earlier start, looked up again at once; rows found as walks reach their code: \([0-9]*\) FDEs for \([0-9]*\) frames of stack copies; the shim met code not found yet \([0-9]*\) times.*/\1 \2 \3 \4 \5/p' "$T/$1.out"
}
read -r pfiles _ pfdes pframes pmet < <(partial_line partial)
pp_check "partial: files given partial tables ${pfiles:-?}, FDEs found ${pfdes:-?} for ${pframes:-?} frames, the shim met code not found ${pmet:-?} times" \
	test "${pfiles:-0}" -ge 2 -a "${pfdes:-0}" -ge 2 -a "${pframes:-0}" -ge 2 -a "${pmet:-0}" -ge 1

# ... kept for the next start: libc's FDEs among them (the programs built here a moment ago
# are not kept: their ctime has not settled)
for run in keep again; do
	record_all "partial-$run" "$T/churn.sh" --unwind-partial-fdes 1 --unwind-table-cache "$T/pcache"
	[ "$PP_RC" -eq 0 ] || pp_fail "partial-$run: record exited $PP_RC"
	grep -E '^partial unwind tables:' "$T/partial-$run.out" | sed 's/^/    /'
done
kept=$(find "$T/pcache" -name '*.fdes' | wc -l)
read -r _ again _ _ _ < <(partial_line partial-again)
read -r whole wtotal _ < <($CHECK whole folded "$T/partial-again.folded" pp_short)
pp_check "partial: the FDEs found kept for $kept files, ${again:-?} looked up again at the next start" \
	test "$kept" -ge 1 -a "${again:-0}" -ge 1
pp_check "partial, the next start: pp_short's stacks whole: $whole of $wtotal" \
	test "$wtotal" -ge 100 -a $((whole * 100)) -ge $((wtotal * 95))
pp_finish
