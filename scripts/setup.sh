#!/usr/bin/env bash
# Installs what pebsprof needs on Debian 12 (build, run and test dependencies) and builds it
# into ./build. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
	# build
	build-essential cmake pkg-config clang llvm bpftool libbpf-dev libelf-dev libdw-dev libcapstone-dev zlib1g-dev
	protobuf-c-compiler libprotobuf-c-dev libcurl4-openssl-dev
	# symbol names (libiberty's demangler: C++, Rust legacy and v0), zstd-compressed sections
	libiberty-dev libzstd-dev
	# loaded at run time for --debuginfod (symbolize/debuginfod_fetch.c), and for memory
	# events' data types (libcapstone4, with libcapstone-dev above: symbolize/data_type.c)
	libdebuginfod1
	# tests: independent decoders, the peer profiler, sanitizer runtimes, formatting
	protobuf-compiler python3 python3-protobuf golang-go linux-perf libclang-rt-14-dev
	clang-format util-linux bsdutils procps time openssl
	# a real debuginfod server, and the JIT runtimes whose perf maps are read
	debuginfod openjdk-17-jdk-headless
	# the toolchains whose programs are unwound and named: LLVM's linker, Rust, Go
	lld rustc
	# the kernel matrix (tests/vm): QEMU with virtiofsd, a static busybox for the initramfs
	qemu-system-x86 busybox-static xz-utils
	# deploy tests: YAML lint, the chart renderer's Go sources, the image's CA bundle
	yamllint golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev ca-certificates
	# the image built and run as the DaemonSet runs it (tests/integration/test_image_podman.sh)
	podman runc slirp4netns netavark curl
)
# Node.js for the Kubernetes schema checks (npm kubernetes-models); a NodeSource or other
# install that already provides node and npm is kept.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
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

# The deploy tests' npm packages, pinned by tests/deploy/package-lock.json (offline afterwards).
if [ ! -d tests/deploy/node_modules ] || [ tests/deploy/package-lock.json -nt tests/deploy/node_modules ]; then
	npm ci --prefix tests/deploy --no-audit --no-fund >/dev/null ||
		echo "setup: npm ci --prefix tests/deploy failed: the deploy schema tests will be skipped" >&2
fi
