#!/usr/bin/env bash
# xinfer and llama.cpp side by side on the same GGUF files: 512-token prefill and 64-token
# batch-1 decode, greedy, 1 and 2 threads, runs alternating (xinfer, llama-bench, xinfer, ...)
# so drift from other tenants of the machine hits both; medians, min..max, xinfer / llama.cpp.
#
#   bench/gguf_vs_llamacpp.sh [--llama-bin DIR] [--reps 5] [--threads "1 2"]
#                             [--types "Q8_0 Q4_0 Q4_K_M"] [--preset qwen2.5-0.5b] [--layers N]
#                             [--dir build/gguf-bench] [--pp 512] [--tg 64]
#                             [--batched "1 4 8 16"] [--bpp 128] [--btg 64]
#
# --xinfer LABEL=TYPE=MODEL[,ARG...] (repeatable) adds a row LABEL: xinfer on MODEL (a folder
# or file; ARGs, comma-separated, go to its command line) against llama.cpp on the TYPE file,
# e.g. --xinfer INT8=Q8_0=DIR,--quantization,int8 or --xinfer AWQ=Q4_0=AWQ_DIR; the TYPE file
# is made like those of --types (--types "" runs only these rows).
# --llama-bin: where llama-bench and llama-quantize are (default $LLAMA_BIN, else
# ../llama.cpp/build/bin). genmodel writes the preset's F16 GGUF (random weights, real
# tokenizer) once; llama-quantize makes each type from it; files are kept in --dir. --pp / --tg
# change the prefill and decode lengths on both sides (shorter runs for slow kernels).
# --batched "1 4 8 16" measures B sequences at once instead (llama-batched-bench -npp BPP
# -ntg BTG -npl B): B prompts of BPP tokens prefilled together, then BTG decode steps of B
# tokens, aggregate tok/s of each phase (phases ppBPPxB and tgxB).
#
# The same work on both sides:
#   prefill  llama-bench pp512 (one 512-token batch from an empty cache) against
#            `xinfer generate` of a 512-token prompt with --max-tokens 1, one batch
#            (--max-num-batched-tokens 512): prompt tokens / time to the first token
#   decode   llama-bench tg64 (64 single-token steps from an empty cache) against a 1-token
#            prompt and --max-tokens 65 --ignore-eos --temperature 0: the 64 steps after the
#            first token, generated tokens - 1 / their time (the stats line's tok/s)
#   batched  llama-batched-bench --no-mmap -npp BPP -ntg BTG -npl B (random tokens, one batch of
#            B x BPP prompt tokens, then BTG steps of B tokens) against `xinfer generate
#            --prompts-file` of B BPP-token prompts at once, --max-tokens BTG+1 --ignore-eos,
#            prefix caching off, --max-num-batched-tokens B x BPP (one prefill step): B x BPP /
#            the last first-token time, and B x BTG / (the last end - the last first token)
# llama-bench runs with -mmp 0 -r 1 (one timed run after its warm-up); xinfer maps the file.
# The kernels xinfer runs: XINFER_KERNELS (unset: the best for this CPU) and
# XINFER_KERNEL_PRECISION pass through; the header prints both.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_BIN=${LLAMA_BIN:-../llama.cpp/build/bin}
REPS=5
THREADS="1 2"
TYPES="Q8_0 Q4_0 Q4_K_M"
PRESET=qwen2.5-0.5b
LAYERS=
DIR=build/gguf-bench
PP=512
TG=64
BATCHED=
BPP=128
BTG=64
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --llama-bin) LLAMA_BIN=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --types) TYPES=$2; shift 2 ;;
        --preset) PRESET=$2; shift 2 ;;
        --layers) LAYERS=$2; shift 2 ;;
        --dir) DIR=$2; shift 2 ;;
        --xinfer) EXTRA+=("$2"); shift 2 ;;
        --pp) PP=$2; shift 2 ;;
        --tg) TG=$2; shift 2 ;;
        --batched) BATCHED=$2; shift 2 ;;
        --bpp) BPP=$2; shift 2 ;;
        --btg) BTG=$2; shift 2 ;;
        -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gguf_vs_llamacpp: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
