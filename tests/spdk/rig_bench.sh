#!/usr/bin/env bash
# Benchmarks of the topology rig (docs/spdk.md "Topology rig", results in
# docs/results.md): the simulator's personalities (websearch, fileserver,
# varmail), replayed by fio from `hhc trace` iologs through NVMe-oF/TCP and
# through the vhost-blk client, for every policy, each next to the timed
# simulator's prediction for the same devices (tests/spdk/rig.profile, the
# rig's device sizes), workload, threads and policy. A benchmark, not a
# test: it prints figures and fails only when the rig does.
#
#   bash tests/spdk/rig_bench.sh            # ~40 min on 2 cores
#   TRANSPORTS=nvmf WORKLOADS=varmail POLICIES="wb-flush hhc" DURATION_S=20 bash tests/spdk/rig_bench.sh
#   BARRIER_GAP=524288 RIG_SEGMENT_SIZE=4194304 WORKLOADS=varmail POLICIES=hhc bash tests/spdk/rig_bench.sh
#
#   STATS_EVERY_S=4 DURATION_S=40 WORKLOADS=varmail POLICIES=wb-ordered bash tests/spdk/rig_bench.sh
#
# Each point is a fresh rig (new device files): warm-up reads of the file
# area through hhc0 (as the simulator's prefill), SETTLE_S of the replay
# not measured (fio's ramp_time; settle_s: 5 s, websearch 25 s, varmail
# 40 s), then DURATION_S measured.

set -u -o pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/spdk/rig_lib.sh
. "$BENCH_DIR/rig_lib.sh"

HHC=${HHC:-${CARGO_TARGET_DIR:-$RIG_REPO/target}/release/hhc}
TRANSPORTS=${TRANSPORTS:-"nvmf vhost"}
WORKLOADS=${WORKLOADS:-"websearch fileserver varmail"}
POLICIES=${POLICIES:-"passthrough wt wb wb-flush wb-ordered hhc"}
# Closed-loop threads per workload: one, because every fio job of SPDK's
# plugin busy-polls, as do the server's and the host's reactors, and the
# machine has two cores: the client runs on CLIENT_CPUS (the server's
# core), leaving the host's core to the host (docs/results.md).
THREADS=${THREADS:-1}
CLIENT_CPUS=${CLIENT_CPUS:-0}
# Seconds of each replay not measured, the same for the simulator; empty:
# settle_s below.
SETTLE_S=${SETTLE_S:-}
DURATION_S=${DURATION_S:-20}
SCALE=${SCALE:-0.01}
PROFILE=${PROFILE:-$BENCH_DIR/rig.profile}
RESULTS=${RESULTS:-$(mktemp -d /tmp/hhc-rig-bench.XXXXXX)}
mkdir -p "$RESULTS"
# hhc0's gap after a barrier part in bytes (bdev_hhc_create barrier_gap;
# empty: the module's default). It and the rig's segment size go to the
# simulator too, so that the prediction is for the engine the rig runs.
BARRIER_GAP=${BARRIER_GAP:-}
# Seconds between samples of hhc0's counters during the replay (to
# <point>.stats-series.jsonl: free and dirty blocks over time); empty: none.
STATS_EVERY_S=${STATS_EVERY_S:-}
if [ -n "$BARRIER_GAP" ]; then
    RIG_HHC_ARGS="\"barrier_gap\":$BARRIER_GAP${RIG_HHC_ARGS:+,$RIG_HHC_ARGS}"
    export RIG_HHC_ARGS
fi
{
    cat "$PROFILE"
    echo "engine.segment_kib = $((RIG_SEGMENT_SIZE / 1024))"
    [ -z "$BARRIER_GAP" ] || echo "engine.barrier_gap_kib = $((BARRIER_GAP / 1024))"
} >"$RESULTS/rig.profile"

bench_log() { echo "[rig-bench] $*" >&2; }

