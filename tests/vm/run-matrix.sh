#!/bin/bash
# The kernel matrix: every kernel of tests/vm/kernels.list (or those named with -k) is fetched
# from Debian's archive, booted under QEMU (vmrun.sh) and runs guest-checks.sh; each outcome is
# compared with what the list expects of that kernel (variant=, cgroup_filter=) and with what
# every kernel must do (probe facts, record shares, the shim live test, `run` into a sink).
# Prints a Markdown table (kernel x loads, variant, samples, cgroup filter, user unwinding,
# verified instructions, load time, time) and exits 1 if any kernel differs. Each kernel's
# outputs, its probe.json included, are kept under OUT/NAME.
#
# usage: tests/vm/run-matrix.sh [-b BUILD] [-o OUT] [-c CACHE] [-k NAME,...] [-t SECONDS]
#                               [-j GUESTS] [-u]
#   -j  guests booted at once, one virtual CPU each (default 2: under TCG two single-CPU
#       guests on two host CPUs take 7 minutes for three kernels, one two-CPU guest after
#       another 10); 1 boots them one after another with two CPUs each
#   -u  update the fixtures tests/data/kernels/probe-NAME.json from this run
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$src/build
out=$src/build/vm-matrix
cache=${PP_VM_CACHE:-/var/cache/pebsprof-vm}
only=
limit=600
update=0
jobs=2
while getopts "b:o:c:k:t:j:u" opt; do
	case $opt in
	b) build=$(cd "$OPTARG" && pwd) || exit 2 ;;
	o) out=$OPTARG ;;
	c) cache=$OPTARG ;;
	k) only=$OPTARG ;;
	t) limit=$OPTARG ;;
	j) jobs=$OPTARG ;;
	u) update=1 ;;
	*) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
mkdir -p "$out" "$cache"
out=$(cd "$out" && pwd)

# get NAME KEY: a key of NAME's result file
get() { sed -n "s/^$2=//p" "$out/$1/result" 2>/dev/null | head -n1; }

# the unwinding test programs, built once here: the guests' compilers run under TCG
chain_dir=$out/chain-programs
sh "$src/tests/data/unwind/build.sh" "$chain_dir" >"$out/chain-build.txt" 2>&1 || chain_dir=

# boot NAME: fetch the kernel, boot it and run the checks; NAME.rc and NAME.secs say how it went
boot() {
	local name=$1 t0 kdir rc cpus=2
	t0=$(date +%s)
	[ "$jobs" -gt 1 ] && cpus=1
	kdir=$("$here/fetch-kernel.sh" "$name" "$cache" 2>"$out/$name.fetch.err" | tail -n1)
	if [ ! -d "$kdir" ]; then
		echo fetch >"$out/$name.rc"
		return
	fi
	rm -rf "${out:?}/$name"
	mkdir -p "$out/$name"
	# one retry: a TCG boot dies now and then while the kernel patches itself (notes)
	for attempt in 1 2; do
		"$here/vmrun.sh" -c "$cpus" -t "$limit" "$kdir" "$out/$name" -- \
			bash "$here/guest-checks.sh" "$build" "$out/$name" $chain_dir >"$out/$name.log" 2>&1
		rc=$?
		[ $rc -ne 125 ] && break
	done
	echo $(($(date +%s) - t0)) >"$out/$name.secs"
	echo "$rc" >"$out/$name.rc"
}

names=()
while read -r name suites expect; do
	case $name in '' | '#'*) continue ;; esac
	if [ -n "$only" ] && ! [[ ",$only," == *",$name,"* ]]; then continue; fi
	names+=("$name")
	rm -f "$out/$name.rc" "$out/$name.secs"
done <"$here/kernels.list"
# the guests, at most $jobs at a time
running=0
for name in "${names[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	boot "$name" &
	running=$((running + 1))
done
wait

rows=()
bad=0
while read -r name suites expect; do
	case $name in '' | '#'*) continue ;; esac
	if [ -n "$only" ] && ! [[ ",$only," == *",$name,"* ]]; then continue; fi
	rc=$(cat "$out/$name.rc" 2>/dev/null)
	if [ "$rc" = fetch ]; then
		# Debian's archive out of reach: this kernel cannot be tried here, said so
		echo "skipped: $name: cannot fetch its kernel: $(tail -n1 "$out/$name.fetch.err")"
		rows+=("| $name | skipped: kernel not fetched | | | | | | | | |")
		continue
	fi
	secs=$(cat "$out/$name.secs" 2>/dev/null)
	echo "== $name ($(get "$name" kernel)): guest exit $rc in $secs s"
	grep -E '^(ok|FAIL):' "$out/$name.log" | sed 's/^/   /'
	problems=()
	[ "$rc" = 0 ] || problems+=("guest checks exit $rc")
	for e in $expect; do
		key=${e%%=*} want=${e#*=}
		got=$(get "$name" "$key")
		[ "$got" = "$want" ] || problems+=("$key: $got, expected $want")
	done
	want_kctx=$([ "$(get "$name" variant)" = kctx ] && echo yes || echo no)
	[ "$(get "$name" probe_cast_to_kern_ctx)" = "$want_kctx" ] ||
		problems+=("probe says cast_to_kern_ctx=$(get "$name" probe_cast_to_kern_ctx) with variant $(get "$name" variant)")
	for key in probe_btf probe_ringbuf; do
		[ "$(get "$name" $key)" = yes ] || problems+=("$key: $(get "$name" $key)")
	done
	if [ ${#problems[@]} -gt 0 ]; then
		bad=$((bad + 1))
		printf '   FAIL: %s\n' "${problems[@]}"
	fi
	[ "$update" = 1 ] && [ -s "$out/$name/probe.json" ] &&
		cp "$out/$name/probe.json" "$src/tests/data/kernels/probe-$name.json"
	insns=$(get "$name" verified_insns)
	rows+=("| $name ($(get "$name" kernel)) | $([ "$(get "$name" record_exit)" = 0 ] && echo yes || echo no) | $(get "$name" variant) | $(get "$name" samples) (lost $(get "$name" lost)), shares $(get "$name" shares) | $(get "$name" cgroup_filter) | $(get "$name" user_unwind), chain $(get "$name" chain_whole) | $(get "$name" off_cpu_at), shares $(get "$name" off_cpu) | ${insns:-not reported} | $(get "$name" load_ms) ms | $secs s |")
done <"$here/kernels.list"

echo
echo "| kernel | loads | variant | samples | cgroup filter | user unwinding | off-CPU | verified insns | load time | time |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $((bad > 0))
