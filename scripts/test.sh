#!/usr/bin/env bash
# Runs every test: formatting, the unit and fuzz tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, the full ctest suite of ./build (unit, fuzz corpus replay,
# conformance, and integration as root), then the kernel matrix (tests/vm: other kernels
# booted under QEMU). Run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== clang-format"
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find collector exporter kmod-shim tests -name '*.[ch]')
clang-format --dry-run -Werror $files
echo "formatting ok"

echo "== build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPP_WERROR=ON >/dev/null
cmake --build build -j"$(nproc)"

echo "== sanitizer build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPP_WERROR=ON \
	-DPP_SANITIZE=address,undefined >/dev/null
cmake --build build-asan -j"$(nproc)"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest -L 'unit|fuzz' --output-on-failure -j2)

echo "== all tests"
(cd build && ctest --output-on-failure)

echo "== kernel matrix"
# KVM where /dev/kvm is kvm_intel or kvm_amd, else QEMU's TCG: a few minutes either way.
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "skipped: no qemu-system-x86_64 (scripts/setup.sh installs qemu-system-x86)"
elif [ "$(id -u)" -ne 0 ]; then
	echo "skipped: the kernel matrix needs root (virtiofsd, a read-only bind of /)"
else
	tests/vm/run-matrix.sh -b build
fi