# The settle of a workload: SETTLE_S, else 5 s, 25 s for websearch and
# 40 s for varmail. Varmail's WB-Ordered writes back only as blocks run
# out: its cache fills at about 40 s in the rig, within 5 s in the
# simulator.
# Websearch's writes go to 16,384 blocks past its read set, more than the
# 64 MiB cache: near request 40,000 (16 s in at the rig's 2,500 IOPS, 5 s
# in the simulator) the cache fills for the first time, and its first
# eviction sweep takes the read set out (about 1,000 misses every 3 s for
# 6 s). Measured from 5 s the rig had that in its window and the simulator
# mostly not; from 25 s neither has (the simulator then sees 127 misses in
# 20 s, against 1,539 from 5 s).
settle_s() { # workload
    if [ -n "$SETTLE_S" ]; then
        echo "$SETTLE_S"
    else
        case $1 in websearch) echo 25 ;; varmail) echo 40 ;; *) echo 5 ;; esac
    fi
}

# The model params of one profile section, as the JSON object
# bdev_hhc_model_create takes ("backing." keeps its "disk." keys).
profile_params() { # section
    python3 - "$PROFILE" "$1" <<'PY'
import json, sys
path, section = sys.argv[1], sys.argv[2] + "."
params = {}
for line in open(path):
    line = line.split("#", 1)[0].strip()
    if "=" in line:
        key, value = (part.strip() for part in line.split("=", 1))
        if key.startswith(section):
            params[key[len(section):]] = float(value)
print(json.dumps(params))
PY
}

RIG_SSD_PARAMS=$(profile_params ssd)
RIG_HDD_PARAMS=$(profile_params log_hdd)
RIG_RAID_PARAMS=$(profile_params backing)
export RIG_SSD_PARAMS RIG_HDD_PARAMS RIG_RAID_PARAMS

# hhc0's backing_stripe in bytes: the profile's RAID5 stripe (bdev_iscsi
# declares none), which the simulator aligns write-back to; set it empty to
# leave it out (runs of up to 128 KiB wherever they start).
BACKING_STRIPE=${BACKING_STRIPE-$(python3 -c 'import json, sys; p = json.loads(sys.argv[1]); print(int((p["disks"] - 1) * p["chunk_kib"] * 1024))' "$RIG_RAID_PARAMS")}
if [ -n "$BACKING_STRIPE" ]; then
    RIG_HHC_ARGS="\"backing_stripe\":$BACKING_STRIPE${RIG_HHC_ARGS:+,$RIG_HHC_ARGS}"
    export RIG_HHC_ARGS
fi

# fio options of a replay: one job per thread's iolog.
replay_jobs() { # trace-dir
    local t
    for t in $(seq 0 $((THREADS - 1))); do
        printf -- '--name=t%d --read_iolog=%s/thread-%03d.iolog ' "$t" "$1" "$t"
    done
}

# fio through the transport's client with global options then the jobs.
client_fio() { # transport args...
    local transport=$1
    shift
    case $transport in
        nvmf)
            [ -e "$RIG_NVMF_JSON" ] || rig_client_json
            timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --ioengine="$RIG_FIO_PLUGIN" --spdk_json_conf="$RIG_NVMF_JSON" \
                --thread=1 --env_context="--no-huge --legacy-mem" --spdk_mem="$RIG_FIO_MEM_MB" \
                --filename="$RIG_NVMF_BDEV" --direct=1 --cpus_allowed="$CLIENT_CPUS" "$@"
            ;;
        vhost)
            rig_vhost_ok || return
            # A virtqueue per fio job (each job is an SPDK thread with a channel).
            cat >"$RESULTS/vhost.json" <<EOF
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_virtio_attach_controller","params":{"name":"$RIG_VHOST_BDEV","trtype":"user","dev_type":"blk",
  "traddr":"$RIG_VHOST_SOCK","vq_count":$THREADS}},
 {"method":"bdev_wait_for_examine"}]}]}
