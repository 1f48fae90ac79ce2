#!/usr/bin/env python3
"""What a memory profile of tests/programs/pp_chase says, for test_mem_hw.sh: read with Python
classes protoc generated from the reference pprof schema (not our decoder).

Usage: mem_hw_checks.py GEN_DIR FILE.pb.gz FUNC
       mem_hw_checks.py GEN_DIR FILE.pb.gz --kernel
With --kernel, about the kernel's own accesses (the first frame with a mapping is the kernel's):
  kernel_samples  how many
  kernel_typed    how many of them are named a type and field (a leaf "struct X.f" under "struct X")
  kleaf_<L>       the commonest typed leaves, with their kernel function: "kleaf_vfs_read;struct file.f_mode"
Else prints key=value lines about the samples whose stack holds FUNC (the chase loop):
  samples       how many (the events, over the profile's fixed period)
  level_<L>     the share of them by the memory.level label's class: L1, LFB, L2, L3, RAM,
                other (none, or a level not listed)
  latency       their mean load latency in cycles
  object_<O>    the share whose data frame (the frame above FUNC) is O, e.g. object_chase_buf
  leaf_<L>      the share whose leaf frame is L, e.g. "leaf_struct node.next"
Exits 2 when the file cannot be read or holds no such samples.
"""
import collections
import gzip
import sys

gen, path, func = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, gen)
from proto import profile_pb2  # noqa: E402

p = profile_pb2.Profile()
try:
    with open(path, "rb") as f:
        data = f.read()
    p.ParseFromString(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
except (OSError, ValueError) as e:
    print(f"cannot read {path}: {e}", file=sys.stderr)
    sys.exit(2)
st = p.string_table
types = [st[t.type] for t in p.sample_type]
if "latency" not in types or len(types) != 2 or p.period <= 0:
    print(f"{path}: sample types {types}, period {p.period}: not a memory profile", file=sys.stderr)
    sys.exit(2)
lat_i = types.index("latency")
ev_i = 1 - lat_i
fn = {f.id: st[f.name] for f in p.function}
loc = {l.id: fn.get(l.line[0].function_id, "") if l.line else "" for l in p.location}


def kernel_report():
    maps = {m.id: st[m.filename] for m in p.mapping}
    mapping_of = {l.id: maps.get(l.mapping_id, "") for l in p.location}
    n_kernel, n_typed, typed = 0.0, 0.0, collections.Counter()
    for s in p.sample:
        ids = list(s.location_id)  # leaf first
        first = next((i for i, l in enumerate(ids) if mapping_of[l]), None)
        if first is None or mapping_of[ids[first]] != "[kernel.kallsyms]":
            continue
        n = s.value[ev_i] / p.period
        n_kernel += n
        names = [loc[l] for l in ids]
        if first == 2 and names[0].startswith(names[1] + ".") and " " in names[1]:
            n_typed += n
            typed[names[2] + ";" + names[0]] += n
    print(f"kernel_samples={n_kernel:.0f}")
    print(f"kernel_typed={n_typed:.0f}")
    for name, n in typed.most_common(5):
        print(f"kleaf_{name}={n:.0f}")
    sys.exit(0 if n_kernel >= 1 else 2)


if func == "--kernel":
    kernel_report()


def level_class(level):
    for name in ("L1", "LFB", "L2", "L3"):
        if level.startswith(name):
            return name
    return "RAM" if "RAM" in level else "other"


samples, latency = 0.0, 0.0
levels, objects, leaves = collections.Counter(), collections.Counter(), collections.Counter()
for s in p.sample:
    stack = [loc[i] for i in s.location_id]  # leaf first
    if func not in stack:
        continue
    n = s.value[ev_i] / p.period
    samples += n
    latency += s.value[lat_i]
    level = next((st[l.str] for l in s.label if st[l.key] == "memory.level"), "")
    levels[level_class(level)] += n
    at = stack.index(func)
    objects[stack[at - 1] if at > 0 else ""] += n
    leaves[stack[0]] += n
if samples < 1:
    print(f"{path}: no samples in {func}", file=sys.stderr)
    sys.exit(2)
print(f"samples={samples:.0f}")
for name in ("L1", "LFB", "L2", "L3", "RAM", "other"):
    print(f"level_{name}={levels[name] / samples:.3f}")
print(f"latency={latency / samples:.1f}")
for name, n in objects.most_common(5):
    print(f"object_{name}={n / samples:.3f}")
for name, n in leaves.most_common(5):
    print(f"leaf_{name}={n / samples:.3f}")
