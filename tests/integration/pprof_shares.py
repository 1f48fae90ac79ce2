#!/usr/bin/env python3
"""Read profiles through independent decoders and check what the integration tests assert.

Inputs, all text produced by tools that are not ours:
  pprof   the output of `go tool pprof -raw FILE.pb.gz` (Go's own pprof decoder)
  perf    the output of `perf script -F comm,pid,tid,ip,sym` on a `perf record -g` capture
  folded  a folded-stacks file ("process;root;...;leaf count")

Every input becomes a list of samples (count, stack from leaf to root, labels), so the same
checks run on pebsprof's output and on perf's. Each check prints one line per finding and
exits 1 when an assertion fails, 2 on unreadable input.

  pprof_shares.py shares  KIND FILE [--pid P] --funcs a,b,c
  pprof_shares.py check-shares KIND FILE [--pid P] --expect a=50,b=30,c=20 --tol 7
  pprof_shares.py check-callers KIND FILE [--pid P] --func f --caller g --above x,y [--min 0.9]
  pprof_shares.py compare KIND1 FILE1 KIND2 FILE2 [--pid1 P] [--pid2 P] --funcs a,b,c --tol 7
  pprof_shares.py check-rate KIND FILE [--pid P] --hz F --cpu-seconds S [--min 0.8 --max 1.15]
  pprof_shares.py pids KIND FILE [--func f]
  pprof_shares.py sample-types FILE            (pprof only; prints "type/unit" per line)
  pprof_shares.py label-values FILE KEY        (pprof only; distinct values of a label)
  pprof_shares.py svg-names FILE NAME...       (the SVG parses as XML and mentions each NAME)
  pprof_shares.py check-addresses RAWFILE BINARY...  (pprof only: every location in a
      mapping of BINARY is a process address inside the mapping, and its file offset leads
      through BINARY's program headers (readelf) to the ELF address of the function it names
      (nm), or to the address its "file+0xADDR" placeholder names)
"""
import argparse
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


class Sample:
    __slots__ = ("count", "stack", "labels")

    def __init__(self, count, stack, labels):
        self.count = count  # number of samples (pprof samples/count; perf: 1 per record)
        self.stack = stack  # function names, leaf first
        self.labels = labels  # str -> list of str


class Profile:
    def __init__(self):
        self.samples = []
        self.sample_types = []
        self.period_type = None


def strip_kernel_suffix(name):
    return name[:-4] if name.endswith("_[k]") else name


# go tool pprof -raw prints a location as "ID: 0xADDR [M=N ][[F] ]NAME FILE:LINE s=START",
# with inlined frames on continuation lines (innermost first).
LOC_RE = re.compile(r"^\s*(\d+): (0x[0-9a-f]+) (?:M=\d+ )?(?:\[F\] )?(.*)$")
LINE_RE = re.compile(r"^(.*) (\S*):(-?\d+) s=(-?\d+)(?:\(.*\))?$")
LABEL_RE = re.compile(r"([^\s:\[\]]+):\[([^\]]*)\]")


def frame_name(text):
    text = text.strip()
    if not text or text == "??":
        return None
    m = LINE_RE.match(text)
    return m.group(1) if m else text


def parse_pprof_raw(text):
    prof = Profile()
    section = None
    raw_samples = []
    locations = {}
    cur_loc = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("PeriodType:"):
            prof.period_type = line.split(":", 1)[1].strip()
            continue
        if line.startswith("Samples:"):
            section = "samples"
            if i < len(lines):
                prof.sample_types = lines[i].split()
                i += 1
            continue
        if line.startswith("Locations"):
            section = "locations"
            continue
        if line.startswith("Mappings"):
            section = "mappings"
            continue
        if section == "samples":
            head, sep, tail = line.partition(":")
            if sep and head.split() and all(v.lstrip("-").isdigit() for v in head.split()):
                ids = [int(x) for x in tail.split()]
                raw_samples.append([int(head.split()[0]), ids, {}])
            elif raw_samples:
                for key, val in LABEL_RE.findall(line):
                    vals = val.split()
                    # a numeric label may carry its unit after the number
                    numeric = vals and vals[0].lstrip("-").isdigit()
                    raw_samples[-1][2][key] = vals[:1] if numeric else [val]
        elif section == "locations":
            m = LOC_RE.match(line)
            if m:
                cur_loc = int(m.group(1))
                locations[cur_loc] = []
                name = frame_name(m.group(3))
                locations[cur_loc].append(name if name else m.group(2))
            elif cur_loc is not None and line.startswith(" " * 13) and line.strip():
                name = frame_name(line)
                if name:
                    locations[cur_loc].append(name)
    for count, ids, labels in raw_samples:
        stack = []
        for lid in ids:
            stack.extend(strip_kernel_suffix(n) for n in locations.get(lid, ["?"]))
        prof.samples.append(Sample(count, stack, labels))
    return prof


