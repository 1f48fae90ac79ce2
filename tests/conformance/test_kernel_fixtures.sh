#!/bin/bash
# The probe reports the kernel matrix kept (tests/data/kernels/probe-NAME.json, written by
# tests/vm/run-matrix.sh -u inside each kernel) agree with tests/vm/kernels.list: one fixture
# per kernel, BTF and the ring buffer everywhere, bpf_cast_to_kern_ctx exactly where the list
# expects the kctx variant, attach cookies from 5.15, and the release the name says.
set -u
src=${PP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
while read -r name suites expect; do
	case $name in '' | '#'*) continue ;; esac
	f=$src/tests/data/kernels/probe-$name.json
	[ -s "$f" ] || { fail "$name: no fixture $f (tests/vm/run-matrix.sh -u -k $name)"; continue; }
	variant=$(echo "$expect" | tr ' ' '\n' | sed -n 's/^variant=//p')
	out=$(/usr/bin/python3 - "$f" "$name" "$variant" <<'PY'
import json, sys
path, name, variant = sys.argv[1:4]
k = json.load(open(path))["kernel"]
major, minor = (int(x) for x in name.split(".")[:2])
problems = []
if not k["release"].startswith(name + "."):
    problems.append(f"release {k['release']} is not {name}")
for key in ("btf", "ringbuf", "perf_event_prog"):
    if not k.get(key):
        problems.append(f"{key} missing")
if k.get("cast_to_kern_ctx") != (variant == "kctx"):
    problems.append(f"cast_to_kern_ctx={k.get('cast_to_kern_ctx')} but the list expects variant {variant}")
if k.get("attach_cookie") != ((major, minor) >= (5, 15)):
    problems.append(f"attach_cookie={k.get('attach_cookie')} on {name}")
if k.get("unwind_tables") != ((major, minor) >= (5, 17)):
    problems.append(f"unwind_tables={k.get('unwind_tables')} on {name} (bpf_loop is 5.17+)")
print("; ".join(problems))
PY
)
	[ -z "$out" ] && echo "ok: $name ($(sed -n 's/.*"release": *"\([^"]*\)".*/\1/p' "$f" | head -n1))" ||
		fail "$name: $out"
done <"$src/tests/vm/kernels.list"
[ $fails = 0 ] && echo "all kernel fixtures agree" || exit 1