EOF
            timeout -k 5 "$RIG_FIO_TIMEOUT" "$FIO" --ioengine="$RIG_FIO_PLUGIN" --spdk_json_conf="$RESULTS/vhost.json" \
                --thread=1 --spdk_mem="$RIG_CLIENT_MEM_MB" --spdk_single_seg=1 --filename="$RIG_VHOST_BDEV" --direct=1 \
                --cpus_allowed="$CLIENT_CPUS" "$@"
            local rc=$?
            rig_huge_leftovers
            return $rc
            ;;
    esac
}

# hhc0's counters every STATS_EVERY_S seconds, one JSON object a line
# with the seconds since the start, until killed.
sample_stats() { # out-file
    local start=$SECONDS
    while sleep "$STATS_EVERY_S"; do
        printf '{"t_s":%d,"stats":%s}\n' $((SECONDS - start)) \
            "$(rig_rpc host bdev_hhc_get_stats -b "$RIG_HHC" 2>/dev/null | tr -d '\n ')" >>"$1"
    done
}

stop_sampler() { # pid (empty: none)
    [ -z "$1" ] || { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
}

point() { # transport workload policy trace-dir
    local transport=$1 workload=$2 policy=$3 trace=$4 area_offset area_bytes bdev settle
    settle=$(settle_s "$workload")
    area_offset=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["file_area_offset_bytes"])' "$trace/trace.json")
    area_bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["file_area_bytes"])' "$trace/trace.json")
    bdev=$RIG_NVMF_BDEV
    [ "$transport" = nvmf ] || bdev=$RIG_VHOST_BDEV
    rig_down >/dev/null 2>&1
    rig_up "$policy" >"$RESULTS/$transport-$workload-$policy.rig.log" 2>&1 || { bench_log "rig_up $policy failed"; return 1; }
    # FLUSH latency as the host's bdev layer sees hhc0's (from the export's
    # submission), next to fio's and hhc0's own. Over the whole 64-bit
    # range: a channel opened after the enable (vhost-blk's, when the
    # client connects) gets SPDK's default-range histogram, and
    # bdev_get_histogram skips a channel whose range differs from the
    # bdev's (spdk_histogram_data_merge's -EINVAL, unchecked).
    rig_rpc host bdev_enable_histogram -e -o flush --min-nsec 0 --max-nsec 18446744073709551615 "$RIG_HHC" >/dev/null 2>&1 ||
        bench_log "no FLUSH histogram of $RIG_HHC"
    if [ "$policy" != passthrough ]; then
        client_fio "$transport" --name=warm --rw=read --bs=128k --iodepth=8 --offset="$area_offset" --size="$area_bytes" \
            >"$RESULTS/$transport-$workload-$policy.warm.log" 2>&1 || { bench_log "warm-up failed"; return 1; }
    fi
    # hhc0's counters and bdev-layer latencies as the replay starts (kept
    # for what the settle did; the reads table counts from the next ones).
    rig_rpc host bdev_hhc_get_stats -b "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.stats-before.json" 2>/dev/null
    rig_rpc host bdev_get_iostat -b "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.hhc0-iostat-before.json" 2>/dev/null
    local sampler= measured
    if [ -n "$STATS_EVERY_S" ]; then
        sample_stats "$RESULTS/$transport-$workload-$policy.stats-series.jsonl" &
        sampler=$!
    fi
    # And as the settle ends (fio's start-up, about a second, added): the
    # reads table's (rig_bench.py reads) miss share and hhc0 latency then
    # cover fio's window, not the settle's first cache fill. The FLUSH
    # histogram a second or two before fio ends: SPDK frees a channel's
    # with the channel, and vhost-blk lets go of its channel as the client
    # disconnects.
    (
        started=$SECONDS
        sleep $((settle + 1))
        rig_rpc host bdev_hhc_get_stats -b "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.stats-measured.json" 2>/dev/null
        rig_rpc host bdev_get_iostat -b "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.hhc0-iostat-measured.json" 2>/dev/null
        # Counted from the start, as these RPCs take about half a second each.
        left=$((started + settle + DURATION_S - 1 - SECONDS))
        sleep $((left > 0 ? left : 0))
        rig_rpc host bdev_get_histogram "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.flush-hist.json" 2>/dev/null
    ) &
    measured=$!
    # shellcheck disable=SC2046
    client_fio "$transport" --replay_redirect="$bdev" --replay_no_stall=1 --iodepth=1 --group_reporting=1 \
        --ramp_time="$settle" --runtime="$DURATION_S" --output-format=json --output="$RESULTS/$transport-$workload-$policy.fio.json" \
        $(replay_jobs "$trace") >"$RESULTS/$transport-$workload-$policy.fio.log" 2>&1 ||
        { bench_log "$transport $workload $policy: fio failed"; tail -5 "$RESULTS/$transport-$workload-$policy.fio.log" >&2; stop_sampler "$sampler"; stop_sampler "$measured"; return 1; }
    stop_sampler "$sampler"
    wait "$measured"
    rig_rpc host bdev_hhc_get_stats -b "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.stats.json" 2>/dev/null
    rig_rpc host bdev_get_iostat -b "$RIG_HHC" >"$RESULTS/$transport-$workload-$policy.hhc0-iostat.json" 2>/dev/null
    rig_rpc host bdev_hhc_model_get_stats -b "$RIG_CACHE" >"$RESULTS/$transport-$workload-$policy.ssd0.json" 2>/dev/null
    rig_rpc host bdev_hhc_model_get_stats -b hdd0 >"$RESULTS/$transport-$workload-$policy.hdd0.json" 2>/dev/null
    rig_rpc server bdev_hhc_model_get_stats -b "$RIG_RAID" >"$RESULTS/$transport-$workload-$policy.raid0.json" 2>/dev/null
    # The backing's latency as the host's iSCSI initiator and the server's
    # bdev layer saw it (the iSCSI path is the difference).
    rig_rpc host bdev_get_iostat -b "$RIG_BACKING" >"$RESULTS/$transport-$workload-$policy.iscsi0-iostat.json" 2>/dev/null
    rig_rpc server bdev_get_iostat -b "$RIG_RAID" >"$RESULTS/$transport-$workload-$policy.raid0-iostat.json" 2>/dev/null
    bench_log "$transport $workload $policy: $(python3 "$BENCH_DIR/rig_bench.py" point "$RESULTS/$transport-$workload-$policy.fio.json")"
}

