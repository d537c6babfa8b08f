#!/usr/bin/env bash
# CI for aarch64: cross-build with gcc-aarch64-linux-gnu and run the kernel tests (the GGML
# block types' integer matmul included), stories260K, llama256 GGUF (every quantized type
# through the integer path) and batch/chunk/thread invariance tests under qemu-aarch64, once
# with every feature qemu has (-cpu max: SVE, i8mm, bf16, ...) and once as a Kunpeng-920-like
# core (cortex-a76: NEON, fp16, dotprod, no SVE), so the NEON paths and the HWCAP dispatch run
# on every change.
# Speed under qemu means nothing; this is a correctness check (bench/arm64_insns.sh counts
# instructions instead).
#   T="kernels stories gguf_model_llama256 gguf_model_quantized invariance thread_count"
#     .ci/arm64.sh                        test-name substrings (default)
#   BUILD_ARM64=build-arm64               build folder
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
# The arm64 -dev packages of every library in the Makefile's PKGS.
ARM_PKGS="libjansson-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libxxhash-dev:arm64 libmicrohttpd-dev:arm64 libcurl4-openssl-dev:arm64 libssl-dev:arm64 libyaml-dev:arm64"
if ! dpkg -s gcc-aarch64-linux-gnu qemu-user $ARM_PKGS >/dev/null 2>&1; then
    echo "== installing the aarch64 cross toolchain, qemu-user and arm64 libraries"
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user $ARM_PKGS >/dev/null
fi

BUILD="${BUILD_ARM64:-build-arm64}"
T="${T:-kernels stories gguf_model_llama256 gguf_model_quantized invariance thread_count}"
JOBS=$(nproc)

echo "== cross-build ($BUILD)"
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
    make -j"$JOBS" CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar BUILD="$BUILD" \
    all "$BUILD/xinfer_tests"

# No binfmt_misc in CI containers: tests that start the CLI or a tool get wrapper scripts
# that run the aarch64 binary through qemu (QEMU_CPU / QEMU_LD_PREFIX come from the env).
WRAP="$BUILD/qemu-wrap"
mkdir -p "$WRAP/tools"
wrap() {
    printf '#!/bin/sh\nexec qemu-aarch64 "%s" "$@"\n' "$(realpath "$1")" >"$2"
    chmod +x "$2"
}
wrap "$BUILD/xinfer" "$WRAP/xinfer"
for t in "$BUILD"/tools/*; do
    [ -f "$t" ] && [ -x "$t" ] && wrap "$t" "$WRAP/tools/$(basename "$t")"
done

export XINFER_TEST_DATA="${XINFER_TEST_DATA:-$(cd .. && pwd)/shared/data}"
export XINFER_BIN="$WRAP/xinfer" XINFER_TOOLS="$WRAP/tools"
# The arm64 multiarch libraries (libc6:arm64, pulled in by the :arm64 -dev packages) live
# under / like the host's. Pointing qemu at the cross sysroot (-L /usr/aarch64-linux-gnu)
# mixes its libc with them, and then thread creation and fork hang under qemu 7.2.
export QEMU_LD_PREFIX=/
# The kernel tests fail when the variant the CPU model must select is missing.
export XINFER_EXPECT_KERNELS=neon
for cpu in max cortex-a76; do
    echo "== tests under qemu-aarch64 -cpu $cpu: $T"
    # shellcheck disable=SC2086
    QEMU_CPU="$cpu" qemu-aarch64 "$BUILD/xinfer_tests" $T
done
