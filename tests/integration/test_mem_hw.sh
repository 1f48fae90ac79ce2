#!/bin/bash
# Memory profiles on a machine with a PMU: runs where `pebsprof probe` finds a memory event
# (Intel PEBS load latency, AMD IBS), and says skipped with probe's reason elsewhere.
#
# A pointer chase (tests/programs/pp_chase) over a working set sized from this machine's caches
# for L1, L2, L3 and DRAM, recorded with -e mem-loads: the memory levels follow the working set
# (the expected level is the most common), the mean latencies order L1 < L3 < DRAM, and the
# data addresses fall inside the chased buffer (the data symbol chase_buf names them). With the
# best precision the sampled IP is the load itself: the chase's samples are named "struct
# node.next" from the DWARF at that IP, which a skidded IP (the next instruction, no memory
# operand) could not be. `cycles:ppp` (or the PMU's best precision) gives the CPU shares
# cpu-clock gives. Where the node has the running kernel's vmlinux with DWARF, the kernel's own
# accesses in a walk of /usr are named a type and field under their kernel function. A machine whose CPU no fixture under tests/data/sysfs has is captured
# (tests/data/sysfs/capture.sh) into build/hw-fixtures, to be added as a fixture.

. "$(dirname "$0")/lib.sh"

pp_require_root
pp_require_bpf
pp_require_perf_events
pp_require_pebsprof
T=$PP_TMP
CHASE=$PP_TEST_BIN_DIR/pp_chase
ref="${PP_SOURCE_DIR:?}/../shared/reference"
checks="$PP_SOURCE_DIR/tests/integration/mem_hw_checks.py"
[ -x "$CHASE" ] || pp_skip "the pointer chase is not built (target pp_chase)"

# --- what this machine can sample -----------------------------------------------------------
"$PEBSPROF" probe --json >"$T/probe.json" 2>"$T/probe.err" ||
	pp_skip "pebsprof probe failed: $(tail -n1 "$T/probe.err")"
read -r precise reason < <("$PP_PYTHON" - "$T/probe.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d.get("memory_events", {}).get("mem-loads", {})
core = [p for p in d.get("pmus", []) if "core" in (p.get("kind") or "") and p.get("max_precise")]
precise = max((p["max_precise"] for p in core), default=0)
reason = "" if m.get("events") else (m.get("error") or "mem-loads opens nothing")
print(precise, reason.replace("\n", " ") or "-")
PY
)
[ "$reason" = - ] || pp_skip "no PEBS or IBS memory sampling here: $reason"
echo "mem-loads opens here; the core PMU's best precision is $precise"

# --- a machine no fixture has: captured for tests/data/sysfs ---------------------------------
known=$("$PP_PYTHON" - "$T/probe.json" "$PP_SOURCE_DIR/tests/data/sysfs" <<'PY'
import glob, json, os, re, sys
cpu = json.load(open(sys.argv[1])).get("cpu") or {}
for info in sorted(glob.glob(os.path.join(sys.argv[2], "*", "proc", "cpuinfo"))):
    text = open(info).read()
    get = lambda k: (re.search(rf"^{k}\s*:\s*(.*)$", text, re.M) or [None, ""])[1].strip()
    if get("vendor_id") == cpu.get("vendor") and get("cpu family") == str(cpu.get("family")) \
            and get("model") == str(cpu.get("model")):
        print(os.path.basename(os.path.dirname(os.path.dirname(info))))
        break
PY
)
if [ -n "$known" ]; then
	echo "this CPU has a fixture: tests/data/sysfs/$known"
