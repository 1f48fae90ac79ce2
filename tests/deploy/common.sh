# Shared by tests/conformance/test_deploy_*.sh: locations, skip rules and failure counting.
# shellcheck shell=bash
: "${PP_SOURCE_DIR:?}"
deploy_dir="$PP_SOURCE_DIR/deploy"
tests_dir="$PP_SOURCE_DIR/tests/deploy"
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
skip() {
	echo "skipped: $*"
	exit 77
}
finish() {
	if [ "$fails" -gt 0 ]; then
		echo "$fails failure(s)"
		exit 1
	fi
	echo "all checks passed"
	exit 0
}
# The node scripts need node and the packages of tests/deploy/package-lock.json.
need_node() {
	command -v node >/dev/null || skip "node not found (Debian package nodejs)"
	[ -d "$tests_dir/node_modules/kubernetes-models" ] && [ -d "$tests_dir/node_modules/yaml" ] ||
		skip "kubernetes-models not installed: npm ci --prefix tests/deploy (scripts/setup.sh does it)"
}
# The agent binary of this build, for `run --config FILE --dry-run` checks of config files.
need_agent() {
	agent="${PP_BUILD_DIR:?}/collector/pebsprof"
	[ -x "$agent" ] || { fail "$agent not built"; finish; }
}
# dry_run FILE: the agent parses the config file as it would in the pod, without the caller's
# environment (OTEL_*, PEBSPROF_* would override the file).
dry_run() {
	env -i PATH="$PATH" "$agent" run --config "$1" --dry-run
}