failed=0
for workload in $WORKLOADS; do
    trace=$RESULTS/trace-$workload
    # Enough requests per thread for the whole run at RAM speed.
    "$HHC" trace --workload "$workload" --threads "$THREADS" --scale "$SCALE" --ops-per-thread 200000 \
        --filename "$RIG_HHC" --out-dir "$trace" >/dev/null || exit 1
    "$HHC" simulate --experiment custom --job "$workload" --threads "$THREADS" --scale "$SCALE" --fsync flush \
        --cache-mib "$RIG_SSD_MB" --log-mib "$RIG_HDD_MB" --profile "$RESULTS/rig.profile" --policies "${POLICIES// /,}" \
        --settle-s "$(settle_s "$workload")" --duration-s "$DURATION_S" --json --verbose --out-dir "$RESULTS/sim-$workload" \
        >"$RESULTS/$workload.sim.json" 2>"$RESULTS/$workload.sim.log" || exit 1
    for transport in $TRANSPORTS; do
        for policy in $POLICIES; do
            point "$transport" "$workload" "$policy" "$trace" || failed=$((failed + 1))
        done
    done
done
rig_down >/dev/null 2>&1
python3 "$BENCH_DIR/rig_bench.py" table "$RESULTS" | tee "$RESULTS/table.md"
python3 "$BENCH_DIR/rig_bench.py" log "$RESULTS" | tee "$RESULTS/log.md"
python3 "$BENCH_DIR/rig_bench.py" reads "$RESULTS" | tee "$RESULTS/reads.md"
bench_log "results in $RESULTS ($failed points failed)"
[ "$failed" = 0 ]
