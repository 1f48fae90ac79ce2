#!/usr/bin/env bash
# Nothing stray at the top of the tree: every tracked file or folder there is one the layout
# names (collector/, exporter/, proto/, kmod-shim/, deploy/, tests/, CMakeLists.txt, README.md,
# and the project's own bench/, scripts/, .ci/ and dotfiles). A log or capture a test or a
# session left behind fails here. Outside a git checkout it is skipped.
set -uo pipefail
top=${PP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
command -v git >/dev/null && git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
	{ echo "skipped: not a git checkout"; exit 77; }
allowed='^(collector|exporter|proto|kmod-shim|deploy|tests|bench|scripts|\.ci|CMakeLists\.txt|README\.md|\.clang-format|\.clang-tidy|\.gitignore|LICENSE|NOTICE)$'
stray=$(git -C "$top" ls-files | awk -F/ '{print $1}' | sort -u | grep -vE "$allowed")
if [ -n "$stray" ]; then
	echo "not ok - tracked at the top level but not part of the layout:"
	echo "$stray" | sed 's/^/    /'
	exit 1
fi
echo "ok - the top level holds only what the layout names"
