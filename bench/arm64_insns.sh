#!/usr/bin/env bash
# Instructions per multiply-add of the aarch64 matmul, counted under qemu-user: speed under
# an emulator means nothing, but the dynamic instruction count of the kernels' loops is
# exact and says how much work NEON does per weight. For each case, matmul_once runs with
# 1 and with 2 calls under `qemu-aarch64 -d in_asm,exec,nochain` (every translated block's
# instructions, and every execution of a block); the difference of the two totals is one
# call, divided by rows x n_out x n_in.
#   bench/arm64_insns.sh            after .ci/arm64.sh has cross-built build-arm64
#   QEMU_CPU=cortex-a76             the CPU model (default: a Kunpeng-920-like one)
#   CASES="f16:1:256:896 ..."      format:rows:n_out:n_in (default below); format/row, e.g.
#                                  f16/row, keeps the weight row-major (--load-format mmap);
#                                  a GGML block type by ggml name (q4_K:1:64:1024) runs its
#                                  integer matmul on random blocks
#   PRECISIONS="exact int8"        kernel precisions for int8, awq and GGML types
#                                  (XINFER_KERNEL_PRECISION; int8 counts the quantization of x
#                                  with the integer matmul)
#   KERNELS=ref                    the variant (XINFER_KERNELS' names; default: the CPU's), e.g.
#                                  to compare NEON with the scalar reference
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD_ARM64:-build-arm64}"
BIN="$BUILD/bench/matmul_once"
PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
    make -s CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar BUILD="$BUILD" "$BIN"
export QEMU_CPU="${QEMU_CPU:-cortex-a76}" QEMU_LD_PREFIX=/
CASES="${CASES:-f32:1:256:896 f16:1:256:896 bf16:1:256:896 int8:1:256:896 awq:1:256:896
       f32:4:64:896 f16:4:64:896 bf16:4:64:896 int8:4:64:896 awq:4:64:896
       f32:32:64:896 f16:32:64:896 bf16:32:64:896 int8:32:64:896 awq:32:64:896}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Total guest instructions executed: in_asm lists each translated block ("IN:" then one
# line per instruction), exec logs "Trace N: host [cs_base/pc/flags/cflags]" per run of a
# block, and nochain makes every run of a block log.
count() {
    awk '/^IN:/ { cur = ""; next }
         /^0x[0-9a-f]+:/ { a = $1; sub(/:$/, "", a);
                           if (cur == "") { cur = a; n[cur] = 0 } n[cur]++; next }
         /^$/ { cur = ""; next }
         /^Trace/ { split($4, f, "/"); p = "0x" f[2]; sub(/^0x0+/, "0x", p); t += n[p] }
         END { printf "%d\n", t }' "$1"
}

printf '%-6s %-5s %5s %6s %6s  %s\n' format acts rows n_out n_in 'insns/MAC'
for c in $CASES; do
    IFS=: read -r fmt rows nout nin <<<"$c"
    precs=exact
    case "$fmt" in int8* | awq* | q[0-9]* | iq4*) precs="${PRECISIONS:-exact int8}" ;; esac
    for p in $precs; do
        for calls in 1 2; do
            XINFER_KERNEL_PRECISION=$p qemu-aarch64 -d in_asm,exec,nochain -D "$TMP/log$calls" \
                "$BIN" "$fmt" "$rows" "$nout" "$nin" "$calls" ${KERNELS:+"$KERNELS"} >/dev/null
        done
        a=$(count "$TMP/log1")
        b=$(count "$TMP/log2")
        awk -v a="$a" -v b="$b" -v f="$fmt" -v p="$p" -v r="$rows" -v o="$nout" -v i="$nin" \
            'BEGIN { printf "%-6s %-5s %5d %6d %6d  %.3f\n", f, p, r, o, i, (b - a) / (r * o * i) }'
        rm -f "$TMP"/log*
    done
done