else
	name=$("$PP_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1]))["cpu"]
print(f"{c[\"vendor\"]}-{c[\"family\"]}-{c[\"model\"]}".lower())' "$T/probe.json")
	fixture=${PP_BUILD_DIR:?}/hw-fixtures/$name
	rm -rf "$fixture"
	bash "$PP_SOURCE_DIR/tests/data/sysfs/capture.sh" "$fixture" >"$T/capture.out" 2>&1
	"$PEBSPROF" probe --json --sysfs-root "$fixture/sys" --procfs-root "$fixture/proc" \
		>"$T/fixture.json" 2>/dev/null
	pp_check "a CPU no fixture has is captured, and probes from the capture as it does live" \
		"$PP_PYTHON" -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
ev = lambda d: {k: v["events"] for k, v in d["memory_events"].items()}
sys.exit(0 if a["pmus"] == b["pmus"] and ev(a) == ev(b) and a["cpu"] == b["cpu"] else 1)' \
		"$T/probe.json" "$T/fixture.json"
	echo "NEW MACHINE: $fixture holds its PMUs; add it as tests/data/sysfs/<name> with a SOURCE.md"
fi

# --- the pointer chase at each level of the hierarchy ----------------------------------------
command -v protoc >/dev/null && [ -d "$ref/pprof" ] ||
	pp_skip "needs protoc and the reference pprof schema at $ref"
mkdir -p "$T/gen"
(cd "$ref/pprof" && protoc --python_out="$T/gen" proto/profile.proto) ||
	pp_skip "protoc cannot generate the reference pprof classes"
"$PP_PYTHON" -c 'import google.protobuf' 2>/dev/null ||
	pp_skip "no python3 with google.protobuf (Debian package python3-protobuf)"

# cache SIZE of index N of CPU 0 in bytes (0 when the level is not listed)
cache_bytes() {
	local f=/sys/devices/system/cpu/cpu0/cache/index$1/size v
	v=$(cat "$f" 2>/dev/null) || { echo 0; return; }
	case $v in
	*K) echo $((${v%K} << 10)) ;;
	*M) echo $((${v%M} << 20)) ;;
	*) echo "$v" ;;
	esac
}
l1=$(cache_bytes 0) l2=$(cache_bytes 2) l3=$(cache_bytes 3)
[ "$l1" -gt 0 ] && [ "$l2" -gt 0 ] || pp_skip "CPU 0's cache sizes are not in sysfs"
# Each working set well inside its level and well outside the one above; DRAM past any LLC.
declare -A bytes period
bytes[L1]=$((l1 / 2)) period[L1]=200000
bytes[L2]=$((l2 / 2 > l1 * 4 ? l2 / 2 : l2 * 3 / 4)) period[L2]=50000
levels=(L1 L2)
if [ "$l3" -gt $((l2 * 4)) ]; then
	bytes[L3]=$((l3 / 2)) period[L3]=10000
	levels+=(L3)
fi
dram=$((l3 * 8 > 256 << 20 ? l3 * 8 : 256 << 20))
bytes[RAM]=$((dram > 512 << 20 ? 512 << 20 : dram)) period[RAM]=2000
levels+=(RAM)
echo "caches: L1d $l1, L2 $l2, L3 $l3 bytes; working sets: $(for l in "${levels[@]}"; do printf '%s %s ' "$l" "${bytes[$l]}"; done)"

# The level runs use a copy without DWARF, so that each sample keeps its data object (the
# data symbol its address falls in) rather than the type the DWARF would name.
objcopy --strip-debug "$CHASE" "$T/pp_chase"
ldlat=()
grep -q '"ldlat_format": *"' "$T/probe.json" && ldlat=(--ldlat 3)
declare -A lat
for lvl in "${levels[@]}"; do
	pp_run "$T/$lvl" timeout -s KILL 120 "$PEBSPROF" record -e mem-loads "${ldlat[@]}" \
		-c "${period[$lvl]}" -o "$T/$lvl.pb.gz" -- "$T/pp_chase" "${bytes[$lvl]}" 3
	if [ "$PP_RC" -ne 0 ]; then
		pp_fail "$lvl: record exited $PP_RC: $(tail -n1 "$T/$lvl.err")"
		continue
	fi
	"$PP_PYTHON" "$checks" "$T/gen" "$T/$lvl.pb.gz" chase >"$T/$lvl.kv" 2>&1
	echo "$lvl ($(("${bytes[$lvl]}" >> 10)) KiB): $(tr '\n' ' ' <"$T/$lvl.kv")"
	get() { sed -n "s/^$1=//p" "$T/$lvl.kv"; }
	lat[$lvl]=$(get latency)
	pp_check "$lvl: at least 50 samples in the chase" [ "$(get samples || echo 0)" -ge 50 ]
	pp_check "$lvl: the data addresses fall inside the chased buffer (chase_buf: $(get object_chase_buf))" \
		awk -v s="$(get object_chase_buf)" 'BEGIN { exit !(s + 0 >= 0.95) }'
	pp_check "$lvl: the most common memory level of the four" \
		awk -v want="$lvl" -v l1="$(get level_L1)" -v l2="$(get level_L2)" \
		-v l3="$(get level_L3)" -v ram="$(get level_RAM)" 'BEGIN {
			v["L1"] = l1; v["L2"] = l2; v["L3"] = l3; v["RAM"] = ram
			for (k in v) if (v[k] > v[want]) exit 1
			exit !(v[want] > 0) }'
