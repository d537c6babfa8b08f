#!/usr/bin/env bash
# Tensor parallelism on this machine: prefill and decode with -tp 2 --threads 1 against
# -tp 1 --threads 2 (the same cores), alternating, medians and min..max, as ratios; and
# what the collectives cost per step (bytes rank 0 sent, time it waited in them).
#   bench/tp.sh [MODEL_DIR] [REPS]     (default: a 4-layer qwen2.5-0.5b from genmodel)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/xinfer
REPS=${2:-5}
M=${1:-}
if [ -z "$M" ]; then
    M=$(mktemp -d /tmp/xinfer-tp-bench-XXXXXX)
    trap 'rm -rf "$M"' EXIT
    build/tools/genmodel --preset qwen2.5-0.5b --layers 4 "$M" >/dev/null
fi
LONG=$(for i in $(seq 1 60); do printf 'the quick brown fox jumps over the lazy dog '; done)
run() { # $1 = extra flags, $2 = prompt, $3 = max tokens -> "prompt_tps gen_tps KiB/step ms/step"
    local err
    err=$(XINFER_LOG_LEVEL=info $BIN generate --model "$M" --prompt "$2" --max-tokens "$3" \
          --ignore-eos --temperature 0 $1 2>&1 >/dev/null)
    local p g k t
    p=$(sed -n 's/.*prompt: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' <<<"$err")
    g=$(sed -n 's/.*generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p' <<<"$err")
    k=$(sed -n 's/.* \([0-9.]*\) KiB sent and \([0-9.]*\) ms in collectives.*/\1 \2/p' <<<"$err")
    echo "$p $g ${k:-- -}"
}
stats() { sort -g | awk '{a[NR]=$1} END {printf "%.1f (%.1f..%.1f)", a[int((NR+1)/2)], a[1], a[NR]}'; }
declare -A R
for rep in $(seq 1 "$REPS"); do
    for cfg in "tp1:--threads 2" "tp2:-tp 2 --threads 1"; do
        name=${cfg%%:*} flags=${cfg#*:}
        read -r p _ pk pt <<<"$(run "$flags" "$LONG" 1)"
        read -r _ g dk dt <<<"$(run "$flags" "Once upon a time" 64)"
        R[$name.pre]+="$p"$'\n'; R[$name.dec]+="$g"$'\n'
        R[$name.pk]+="$pk"$'\n'; R[$name.pt]+="$pt"$'\n'; R[$name.dk]+="$dk"$'\n'; R[$name.dt]+="$dt"$'\n'
    done
done
med() { printf '%s' "${R[$1]}" | grep -v '^-*$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "model $M, $REPS alternating repetitions, medians (min..max)"
for k in pre dec; do
    label=$([ $k = pre ] && echo "prefill tok/s (~540-token prompt)" || echo "decode tok/s (64 tokens)")
    a=$(printf '%s' "${R[tp1.$k]}" | stats) b=$(printf '%s' "${R[tp2.$k]}" | stats)
    ratio=$(awk -v x="$(med tp2.$k)" -v y="$(med tp1.$k)" 'BEGIN {printf "%.2f", x / y}')
    printf '%-36s -tp 1 --threads 2: %s   -tp 2 --threads 1: %s   ratio %s\n' "$label" "$a" "$b" "$ratio"
done
printf 'collectives per step, -tp 2 (rank 0): prefill %s KiB, %s ms; decode %s KiB, %s ms\n' \
    "$(med tp2.pk)" "$(med tp2.pt)" "$(med tp2.dk)" "$(med tp2.dt)"
