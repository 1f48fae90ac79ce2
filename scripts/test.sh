#!/usr/bin/env bash
# Runs every test: formatting, the unit and fuzz tests under AddressSanitizer +
# UndefinedBehaviorSanitizer (clang), bounded fuzzing, the full ctest suite of ./build (unit,
# fuzz corpus replay, conformance, and integration as root), and the kernel matrix (tests/vm:
# other kernels booted under QEMU). The matrix runs beside the ctest suite, its output kept in
# build/matrix.log and shown at the end: its guests mostly compute and the integration tests
# mostly wait, so together they take the time of the longer one. Run
# scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== clang-format"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find collector exporter kmod-shim tests -name '*.[ch]')
clang-format --dry-run -Werror $files
echo "formatting ok"

echo "== build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"

echo "== sanitizer build (clang: ASan + UBSan, libFuzzer targets)"
# One build serves the unit tests under the sanitizers, the fuzz corpora's replay and bounded
# fuzzing. Without clang's libFuzzer runtime (libclang-rt-14-dev) the fuzz targets replay only.
probe=$(mktemp -d)
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' >"$probe/p.c"
fuzz=OFF
if clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
	fuzz=ON
fi
rm -rf "$probe"
CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPP_WERROR=ON -DPP_FUZZ=$fuzz \
	-DPP_SANITIZE=address,undefined >/dev/null
cmake --build build-asan -j"$(nproc)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest -L 'unit|fuzz' --output-on-failure -j2)

echo "== fuzzing (bounded)"
# The parsers of what other processes control (and of the unwind table cache's files, which a
# torn write or a bad disk may leave), for a fixed time each, two at a time; the
# input files may grow to 8 GiB of holes (size claims), and -malloc_limit_mb fails any single
# allocation a claim could force. Findings fail the run and are left in build-asan/findings.
if [ "$fuzz" = ON ]; then
	fuzzers=(elf unwind unwind_walk perf_map mount_fs procmaps gopclntab sideband data_type
		unwind_table_file kernel_module)
	mkdir -p build-asan/findings
	fuzz_one() {
		local scratch rc
		scratch=$(mktemp -d)
		(cd build-asan/findings && "../tests/fuzz_$1" -max_total_time="${PP_FUZZ_SECONDS:-10}" \
			-rss_limit_mb=1024 -malloc_limit_mb=128 -timeout=10 -print_final_stats=1 \
			"$scratch" "$PWD/../../tests/fuzz/corpus/$1" >"../fuzz_$1.log" 2>&1)
		rc=$?
		rm -rf "$scratch"
		echo "fuzz_$1: $(grep -m1 -oE 'Done [0-9]+ runs in [0-9]+ second' "build-asan/fuzz_$1.log" || echo "failed, see build-asan/fuzz_$1.log")"
		return $rc
	}
	fuzz_fail=0
	for ((i = 0; i < ${#fuzzers[@]}; i += 2)); do
		fuzz_one "${fuzzers[i]}" &
		a=$!
		b=
		if [ $((i + 1)) -lt ${#fuzzers[@]} ]; then
			fuzz_one "${fuzzers[i + 1]}" &
			b=$!
		fi
		wait $a || fuzz_fail=1
		[ -z "$b" ] || wait $b || fuzz_fail=1
	done
	[ $fuzz_fail -eq 0 ] || {
		echo "fuzzing found a crash: see build-asan/findings and build-asan/fuzz_*.log" >&2
		exit 1
	}
else
	echo "skipped: clang cannot build libFuzzer targets (libclang-rt-14-dev missing?)"
fi

# The kernel matrix, in the background from here on: the guests read build/ (which nothing
# below changes) through a read-only bind of /. Beside the ctest suite only: some sanitizer
# unit tests time a server's answers and libFuzzer times each input, and two guests on the two
# CPUs made those late.
matrix_pid=
matrix_log=build/matrix.log
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "skipped: no qemu-system-x86_64 (scripts/setup.sh installs qemu-system-x86)" >"$matrix_log"
elif [ "$(id -u)" -ne 0 ]; then
	echo "skipped: the kernel matrix needs root (virtiofsd, a read-only bind of /)" >"$matrix_log"
else
	echo "== kernel matrix: started in the background (build/matrix.log)"
	# its own process group, so that a failure below stops its guests too; and the lowest
	# priority, its session's scheduling group included (autogroups make a plain nice count
	# only within the session): the integration tests ask a workload for its share of the CPU
	# over a few seconds, and beside two guests at the same priority a spinner got a few ticks
	# of a 3 s capture (stop 39's CI). The guests get what the tests leave, which is most: a
	# guest took up to 416 s so (252 s at the tests' priority), and is given 900 s, not 600.
	setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' matrix \
		tests/vm/run-matrix.sh -b build -t 900 >"$matrix_log" 2>&1 &
	matrix_pid=$!
fi
matrix_stop() {
	[ -z "$matrix_pid" ] || kill -TERM -- "-$matrix_pid" 2>/dev/null || true
}
trap matrix_stop EXIT

echo "== all tests"
# Two at a time, integration tests included: each works in its own directory, cgroups and
# ports, and none changes what the others rely on.
(cd build && ctest --output-on-failure -j2)

echo "== kernel matrix"
# KVM where /dev/kvm is kvm_intel or kvm_amd, else QEMU's TCG: a few minutes either way.
matrix_rc=0
if [ -n "$matrix_pid" ]; then
	wait "$matrix_pid" || matrix_rc=$?
	matrix_pid=
fi
cat "$matrix_log"
exit "$matrix_rc"
