#!/usr/bin/env bash
# Installs what pebsprof needs on Debian 12 (build, run and test dependencies) and builds it
# into ./build. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
	# build
	build-essential cmake pkg-config clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev
	protobuf-c-compiler libprotobuf-c-dev libcurl4-openssl-dev
	# tests: independent decoders, the peer profiler, sanitizer runtimes, formatting
	protobuf-compiler python3 python3-protobuf golang-go linux-perf libclang-rt-14-dev
	clang-format util-linux bsdutils procps time
)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing packages: ${missing[*]}; run this script as root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built build/collector/pebsprof"