def parse_perf_script(text):
    prof = Profile()
    cur = None
    head_re = re.compile(r"^(.*?)\s+(\d+)/(\d+)\s*")
    for line in text.splitlines():
        if not line.strip():
            if cur:
                prof.samples.append(cur)
            cur = None
            continue
        if not line[0].isspace():
            m = head_re.match(line)
            if not m:
                continue
            cur = Sample(1, [], {"process_name": [m.group(1).strip()], "pid": [m.group(2)],
                                 "tid": [m.group(3)]})
        elif cur is not None:
            parts = line.split(None, 1)
            sym = parts[1].strip() if len(parts) > 1 else "[unknown]"
            sym = re.sub(r"\+0x[0-9a-f]+$", "", sym.split(" (")[0])
            cur.stack.append(sym)
    if cur:
        prof.samples.append(cur)
    return prof


def parse_folded(text):
    prof = Profile()
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            continue
        stack_text, _, count = line.rpartition(" ")
        frames = stack_text.split(";")
        prof.samples.append(Sample(int(count), [strip_kernel_suffix(f) for f in reversed(frames[1:])],
                                   {"process_name": [frames[0]]}))
    return prof


PARSERS = {"pprof": parse_pprof_raw, "perf": parse_perf_script, "folded": parse_folded}


