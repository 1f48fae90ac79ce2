#!/bin/bash
# The churn loop of bench_churn.sh, ab_churn.sh and churn_split.sh, sourced: a node that never
# stops starting programs. churn_setup DIR builds its two programs of our own (150 ms and 30 ms of work, no
# frame pointers, the second stripped) and its inputs in DIR (0, or 1 when they could not be
# built); churn_loop DIR starts python3, perl, gcc, clang, node, sort, sh and the two over and
# over, about 200 programs a second on 2 CPUs, until killed; churn_start runs it in the
# background (its pid in LOOP), churn_missing names a program it needs that is not here. The
# benches read the agent's CPU with run_ns and take medians with median.

# run_ns PID: the nanoseconds PID's threads have run (schedstat: exact, where the ticks of
# /proc/PID/stat miss a process that runs in short bursts, as perf record does)
run_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
# median N...: the middle one (the lower middle of an even count)
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# churn_missing: the first program the loop runs that this machine lacks (nothing: none)
churn_missing() {
	local c
	for c in python3 perl gcc clang node sort; do
		command -v $c >/dev/null || {
			echo $c
			return
		}
	done
}

# churn_start DIR: the loop in the background, its pid in LOOP, given 3 s to get going
churn_start() {
	churn_loop "$1" >/dev/null 2>&1 &
	# shellcheck disable=SC2034 # the caller's, for its EXIT trap
	LOOP=$!
	sleep 3
}

churn_setup() {
	local T=$1
	cat >"$T/spin.c" <<'SRC'
#include <stdlib.h>
#include <time.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}
__attribute__((noinline)) static unsigned long pp_churn_work(double secs)
{
	volatile unsigned long x = 0;
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x += i;
	return x;
}
int main(int argc, char **argv)
{
	return (int)(pp_churn_work(argc > 1 ? atof(argv[1]) : 0.15) & 1);
}
SRC
	gcc -O2 -fomit-frame-pointer -o "$T/pp_churn_150ms" "$T/spin.c" || return 1
	gcc -O2 -fomit-frame-pointer -s -o "$T/pp_churn_30ms" "$T/spin.c" || return 1
	printf 'int f(int x) { return x * 3 + 1; }\n' >"$T/small.c"
	python3 -c 'import random; r = random.Random(7)
print("\n".join(str(r.randrange(10**9)) for _ in range(100000)))' >"$T/text"
}

churn_loop() {
	local T=$1
	while :; do
		python3 -c 'sum(i * i for i in range(200000))'
		perl -e '$s = 0; $s += $_ * $_ for 1 .. 300000'
		gcc -O2 -c "$T/small.c" -o "$T/small.o"
		clang -O2 -c "$T/small.c" -o "$T/small.o"
		node -e 'let s = 0; for (let i = 0; i < 3e6; i++) s += i * i'
		sort "$T/text" >/dev/null
		sh -c 'i=0; while [ $i -lt 3000 ]; do i=$((i + 1)); done'
		"$T/pp_churn_150ms" 0.15
		"$T/pp_churn_30ms" 0.03
	done
}
