#!/usr/bin/env bash
# Two "hosts" for -tp 2: network namespaces joined by a veth pair, ranks talking over
# OpenMPI's TCP transport only. mpirun runs in the first namespace and starts the remote
# rank's orted through an rsh agent that runs it with `ip netns exec` in the second.
# Needs root and iproute2; creates and always removes its namespaces.
#   tests/tp_netns.sh XINFER_BIN MODEL_DIR TMPDIR -> the continuation on stdout
set -euo pipefail
BIN=$(readlink -f "$1") M=$(readlink -f "$2") T=$3
id=$$ net=10.$((200 + $$ % 50)).$(( ($$ / 50) % 250 ))
A=xtpa$id B=xtpb$id
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add "va$id" type veth peer name "vb$id"
ip link set "va$id" netns "$A"
ip link set "vb$id" netns "$B"
ip -n "$A" addr add "$net.1/24" dev "va$id"
ip -n "$B" addr add "$net.2/24" dev "vb$id"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "va$id" up
ip -n "$B" link set "vb$id" up
cat >"$T/agent.sh" <<AGENT
#!/bin/sh
# rsh agent: host $net.1 is namespace $A, $net.2 is $B
host=\$1; shift
case "\$host" in $net.1) ns=$A ;; $net.2) ns=$B ;; *) echo "unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
chmod +x "$T/agent.sh"
ip netns exec "$A" mpirun -np 2 --allow-run-as-root --host "$net.1,$net.2" \
    --mca plm_rsh_agent "$T/agent.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
    -x XINFER_TP_TIMEOUT=10 -x ASAN_OPTIONS=detect_leaks=0 \
    sh -c "echo rank \$OMPI_COMM_WORLD_RANK in \$(ip netns identify \$\$) >&2; exec $BIN generate --model $M --prompt 'Once upon a time' --max-tokens 32 --threads 1 -tp 2"