def load(kind, path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        print(f"error: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    prof = PARSERS[kind](text)
    if not prof.samples:
        print(f"error: no samples in {path} (read as {kind})", file=sys.stderr)
        sys.exit(2)
    return prof


def select(prof, pid):
    if pid is None:
        return prof.samples
    return [s for s in prof.samples if str(pid) in s.labels.get("pid", [])]


def self_counts(samples, funcs):
    counts = {f: 0 for f in funcs}
    for s in samples:
        if s.stack and s.stack[0] in counts:
            counts[s.stack[0]] += s.count
    return counts


def shares(samples, funcs):
    counts = self_counts(samples, funcs)
    total = sum(counts.values())
    return counts, {f: (100.0 * c / total if total else 0.0) for f, c in counts.items()}


def cmd_shares(a):
    counts, pct = shares(select(load(a.kind, a.file), a.pid), a.funcs.split(","))
    for f in counts:
        print(f"{f} {counts[f]} {pct[f]:.1f}")
    return 0


def cmd_check_shares(a):
    expect = {k: float(v) for k, v in (x.split("=") for x in a.expect.split(","))}
    samples = select(load(a.kind, a.file), a.pid)
    counts, pct = shares(samples, list(expect))
    total = sum(counts.values())
    bad = 0
    if total < a.min_samples:
        print(f"FAIL: only {total} samples in {', '.join(expect)} (want >= {a.min_samples})")
        return 1
    for f, want in expect.items():
        ok = abs(pct[f] - want) <= a.tol
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'}: {f} self {pct[f]:.1f}% of {total} "
              f"(expected {want:.0f} +- {a.tol:.0f})")
    return 1 if bad else 0


def cmd_check_callers(a):
    samples = [s for s in select(load(a.kind, a.file), a.pid) if s.stack and s.stack[0] == a.func]
    total = sum(s.count for s in samples)
    if not total:
        print(f"FAIL: no samples with {a.func} as leaf")
        return 1
    above = [x for x in a.above.split(",") if x] if a.above else []
    good = 0
    for s in samples:
        if a.caller and (len(s.stack) < 2 or s.stack[1] != a.caller):
            continue
        if all(x in s.stack[1:] for x in above):
            good += s.count
    frac = good / total
    ok = frac >= a.min
    chain = ([a.caller] if a.caller else []) + above
    print(f"{'ok' if ok else 'FAIL'}: {frac * 100:.1f}% of {total} {a.func} samples have callers "
          f"{' <- '.join(chain)} (want >= {a.min * 100:.0f}%)")
    if not ok:
        for s in samples[:3]:
            print("   e.g. " + " <- ".join(s.stack[:8]))
    return 0 if ok else 1


def cmd_compare(a):
    funcs = a.funcs.split(",")
    c1, p1 = shares(select(load(a.kind1, a.file1), a.pid1), funcs)
    c2, p2 = shares(select(load(a.kind2, a.file2), a.pid2), funcs)
    bad = 0
    if sum(c1.values()) < a.min_samples or sum(c2.values()) < a.min_samples:
        print(f"FAIL: too few samples to compare ({sum(c1.values())} vs {sum(c2.values())})")
        return 1
    for f in funcs:
        ok = abs(p1[f] - p2[f]) <= a.tol
        bad += not ok
        print(f"{'ok' if ok else 'FAIL'}: {f} {a.kind1} {p1[f]:.1f}% vs {a.kind2} {p2[f]:.1f}% "
              f"(+- {a.tol:.0f})")
    return 1 if bad else 0


def cmd_check_rate(a):
    """Samples x sampling period against the CPU time the process really used."""
    total = sum(s.count for s in select(load(a.kind, a.file), a.pid))
    covered = total / a.hz
    ratio = covered / a.cpu_seconds if a.cpu_seconds > 0 else 0.0
    ok = a.min <= ratio <= a.max
    print(f"{'ok' if ok else 'FAIL'}: {total} samples at {a.hz:.0f} Hz cover {covered:.2f} s of "
          f"{a.cpu_seconds:.2f} s CPU time (ratio {ratio:.2f}, want {a.min}..{a.max})")
    return 0 if ok else 1


def cmd_pids(a):
    counts = {}
    for s in load(a.kind, a.file).samples:
        if a.func and a.func not in s.stack:
            continue
        for p in s.labels.get("pid", ["?"]):
            counts[p] = counts.get(p, 0) + s.count
    for p, c in sorted(counts.items(), key=lambda x: -x[1]):
        print(f"{p} {c}")
    return 0


def cmd_sample_types(a):
    prof = load("pprof", a.file)
    for t in prof.sample_types:
        print(t)
    return 0


def cmd_label_values(a):
    vals = set()
    for s in load("pprof", a.file).samples:
        vals.update(s.labels.get(a.key, []))
    for v in sorted(vals):
        print(v)
    return 0


def cmd_svg_names(a):
    try:
        root = ET.parse(a.file).getroot()
    except (ET.ParseError, OSError) as e:
        print(f"FAIL: {a.file} is not well-formed XML: {e}")
        return 1
    if not root.tag.endswith("svg"):
        print(f"FAIL: {a.file} root element is {root.tag}, not svg")
        return 1
    text = " ".join(t for el in root.iter() for t in (el.text or "", el.tail or "",
                                                       *el.attrib.values()))
    missing = [n for n in a.names if n not in text]
    for n in a.names:
        print(f"{'FAIL' if n in missing else 'ok'}: SVG names {n}")
    return 1 if missing else 0


MAP_RE = re.compile(r"^\s*(\d+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+)")
RAW_LOC_RE = re.compile(r"^\s*(\d+): (0x[0-9a-f]+) M=(\d+) (\S+)")


def elf_loads(binary):
    """(file offset, ELF address, file size) of each PT_LOAD, from readelf."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True,
                         check=True).stdout
    return [(int(f[1], 16), int(f[2], 16), int(f[4], 16))
            for f in (line.split() for line in out.splitlines()) if f and f[0] == "LOAD"]


def debug_file_of(binary):
    """The separate debug file of a stripped binary under /usr/lib/debug/.build-id, or None."""
    out = subprocess.run(["readelf", "-n", binary], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]{4,})", out)
    path = m and f"/usr/lib/debug/.build-id/{m.group(1)[:2]}/{m.group(1)[2:]}.debug"
    return path if path and os.path.exists(path) else None


def elf_functions(binary):
    """Sorted (address, name) of the defined functions, from nm (the dynamic table too, and
    the separate debug file's table, which the agent names from too, when there is one)."""
    syms = set()
    debug = debug_file_of(binary)
    for extra, path in ([], binary), (["-D"], binary), ([], debug):
        if not path:
            continue
        out = subprocess.run(["nm", "-n", "--defined-only", *extra, path],
                             capture_output=True, text=True).stdout
        for f in (line.split() for line in out.splitlines()):
            if len(f) == 3 and f[1] in "tTwWi":
                syms.add((int(f[0], 16), f[2].split("@")[0]))
    return sorted(syms)


def raw_sections(text):
    """(section, line) for every line of `go tool pprof -raw`, section its last heading."""
    section = None
    for line in text.splitlines():
        if line.startswith(("Locations", "Mappings", "Samples:")):
            section = line.split()[0].rstrip(":")
        else:
            yield section, line


def cmd_check_addresses(a):
    maps, locs, checked, bad = {}, [], 0, []
    for section, line in raw_sections(open(a.file).read()):
        m = MAP_RE.match(line) if section == "Mappings" else None
        if m and m.group(5) in a.binaries:
            maps[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16),
                                m.group(5))
        m = RAW_LOC_RE.match(line) if section == "Locations" else None
        if m:
            locs.append((int(m.group(2), 16), m.group(3), m.group(4)))
    elf = {b: (elf_loads(b), elf_functions(b)) for b in a.binaries}
    for addr, mapping, name in locs:
        if mapping not in maps:
            continue
        start, limit, offset, binary = maps[mapping]
        loads, funcs = elf[binary]
        checked += 1
        if not start <= addr < limit:
            bad.append(f"{name} at {addr:#x} outside its mapping {start:#x}-{limit:#x}")
            continue
        foff = addr - start + offset
        vaddr = next((v + foff - o for o, v, n in loads if o <= foff < o + n), None)
        if vaddr is None:
            bad.append(f"{name}: file offset {foff:#x} in no PT_LOAD of {binary}")
            continue
        placeholder = re.match(r".*\+0x([0-9a-f]+)$", name)
        if placeholder:
            if int(placeholder.group(1), 16) != vaddr:
                bad.append(f"{name}: the address leads to ELF {vaddr:#x}")
            continue
        below = [f for f in funcs if f[0] <= vaddr]
        if not below or name not in {n for v, n in below if v == below[-1][0]}:
            bad.append(f"{name} at {addr:#x}: ELF {vaddr:#x} is in "
                       f"{below[-1][1] if below else 'no function'}")
    for b in bad[:10]:
        print(f"FAIL: {b}")
    print(f"{'ok' if checked and not bad else 'FAIL'}: {checked} locations in "
          f"{', '.join(a.binaries)}, {len(bad)} wrong")
    return 0 if checked and not bad else 1


UNNAMED_LOC_RE = re.compile(r"^\s*(\d+): (0x[0-9a-f]+) M=(\d+)\s*(\S*)")
RAW_MAP_FULL_RE = re.compile(
    r"^\s*(\d+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (\S+)(?: ([0-9a-f]+))?( \[FN\])?")


def cmd_check_unnamed(a):
    """Unnamed frames of a file: Locations with an address inside the function nm places
    there and no function (with --drawn: the function NAME+0x<that ELF address>), in a
    Mapping with the file's name and build id and no [FN]."""
    maps, unnamed = {}, []
    for section, line in raw_sections(open(a.file).read()):
        m = RAW_MAP_FULL_RE.match(line) if section == "Mappings" else None
        if m and os.path.basename(m.group(5)) == a.name:
            maps[m.group(1)] = (int(m.group(2), 16), int(m.group(4), 16), m.group(6) or "",
                                bool(m.group(7)))
        m = UNNAMED_LOC_RE.match(line) if section == "Locations" else None
        if m and (m.group(4).startswith(a.name + "+0x") if a.drawn else not m.group(4)):
            unnamed.append((int(m.group(2), 16), m.group(3), m.group(4)))
    if not maps:
        print(f"FAIL: no mapping of {a.name}")
        return 1
    bad = [f"mapping {k}: build id {v[2]!r}, has_functions {v[3]}"
           for k, v in maps.items() if v[2] != a.build_id or v[3]]
    lo, size = int(a.func_addr, 16), int(a.func_size, 16)
    inside = [addr for addr, mid, _ in unnamed if mid in maps and
              lo <= addr - maps[mid][0] + maps[mid][1] < lo + size]
    for addr, mid, name in unnamed:
        if a.drawn and mid in maps and \
                int(name.split("+0x")[1], 16) != addr - maps[mid][0] + maps[mid][1]:
            bad.append(f"{name} at {addr:#x}: its ELF address is "
                       f"{addr - maps[mid][0] + maps[mid][1]:#x}")
    if not inside:
        bad.append(f"no unnamed location of {a.name} inside {lo:#x}+{size:#x}")
    for b in bad:
        print(f"FAIL: {b}")
    print(f"{'ok' if not bad else 'FAIL'}: {len(unnamed)} unnamed locations, {len(inside)} in "
          f"the function")
    return 0 if not bad else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    kinds = list(PARSERS)

    p = sub.add_parser("shares")
    p.add_argument("kind", choices=kinds)
    p.add_argument("file")
    p.add_argument("--pid")
    p.add_argument("--funcs", required=True)
    p.set_defaults(fn=cmd_shares)

    p = sub.add_parser("check-shares")
    p.add_argument("kind", choices=kinds)
    p.add_argument("file")
    p.add_argument("--pid")
    p.add_argument("--expect", required=True)
    p.add_argument("--tol", type=float, default=7.0)
    p.add_argument("--min-samples", type=int, default=200)
    p.set_defaults(fn=cmd_check_shares)

    p = sub.add_parser("check-callers")
    p.add_argument("kind", choices=kinds)
    p.add_argument("file")
    p.add_argument("--pid")
    p.add_argument("--func", required=True)
    p.add_argument("--caller", help="the immediate caller")
    p.add_argument("--above", help="comma-separated functions somewhere above")
    p.add_argument("--min", type=float, default=0.9, help="fraction of the samples")
    p.set_defaults(fn=cmd_check_callers)

    p = sub.add_parser("compare")
    p.add_argument("kind1", choices=kinds)
    p.add_argument("file1")
    p.add_argument("kind2", choices=kinds)
    p.add_argument("file2")
    p.add_argument("--pid1")
    p.add_argument("--pid2")
    p.add_argument("--funcs", required=True)
    p.add_argument("--tol", type=float, default=7.0)
    p.add_argument("--min-samples", type=int, default=200)
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("check-rate")
    p.add_argument("kind", choices=kinds)
    p.add_argument("file")
    p.add_argument("--pid")
    p.add_argument("--hz", type=float, required=True)
    p.add_argument("--cpu-seconds", type=float, required=True)
    p.add_argument("--min", type=float, default=0.8)
    p.add_argument("--max", type=float, default=1.15)
    p.set_defaults(fn=cmd_check_rate)

    p = sub.add_parser("pids")
    p.add_argument("kind", choices=kinds)
    p.add_argument("file")
    p.add_argument("--func")
    p.set_defaults(fn=cmd_pids)

    p = sub.add_parser("sample-types")
    p.add_argument("file")
    p.set_defaults(fn=cmd_sample_types)

    p = sub.add_parser("label-values")
    p.add_argument("file")
    p.add_argument("key")
    p.set_defaults(fn=cmd_label_values)

    p = sub.add_parser("check-unnamed")
    p.add_argument("file")
    p.add_argument("name")
    p.add_argument("build_id")
    p.add_argument("func_addr")
    p.add_argument("func_size")
    p.add_argument("--drawn", action="store_true")
    p.set_defaults(fn=cmd_check_unnamed)

    p = sub.add_parser("check-addresses")
    p.add_argument("file")
    p.add_argument("binaries", nargs="+")
    p.set_defaults(fn=cmd_check_addresses)

    p = sub.add_parser("svg-names")
    p.add_argument("file")
    p.add_argument("names", nargs="+")
    p.set_defaults(fn=cmd_svg_names)

    a = ap.parse_args()
    sys.exit(a.fn(a))


if __name__ == "__main__":
    main()
