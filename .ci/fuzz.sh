#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser that reads untrusted input (tests/fuzz/fuzz_*.c):
# the library is built with clang under libFuzzer instrumentation + ASan + UBSan, each harness
# runs for FUZZ_TIME seconds (two at a time), and any crash, leak, sanitizer report, timeout
# or broken harness property fails the run. Every file in tests/fuzz/corpus/<target>/ (seeds
# and minimised reproducers of fixed bugs) is executed first, every time.
#   .ci/fuzz.sh                 build + run every target
#   .ci/fuzz.sh fuzz_oai ...    only these targets
#   FUZZ_TIME=300 .ci/fuzz.sh   longer runs (new inputs are kept in build-fuzz/corpus/)
set -euo pipefail
cd "$(dirname "$0")/.."

CC=${FUZZ_CC:-clang}
BUILD=build-fuzz
FUZZ_TIME=${FUZZ_TIME:-12}
JOBS=${FUZZ_JOBS:-2}
export XINFER_TEST_DATA="${XINFER_TEST_DATA:-$(cd .. && pwd)/shared/data}"

if ! command -v "$CC" >/dev/null; then
    echo "fuzz: $CC not found (apt-get install clang)" >&2
    exit 1
fi
# libFuzzer's runtime is a separate Debian package (libclang-rt-<major>-dev).
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return (void)d, (int)n * 0; }' |
    "$CC" -x c -fsanitize=fuzzer,address,undefined -o /dev/null - 2>/dev/null; then
    echo "fuzz: $CC cannot link -fsanitize=fuzzer (apt-get install" \
         "libclang-rt-$("$CC" -dumpversion | cut -d. -f1)-dev)" >&2
    exit 1
fi

echo "== fuzz: library with $CC (libFuzzer instrumentation, ASan, UBSan)"
# CFLAGS from the environment: the Makefile appends its own flags (and SAN=1's) to it.
CFLAGS="-fsanitize=fuzzer-no-link" make -s -j"$JOBS" CC="$CC" SAN=1 OPT=-O1 BUILD=$BUILD \
    $BUILD/libxinfer.a $BUILD/src/server/oai.o $BUILD/src/server/structured.o $BUILD/src/server/tool_parse.o $BUILD/src/server/reasoning.o

PKGS="jansson libpcre2-8 libmicrohttpd libutf8proc libxxhash libcurl"
HFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -pthread -Iinclude -Isrc
        -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
        $(pkg-config --cflags $PKGS)"
LIBS="$(pkg-config --libs $PKGS) -lm -pthread"

if [ $# -gt 0 ]; then targets=("$@"); else
    targets=()
    for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi

echo "== fuzz: harnesses"
mkdir -p $BUILD/fuzz
build_one() {
    # shellcheck disable=SC2086
    $CC $HFLAGS -o $BUILD/fuzz/$1 tests/fuzz/$1.c $BUILD/src/server/oai.o $BUILD/src/server/structured.o $BUILD/src/server/tool_parse.o $BUILD/src/server/reasoning.o $BUILD/libxinfer.a $LIBS
}
export -f build_one
export CC HFLAGS LIBS BUILD
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'build_one {}'

# Seeds that live in the shared test data, linked in at run time (never copied into the repo).
seeds=$BUILD/fuzz-seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{fuzz_safetensors,fuzz_tokenizer_load,fuzz_jinja,fuzz_config,fuzz_gguf}
D=$XINFER_TEST_DATA
seed() { [ -f "$D/$1" ] && ln -sf "$(cd "$(dirname "$D/$1")" && pwd)/$(basename "$1")" "$seeds/$2"; return 0; }
seed models/stories260K/tokenizer.json fuzz_tokenizer_load/stories260K
seed models/stories260K/config.json fuzz_config/stories260K
seed models/qwen2-tiny-random/config.json fuzz_config/qwen2-tiny
for f in Qwen-Qwen2.5-7B-Instruct meta-llama-Llama-3.1-8B-Instruct meta-llama-Llama-3.2-3B-Instruct; do
    seed chat-templates/$f.jinja fuzz_jinja/$f
done
# The first 4 KiB of a real model: a valid header and a cut-off data section; for
# fuzz_model_load (byte 0 picks the mode) the real config, and the real header JSON.
st=$D/models/stories260K/model.safetensors
if [ -f "$st" ]; then
    head -c 4096 "$st" >"$seeds/fuzz_safetensors/stories260K-head"
    mkdir -p "$seeds/fuzz_model_load"
    { printf '\000'; cat "$D/models/stories260K/config.json"; } >"$seeds/fuzz_model_load/config"
    hlen=$(od -An -t u8 -N8 "$st" | tr -d ' ')
    { printf '\001'; head -c $((8 + hlen)) "$st" | tail -c +9; } >"$seeds/fuzz_model_load/header"
fi

# GGUF: the first 16 KiB of real files (metadata, tokenizer arrays; the data cut off).
for f in stories260K-f32 llama256-random-q4_k_m qwen3moe-tiny-bf16; do
    [ -f "$D/gguf/$f.gguf" ] && head -c 16384 "$D/gguf/$f.gguf" >"$seeds/fuzz_gguf/$f-head"
done

# A fixed seed by default, so a CI run explores the same inputs each time and its verdict does
# not depend on luck; FUZZ_SEED=0 (libFuzzer: random) for exploratory runs.
FUZZ_SEED="${FUZZ_SEED:-1}"

run_one() {
    local t=$1 work=$BUILD/corpus/$1 log=$BUILD/fuzz/$1.log
    mkdir -p "$work" "tests/fuzz/corpus/$t" "$seeds/$t"
    # New inputs go to the first folder (build output); the repo corpus is only read.
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
        $BUILD/fuzz/"$t" -max_total_time="$FUZZ_TIME" -seed="$FUZZ_SEED" -timeout=10 -rss_limit_mb=2048 \
        -max_len=16384 -print_final_stats=1 -artifact_prefix=$BUILD/fuzz/"$t"- \
        "$work" "tests/fuzz/corpus/$t" "$seeds/$t" >"$log" 2>&1; then
        echo "ok   $t: $(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}') execs," \
             "$(grep -m1 'stat::new_units_added' "$log" | awk '{print $2}') new inputs"
    else
        echo "FAIL $t (log $log):"
        grep -E 'ERROR|SUMMARY|fuzz property|Test unit written|#[0-9]+ 0x' "$log" | head -30
        return 1
    fi
}
export -f run_one
export BUILD FUZZ_TIME FUZZ_SEED seeds

echo "== fuzz: ${#targets[@]} targets, ${FUZZ_TIME}s each, $JOBS at a time"
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}'
echo "== fuzz: no crash, leak or sanitizer report"
