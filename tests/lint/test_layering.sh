#!/usr/bin/env bash
# The collector's and the exporter's folders depend on each other one way only, as their
# READMEs declare (check_layering.py). The checker is also shown to reject trees that break
# each rule, so a checker that accepts everything fails here.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${PP_SOURCE_DIR:-$here/../..}
src=$root/collector/src
exp=$root/exporter/src
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
check "exporter/src keeps its declared layering" 0 "$exp"

mutate() { # name, then a command run inside a fresh copy of the tree (TREE: default collector)
	rm -rf "$tmp/t" && cp -r "${TREE:-$src}" "$tmp/t"
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
TREE=$exp mutate "exporter: base includes upward (base -> encode)" \
	'sed -i "0,/#include \"/s//#include \"encode\/pbpack.h\"\n#include \"/" base/htab.c'
TREE=$exp mutate "exporter: the encoders include the splitter (encode -> split)" \
	'echo "#include \"split/nosuch.h\"" >>encode/otlp.c && touch split/nosuch.h'
TREE=$exp mutate "exporter: a file at the top level includes a folder" \
	'echo "#include \"base/htab.h\"" >top.c'

if [ "$fails" -gt 0 ]; then
	echo "$fails layering check(s) failed"
	exit 1
fi