XI=build/xinfer
for b in "$XI" build/tools/genmodel "$LLAMA_BIN/llama-bench" "$LLAMA_BIN/llama-quantize" \
         ${BATCHED:+"$LLAMA_BIN/llama-batched-bench"}; do
    [ -x "$b" ] || { echo "gguf_vs_llamacpp: $b not found (make all; --llama-bin DIR)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "gguf_vs_llamacpp: needs jq" >&2; exit 1; }
mkdir -p "$DIR"
NAME=$PRESET${LAYERS:+-${LAYERS}l}
F16=$DIR/$NAME-F16.gguf
if [ ! -s "$F16" ]; then
    build/tools/genmodel --preset "$PRESET" ${LAYERS:+--layers "$LAYERS"} --gguf f16 "$F16.tmp" >&2
    mv "$F16.tmp" "$F16"
fi
# rows: "LABEL TYPE MODEL ARGS" (ARGS comma-separated, "-" for none)
ROWS=()
for t in $TYPES; do ROWS+=("$t $t $DIR/$NAME-$t.gguf -"); done
for e in "${EXTRA[@]}"; do
    IFS='=' read -r label lt rest <<<"$e"
    [ -n "$label" ] && [ -n "$lt" ] && [ -n "$rest" ] ||
        { echo "gguf_vs_llamacpp: --xinfer wants LABEL=TYPE=MODEL[,ARG...], not '$e'" >&2; exit 2; }
    model=${rest%%,*}
    args=-
    [ "$model" != "$rest" ] && args=${rest#*,}
    ROWS+=("$label $lt $model $args")
done
for t in $(for r in "${ROWS[@]}"; do set -- $r; echo "$2"; done | sort -u); do
    f=$DIR/$NAME-$t.gguf
    if [ ! -s "$f" ]; then
        "$LLAMA_BIN/llama-quantize" "$F16" "$f.tmp" "$t" >"$DIR/quantize-$t.log" 2>&1 ||
            { echo "gguf_vs_llamacpp: llama-quantize $t failed, see $DIR/quantize-$t.log" >&2; exit 1; }
        mv "$f.tmp" "$f"
    fi
done

# "hello" and PP-1 times " hello": PP tokens for the byte-level BPEs of the presets (checked)
PROMPT=hello$(printf ' hello%.0s' $(seq 2 "$PP"))

xinfer_run() { # $1 model, $2 threads, $3 phase, $4 extra args (comma-separated, "-": none) -> tok/s
    local err n tps xa=()
    [ "${4:--}" != - ] && IFS=',' read -r -a xa <<<"$4"
    if [ "$3" = prefill ]; then
        err=$("$XI" generate --model "$1" "${xa[@]}" --threads "$2" --prompt "$PROMPT" --max-tokens 1 \
              --temperature 0 --max-num-batched-tokens "$PP" --max-model-len $((PP + 16)) 2>&1 >/dev/null)
        n=$(sed -n 's/^prompt: \([0-9]*\) tokens, .*/\1/p' <<<"$err")
        tps=$(sed -n 's/^prompt: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' <<<"$err")
        [ "$n" = "$PP" ] || { echo "xinfer prefill: $n prompt tokens, not $PP: $err" >&2; return 1; }
    else
        err=$("$XI" generate --model "$1" "${xa[@]}" --threads "$2" --prompt hello --max-tokens $((TG + 1)) \
              --ignore-eos --temperature 0 --max-model-len $((TG + 16)) 2>&1 >/dev/null)
        n=$(sed -n 's/.*generated: \([0-9]*\) tokens, .*/\1/p' <<<"$err")
        tps=$(sed -n 's/.*generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' <<<"$err")
        [ "$n" = $((TG + 1)) ] || { echo "xinfer decode: $n tokens, not $((TG + 1)): $err" >&2; return 1; }
    fi
    echo "$tps"
}

llama_run() { # $1 file, $2 threads -> "prefill_tps decode_tps"
    local js
    js=$("$LLAMA_BIN/llama-bench" -m "$1" -p "$PP" -n "$TG" -t "$2" -mmp 0 -r 1 -o json 2>/dev/null)
    jq -r --argjson pp "$PP" --argjson tg "$TG" \
        '[(.[] | select(.n_prompt == $pp and .n_gen == 0) | .avg_ts),
          (.[] | select(.n_prompt == 0 and .n_gen == $tg) | .avg_ts)] | map(tostring) | join(" ")' <<<"$js"
}

BPROMPT=hello$(printf ' hello%.0s' $(seq 2 "$BPP"))
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT

xinfer_batched() { # $1 model, $2 threads, $3 B, $4 extra args -> "prefill_tps decode_tps"
    local xa=() bad
    [ "${4:--}" != - ] && IFS=',' read -r -a xa <<<"$4"
    jq -nc --arg p "$BPROMPT" --argjson n "$3" 'range($n) | {prompt: $p}' >"$TMPD/in.jsonl"
    "$XI" generate --model "$1" "${xa[@]}" --threads "$2" --prompts-file "$TMPD/in.jsonl" \
        --output "$TMPD/out.jsonl" --max-tokens $((BTG + 1)) --ignore-eos --temperature 0 \
        --max-num-seqs "$3" --max-num-batched-tokens $(($3 * BPP)) --no-enable-prefix-caching \
        --max-model-len $((BPP + BTG + 16)) 2>"$TMPD/err" >/dev/null ||
        { echo "xinfer batched: $(cat "$TMPD/err")" >&2; return 1; }
    bad=$(jq -r --argjson pp "$BPP" --argjson tg $((BTG + 1)) \
        'select(.prompt_tokens != $pp or (.token_ids | length) != $tg) | "\(.prompt_tokens) \(.token_ids | length)"' \
        "$TMPD/out.jsonl")
    [ -z "$bad" ] || { echo "xinfer batched: prompt / generated tokens '$bad', not $BPP / $((BTG + 1))" >&2; return 1; }
    jq -rs --argjson pp "$BPP" --argjson tg "$BTG" \
        '(map(.ttft_s) | max) as $f | (map(.e2e_s) | max) as $e |
         "\(length * $pp / $f) \(length * $tg / ($e - $f))"' "$TMPD/out.jsonl"
}

llama_batched() { # $1 file, $2 threads, $3 B -> "prefill_tps decode_tps"
    "$LLAMA_BIN/llama-batched-bench" -m "$1" --no-mmap -t "$2" -c $(($3 * (BPP + BTG) + 16)) \
        -b 2048 -ub 512 -npp "$BPP" -ntg "$BTG" -npl "$3" --output-format jsonl 2>/dev/null |
        jq -r 'select(.speed_pp != null) | "\(.speed_pp) \(.speed_tg)"' | tail -1
}

echo "gguf_vs_llamacpp: $NAME, prefill $PP / decode $TG tokens, $REPS reps, threads: $THREADS"
echo "  xinfer $(git rev-parse --short HEAD), XINFER_KERNELS=${XINFER_KERNELS:-auto}," \
     "XINFER_KERNEL_PRECISION=${XINFER_KERNEL_PRECISION:-default}; $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed "s/^ *//"), $(nproc) CPUs"
[ -n "$BATCHED" ] && echo "  batched: B = $BATCHED, $BPP-token prompts, $BTG decode steps"
RES=$TMPD/results
PHASES="prefill decode"
if [ -n "$BATCHED" ]; then
    PHASES=$(for b in $BATCHED; do printf 'pp%sx%s tgx%s ' "$BPP" "$b" "$b"; done)
fi
for rep in $(seq 1 "$REPS"); do
    for row in "${ROWS[@]}"; do
        read -r t lt xm xa <<<"$row"
        f=$DIR/$NAME-$lt.gguf
        for th in $THREADS; do
            if [ -n "$BATCHED" ]; then
                for b in $BATCHED; do
                    read -r xp xd <<<"$(xinfer_batched "$xm" "$th" "$b" "$xa")"
                    read -r lp ld <<<"$(llama_batched "$f" "$th" "$b")"
                    [ -n "$xd" ] && [ -n "$ld" ] || { echo "gguf_vs_llamacpp: no batched result for $t B=$b" >&2; exit 1; }
                    printf '%s %s pp%sx%s %s %s\n%s %s tgx%s %s %s\n' "$t" "$th" "$BPP" "$b" "$xp" "$lp" \
                        "$t" "$th" "$b" "$xd" "$ld" >>"$RES"
                    printf '  rep %s %s t=%s B=%s: prefill %.1f vs %.1f, decode %.1f vs %.1f tok/s\n' \
                        "$rep" "$t" "$th" "$b" "$xp" "$lp" "$xd" "$ld" >&2
                done
                continue
            fi
            xp=$(xinfer_run "$xm" "$th" prefill "$xa")
            read -r lp ld <<<"$(llama_run "$f" "$th")"
            [ -n "$ld" ] || { echo "gguf_vs_llamacpp: llama-bench gave no pp$PP / tg$TG result for $f" >&2; exit 1; }
            xd=$(xinfer_run "$xm" "$th" decode "$xa")
            printf '%s %s prefill %s %s\n%s %s decode %s %s\n' "$t" "$th" "$xp" "$lp" "$t" "$th" "$xd" "$ld" >>"$RES"
            echo "  rep $rep $t t=$th: prefill $xp vs $lp, decode $xd vs $ld tok/s" >&2
        done
    done
done

# per (type, threads, phase): medians and min..max of both, ratio of the medians
printf '\n%-7s %3s %-12s %24s %24s %8s\n' type thr phase "xinfer tok/s" "llama.cpp tok/s" ratio
for t in $(for r in "${ROWS[@]}"; do set -- $r; echo "$1"; done); do
    for th in $THREADS; do
        for ph in $PHASES; do
            awk -v t="$t" -v th="$th" -v ph="$ph" -v pp="$PP" '
                function med(a, n,   i, j, x) {
                    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
                    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
                }
                $1 == t && $2 == th && $3 == ph { x[++n] = $4; l[n] = $5 }
                END {
                    if (!n) exit
                    mx = med(x, n); ml = med(l, n)
                    ratio = ml > 0 ? mx / ml : 0
                    phase = ph == "prefill" ? "prefill " pp : ph
                    printf "%-7s %3s %-12s %9.2f (%6.2f..%6.2f) %9.2f (%6.2f..%6.2f) %8.3f\n", t, th,
                           phase, mx, x[1], x[n], ml, l[1], l[n], ratio
                }' "$RES"
        done
    done
done
