#!/usr/bin/env python3
"""Checks a source tree's folder layering (collector/src, exporter/src): every quoted #include
under SRC against the "May use:" line of the including folder's README.md (SRC/README.md for
the files at the top, named "session" in those lines).

Rules:
- an include across folders names the folder ("sampling/events.h") and the file exists;
- an include within a folder is bare ("events.h"), never "own_folder/x.h";
- a bare include is a file of the same folder, the session header at the top, or a header
  generated at build time (listed below);
- the folder included from is on the including folder's "May use:" line;
- the "May use:" lines form no cycle.

Usage: check_layering.py SRC. Prints one line per violation and exits 1, else a summary.
"""
import os
import re
import sys

TOP = "session"  # the name the "May use:" lines give the files at the top of SRC
GENERATED = {
    "shim_core.skel.h",  # bpftool skeletons (kmod-shim/)
    "shim_kctx.skel.h",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h",  # proto/
    "pprof/profile.pb-c.h",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAY_USE = re.compile(r"^May use:\s*(.*)$", re.M)


def may_use(readme):
    with open(readme, encoding="utf-8") as f:
        m = MAY_USE.search(f.read())
    if not m:
        return None
    names = [n.strip() for n in m.group(1).split(",")]
    return set() if names == ["nothing"] else set(names)


def main(src):
    errors = []
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    allowed = {}
    for name in folders + [TOP]:
        readme = os.path.join(src, name if name != TOP else "", "README.md")
        if not os.path.exists(readme):
            errors.append(f"{name}: no README.md saying what it owns and may use")
            continue
        uses = may_use(readme)
        if uses is None:
            errors.append(f"{readme}: no 'May use:' line")
            continue
        for u in sorted(uses - set(folders) - {TOP}):
            errors.append(f"{readme}: 'May use:' names {u!r}, which is not a folder")
        allowed[name] = uses

    # The declared graph must be a DAG: depth-first search for a back edge.
    state = {}

    def visit(n, path):
        state[n] = "open"
        for m in sorted(allowed.get(n, ())):
            if state.get(m) == "open":
                errors.append("the 'May use:' lines form a cycle: " + " -> ".join(path + [m]))
            elif m not in state:
                visit(m, path + [m])
        state[n] = "done"

    for n in sorted(allowed):
        if n not in state:
            visit(n, [n])

    edges = set()
    nfiles = 0
    for dirpath, _, files in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        if rel != "." and os.sep in rel:
            errors.append(f"{rel}: folders nest one level only")
            continue
        here = TOP if rel == "." else rel
        for fn in sorted(files):
            if not fn.endswith((".c", ".h")):
                continue
            nfiles += 1
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                where = f"{os.path.relpath(path, src)}: #include \"{inc}\""
                if inc in GENERATED:
                    continue
                if "/" in inc:
                    folder = inc.split("/", 1)[0]
                    if folder not in folders:
                        errors.append(f"{where}: {folder!r} is not a folder of {src}")
                        continue
                    if not os.path.exists(os.path.join(src, inc)):
                        errors.append(f"{where}: no such file")
                        continue
                    if folder == here:
                        errors.append(f"{where}: within a folder the include is bare")
                        continue
                    target = folder
                elif os.path.exists(os.path.join(dirpath, inc)):
                    continue
                elif os.path.exists(os.path.join(src, inc)):
                    target = TOP
                else:
                    errors.append(f"{where}: not in {here}/; name its folder")
                    continue
                edges.add((here, target))
                if here in allowed and target not in allowed[here]:
                    errors.append(f"{where}: {here} may not use {target} "
                                  f"(its README's 'May use:' line)")
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print(f"ok: {nfiles} files in {len(folders)} folders, {len(edges)} folder dependencies, "
          "all declared, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
