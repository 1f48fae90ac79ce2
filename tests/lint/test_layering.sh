#!/usr/bin/env bash
# The collector's folders depend on each other one way only, as their READMEs declare
# (check_layering.py). The checker is also shown to reject trees that break each rule, so a
# checker that accepts everything fails here.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${PP_SOURCE_DIR:-$here/../..}/collector/src
py=$(command -v python3) || { echo "skipped: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # name, expected exit (0 or 1), tree
	local out rc
	out=$("$py" "$here/check_layering.py" "$3" 2>&1)
	rc=$?
	if [ "$rc" -eq "$2" ]; then
		echo "ok - $1"
	else
		echo "not ok - $1 (exit $rc, wanted $2)"
		echo "$out" | sed 's/^/    /'
		fails=$((fails + 1))
	fi
	[ "$2" -eq 0 ] && echo "$out" | sed 's/^/    /'
	return 0
}

check "collector/src keeps its declared layering" 0 "$src"

mutate() { # name, then a command run inside a fresh copy of the tree
	rm -rf "$tmp/t" && cp -r "$src" "$tmp/t"
	(cd "$tmp/t" && eval "$2")
	check "rejected: $1" 1 "$tmp/t"
}
mutate "a leaf includes upward (metadata -> sampling)" \
	'sed -i "0,/#include \"/s//#include \"sampling\/events.h\"\n#include \"/" metadata/json.c'
mutate "an include of the own folder by its name" \
	'sed -i "s|#include \"events.h\"|#include \"sampling/events.h\"|" sampling/events.c'
mutate "a bare include of another folder's header" \
	'sed -i "0,/#include \"/s//#include \"log.h\"\n#include \"/" process/procmaps.c'
mutate "a cycle in the declared lines" \
	'sed -i "s/^May use: base$/May use: cli, base/" process/README.md'
mutate "a folder without a README" 'mkdir -p extra && echo "int x;" >extra/x.c'
mutate "a header that does not exist" \
	'sed -i "0,/#include \"/s//#include \"base\/nosuch.h\"\n#include \"/" cli/main.c'

if [ "$fails" -gt 0 ]; then
	echo "$fails layering check(s) failed"
	exit 1
fi