done
if [ -n "${lat[L3]:-}" ]; then
	order="L1 ${lat[L1]:-?} < L3 ${lat[L3]} < DRAM ${lat[RAM]:-?} cycles"
	pp_check "latencies order L1 < L3 < DRAM ($order)" awk -v a="${lat[L1]:-0}" \
		-v b="${lat[L3]}" -v c="${lat[RAM]:-0}" 'BEGIN { exit !(a > 0 && a < b && b < c) }'
else
	pp_check "latencies order L1 < DRAM (${lat[L1]:-?} < ${lat[RAM]:-?} cycles; no L3 listed)" \
		awk -v a="${lat[L1]:-0}" -v c="${lat[RAM]:-0}" 'BEGIN { exit !(a > 0 && a < c) }'
fi

# --- the exact IP: the load, named by its DWARF ----------------------------------------------
pp_run "$T/typed" timeout -s KILL 120 "$PEBSPROF" record -e mem-loads "${ldlat[@]}" \
	-c "${period[L2]}" -o "$T/typed.pb.gz" -- "$CHASE" "${bytes[L2]}" 3
"$PP_PYTHON" "$checks" "$T/gen" "$T/typed.pb.gz" chase >"$T/typed.kv" 2>&1
echo "typed: $(tr '\n' ' ' <"$T/typed.kv")"
share=$(sed -n 's/^leaf_struct node.next=//p' "$T/typed.kv")
pp_check "the sampled IP is the load: its DWARF names struct node.next in ${share:-0} of the chase's samples" \
	awk -v s="${share:-0}" 'BEGIN { exit !(s + 0 >= 0.8) }'

# --- precise cycles give the CPU shares cpu-clock gives ---------------------------------------
pp_ev=cycles:$(printf 'p%.0s' $(seq 1 "$((precise > 3 ? 3 : precise < 1 ? 1 : precise))"))
for ev in "$pp_ev" cpu-clock; do
	pp_run "$T/${ev%%:*}" timeout -s KILL 120 "$PEBSPROF" record -e "$ev" -F 999 \
		-o "$T/${ev%%:*}.folded" -- "$PP_WORKLOAD" 4
	pp_check "$ev: record exits 0" [ "$PP_RC" -eq 0 ]
done
"$PP_PYTHON" "$PP_SOURCE_DIR/tests/integration/pprof_shares.py" compare folded "$T/cycles.folded" \
	folded "$T/cpu-clock.folded" --funcs burn_alpha,burn_beta,burn_gamma --tol 5 >"$T/cmp.out" 2>&1
rc=$?
cat "$T/cmp.out"
pp_check "$pp_ev shares match cpu-clock's within 5 points" [ "$rc" -eq 0 ]

# --- the kernel's own accesses, typed from the running kernel's image -------------------------
kimage=$("$PP_PYTHON" -c 'import json, sys; s = json.load(open(sys.argv[1]))["symbolization"]
print("-" if s.get("kernel_image") else (s.get("kernel_image_why") or "no image"))' "$T/probe.json")
if [ "$kimage" != - ]; then
	pp_skip_check "kernel data types: no vmlinux with DWARF for this kernel here ($kimage)"
else
	# walks of a large tree: the kernel reads dentries and inodes, many out of the caches
	pp_run "$T/kern" timeout -s KILL 180 "$PEBSPROF" record -e mem-loads "${ldlat[@]}" \
		-c 2000 -o "$T/kern.pb.gz" -- sh -c 'for i in 1 2 3; do find /usr -xdev -ls; done >/dev/null 2>&1'
	pp_check "kernel data types: record names the image it typed them from" \
		grep -q '^kernel data types: .*(build id [0-9a-f]*)' "$T/kern.out"
	"$PP_PYTHON" "$checks" "$T/gen" "$T/kern.pb.gz" --kernel >"$T/kern.kv" 2>&1
	echo "kernel: $(tr '\n' ' ' <"$T/kern.kv")"
	ks=$(sed -n 's/^kernel_samples=//p' "$T/kern.kv")
	kt=$(sed -n 's/^kernel_typed=//p' "$T/kern.kv")
	pp_check "kernel data types: of ${ks:-0} kernel accesses, ${kt:-0} named a type and field under their kernel function" \
		[ "${ks:-0}" -ge 20 -a "${kt:-0}" -ge 1 ]
fi
pp_finish
