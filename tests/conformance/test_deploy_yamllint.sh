#!/bin/bash
# yamllint over deploy/ with deploy/.yamllint: manifests, the chart's values and Chart.yaml,
# the example stacks. Helm templates are checked through their rendering (test_deploy_helm).
set -u
. "$PP_SOURCE_DIR/tests/deploy/common.sh"

command -v yamllint >/dev/null || skip "yamllint not found (Debian package yamllint)"
files=$(find "$deploy_dir" -name '*.yaml' -not -path '*/helm/pebsprof/templates/*' | sort)
n=$(printf '%s\n' "$files" | grep -c .)
[ "$n" -ge 10 ] || fail "only $n YAML files under $deploy_dir"
# -s: warnings fail too.
if ! out=$(yamllint -s -f parsable -c "$deploy_dir/.yamllint" $files 2>&1); then
	fail "yamllint:"
	printf '%s\n' "$out"
fi
# The linter must see problems, or this test could never fail.
bad=$(mktemp --suffix=.yaml)
trap 'rm -f "$bad"' EXIT
printf 'a: 1\na: 2\nb:  [x,y]   \n' >"$bad"
yamllint -s -c "$deploy_dir/.yamllint" "$bad" >/dev/null 2>&1 && fail "yamllint accepted a file with a duplicate key"
echo "yamllint: $n files"
finish
