#!/usr/bin/env bash
# What a log mirror on a peer host costs (docs/spdk.md, "A log mirror on a
# peer host"): hhc0 of the rig with its log on the host's HDD alone, on it
# and the peer's (over NVMe-oF/TCP), and on the peer's alone; for each,
# fio through NVMe-oF with a FLUSH after every write (one in flight) and
# after every 16 (16 in flight), RUNTIME_S each, and hhc0's flush
# latencies from bdev_hhc_get_stats. A benchmark: it prints figures, as
# ratios to the local mirror alone, and fails only when the rig does.
#
#   bash tests/spdk/peer_bench.sh               # about 4 minutes
#   RUNTIME_S=60 bash tests/spdk/peer_bench.sh

set -u -o pipefail
# shellcheck source=tests/spdk/rig_lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rig_lib.sh"
RUNTIME_S=${RUNTIME_S:-20}
CONFIGS=${CONFIGS:-"local local+peer peer"}
LOADS=("--iodepth=1 --fsync=1" "--iodepth=16 --fsync=16")

# IOPS of a fio JSON report, and hhc0's flush p50/p99 (us) since the reset.
bench_point() { # config load-index
    local out=$RIG_WORK/fio-$1-$2.json
    rig_rpc host bdev_hhc_reset_stats -b "$RIG_HHC" >/dev/null || return 1
    # shellcheck disable=SC2086
    nvmf_fio --rw=randwrite --size=32m --time_based=1 --runtime="$RUNTIME_S" ${LOADS[$2]} --output-format=json \
        >"$out" 2>"$RIG_WORK/fio-$1-$2.err" || { tail -5 "$RIG_WORK/fio-$1-$2.err"; return 1; }
    python3 - "$out" "$(RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_hhc_get_stats "{\"name\":\"$RIG_HHC\"}")" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
job = json.loads(text[text.index("{"):])["jobs"][0]
f = json.loads(sys.argv[2])["flush_latency_us"]
print("%.0f %s %s" % (job["write"]["iops"], f["p50"], f["p99"]))
PY
}

declare -A iops p50 p99
for config in $CONFIGS; do
    case $config in
        local) RIG_HDDS=1 RIG_PEER=0 ;;
        local+peer) RIG_HDDS=1 RIG_PEER=1 ;;
        peer) RIG_HDDS=0 RIG_PEER=1 ;;
        *) rig_log "no configuration $config (local, local+peer, peer)"; exit 1 ;;
    esac
    export RIG_HDDS RIG_PEER
    rig_up hhc >/dev/null || { rig_down >/dev/null 2>&1; exit 1; }
    for i in "${!LOADS[@]}"; do
        read -r "iops[$config.$i]" "p50[$config.$i]" "p99[$config.$i]" < <(bench_point "$config" "$i") ||
            { rig_down >/dev/null 2>&1; exit 1; }
    done
    rig_down >/dev/null 2>&1
done

echo
echo "log mirrors, randwrite 4 KiB through NVMe-oF, $RUNTIME_S s each; ratios to the local mirror alone"
printf '%-12s %-24s %8s %8s %10s %10s\n' mirrors load IOPS ratio "flush p50" "flush p99"
for i in "${!LOADS[@]}"; do
    for config in $CONFIGS; do
        ratio=$(awk -v a="${iops[$config.$i]}" -v b="${iops[local.$i]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
        printf '%-12s %-24s %8s %8s %8s us %7s us\n' "$config" "${LOADS[$i]}" "${iops[$config.$i]}" "$ratio" "${p50[$config.$i]}" "${p99[$config.$i]}"
    done
done
