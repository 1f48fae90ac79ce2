#!/bin/bash
# Captures this machine's PMUs as a probe fixture: what `pebsprof probe --sysfs-root DIR
# --procfs-root DIR` reads, in the layout of the trees beside this script (see any SOURCE.md):
# each PMU's type, cpus or cpumask, caps, formats and events under
# sys/bus/event_source/devices, the first processor block of /proc/cpuinfo, the perf sysctls
# and the capabilities line of /proc/self/status. Values are copied, not interpreted.
#
# usage: tests/data/sysfs/capture.sh OUT_DIR
set -eu
out=${1:?usage: capture.sh OUT_DIR}
src=/sys/bus/event_source/devices
mkdir -p "$out/sys/bus/event_source/devices" "$out/proc/sys/kernel" "$out/proc/self"
for pmu in "$src"/*; do
	name=$(basename "$pmu")
	dst=$out/sys/bus/event_source/devices/$name
	mkdir -p "$dst"
	for f in type cpus cpumask perf_event_mux_interval_ms; do
		[ -r "$pmu/$f" ] && cat "$pmu/$f" >"$dst/$f" 2>/dev/null || true
	done
	for d in caps format events; do
		[ -d "$pmu/$d" ] || continue
		mkdir -p "$dst/$d"
		for f in "$pmu/$d"/*; do
			[ -f "$f" ] && cat "$f" >"$dst/$d/$(basename "$f")" 2>/dev/null || true
		done
	done
done
awk '/^$/ { exit } { print }' /proc/cpuinfo >"$out/proc/cpuinfo"
for k in perf_event_paranoid perf_event_max_sample_rate perf_event_max_stack kptr_restrict; do
	cat "/proc/sys/kernel/$k" >"$out/proc/sys/kernel/$k"
done
grep '^Cap' /proc/self/status >"$out/proc/self/status"
cat >"$out/SOURCE.md" <<EOF
# $(sed -n 's/^model name[[:space:]]*: //p' "$out/proc/cpuinfo" | head -n1)

Captured by tests/data/sysfs/capture.sh on $(date -u +%Y-%m-%d), kernel $(uname -r): the
machine's own sysfs and procfs, not reconstructed from source.
EOF
echo "captured $(ls "$out/sys/bus/event_source/devices" | wc -l) PMUs into $out"
