#!/usr/bin/env bash
# Side-by-side benchmark over Ceph RBD (docs/ceph.md, "Benchmarks"): every
# target over the same RBD image of the one-node cluster of
# tests/ceph/cluster.sh, through SPDK's bdev_rbd, one table per workload.
# The machinery (fio processes, stats, MIN_WRAPS, ROUNDS, tables) is
# tests/spdk/bench.sh's, sourced.
#
#   targets   rbd          bdev_rbd alone, librbd's rbd_cache off
#             rbd-cache    bdev_rbd alone, rbd_cache on in write-back
#                          (rbd_cache_policy=writeback; volatile: a flush
#                          pushes it to the OSD)
#             ocf-wt ocf-wb  SPDK's OCF vbdev, cache = the SSD model,
#                          core = bdev_rbd
#             POLICY[@N][%D]  HHC (wt wb wb-flush hhc ...) over bdev_rbd,
#                          cache = the SSD model, log = the HDD model
#             hhc-ssdlog   HHC hhc with its log on an SSD model
#             hhc-ram      HHC hhc over a malloc backing (same cache and
#                          log): the reference for read hits
#   workloads fsync=N      fio randwrite 4 KiB iodepth 32, a FLUSH every N
#                          writes, N in FSYNCS
#             randread     fio randread 4 KiB iodepth 32 over the whole
#                          image, after a sequential read pass over it in
#                          the same process (the image fits the cache)
#             mixed        the same read pass, then fio randrw 70 % reads,
#                          4 KiB iodepth 32, a FLUSH every MIX_FSYNC writes
#
# The "SSD" is bdev_hhc_model_create model ssd over a malloc, the "HDD" model
# hdd over a malloc (docs/spdk.md, "Device models"; their module
# libspdk_bdev_hhc_model.so is preloaded with HHC's), with the models'
# default parameters. The image is written in full once before the first
# target, so reads reach BlueStore rather than absent objects. Brings the
# cluster up in CEPH_DIR and down at the end (a cluster already running
# there is used and left running); without Ceph, bdev_rbd or the device
# models it prints a ### SKIPPED banner and exits 0.
#
# Environment (defaults): as bench.sh (SPDK_DIR, OUT, FIO, BENCH_TIME 10,
# ROUNDS 1, MIN_WRAPS, MAX_TIME, FSYNCS, KEEP_WORK, HUGE, FIO_SPDK_MEM_MB),
# and CEPH_DIR (/tmp/hhc-ceph-bench), CEPH_MON_PORT (6890), CEPH_PORT_MIN
# and CEPH_PORT_MAX (7000, 7099), BACK_MB (256: the image), CACHE_MB (512),
# LOG_MB (64: small, so the log wraps), SEGMENT_SIZE (1048576), MIN_WRAPS
# (5), MAX_TIME (90 s), MIX_FSYNC (8), TARGETS ("rbd rbd-cache ocf-wt
# ocf-wb wt wb wb-flush hhc hhc-ssdlog hhc-ram"), WORKLOADS ("fsync
# randread mixed"), BACKING_RBD_CACHE (false: the rbd_cache of the bdev_rbd
# under OCF and HHC), SSD_PARAMS and HDD_PARAMS (JSON objects of model
# parameters, "{}"). SMOKE=1: BENCH_TIME 2, FSYNCS 8, WORKLOADS fsync,
# MIN_WRAPS 1, TARGETS "rbd ocf-wt hhc", one round: the script end to end.
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${SMOKE:-}" ]; then
    BENCH_TIME=${BENCH_TIME:-2}
    FSYNCS=${FSYNCS:-8}
    WORKLOADS=${WORKLOADS:-fsync}
    MIN_WRAPS=${MIN_WRAPS:-1}
    TARGETS=${TARGETS:-"rbd ocf-wt hhc"}
    ROUNDS=1
fi
CEPH_DIR=${CEPH_DIR:-/tmp/hhc-ceph-bench}
CEPH_MON_PORT=${CEPH_MON_PORT:-6890}
CEPH_PORT_MIN=${CEPH_PORT_MIN:-7000}
CEPH_PORT_MAX=${CEPH_PORT_MAX:-7099}
BACK_MB=${BACK_MB:-256}
CACHE_MB=${CACHE_MB:-512}
LOG_MB=${LOG_MB:-64}
MIN_WRAPS=${MIN_WRAPS:-5}
MAX_TIME=${MAX_TIME:-90}
MIX_FSYNC=${MIX_FSYNC:-8}
TARGETS=${TARGETS:-"rbd rbd-cache ocf-wt ocf-wb wt wb wb-flush hhc hhc-ssdlog hhc-ram"}
WORKLOADS=${WORKLOADS:-"fsync randread mixed"}
BACKING_RBD_CACHE=${BACKING_RBD_CACHE:-false}
SSD_PARAMS=${SSD_PARAMS:-"{}"}
HDD_PARAMS=${HDD_PARAMS:-"{}"}
# The read pass before randread and mixed reads the whole image over RBD.
FIO_EXTRA_TIME=${FIO_EXTRA_TIME:-180}
# Every target's SSD and HDD are device-model bdevs: their module rides along.
EXTRA_PRELOAD=${OUT:-$REPO/target/spdk}/libspdk_bdev_hhc_model.so
# shellcheck source=tests/spdk/bench.sh
. "$REPO/tests/spdk/bench.sh"
# shellcheck source=tests/ceph/cluster.sh
. "$REPO/tests/ceph/cluster.sh"
CEPH_IMAGE=bench-$$
CEPH_OWNED=

# The ratio columns, and the hit column for the workloads that read.
export BENCH_REFS="rbd=rbd:cache-off ocf-wt=ocf:wt ocf-wb=ocf:wb ram=hhc:hhc/ram-backing" BENCH_P50=1
export BENCH_HITS="randread mixed"

cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
    if [ -n "$CEPH_OWNED" ]; then
        ceph_down
    elif ceph_running mon.a; then
        rbd_cmd rm "$CEPH_POOL/$CEPH_IMAGE" >/dev/null 2>&1
    fi
    spdk_trace_leftovers
    if [ -n "${KEEP_WORK:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}

target_label() {
    case $1 in
        rbd) echo rbd:cache-off ;;
        rbd-cache) echo rbd:cache-wb ;;
        ocf-*) echo "ocf:${1#ocf-}" ;;
        hhc-ssdlog) echo hhc:hhc/ssd-log ;;
        hhc-ram) echo hhc:hhc/ram-backing ;;
        *) echo "hhc:$1" ;;
    esac
}

target_kind() {
    case $1 in
        rbd | rbd-cache) echo none ;;
        ocf-*) echo ocf ;;
        *) echo hhc ;;
    esac
}

rbd_create_json() { # name rbd_cache(true|false)
    local config policy=""
    [ "$2" = false ] || policy=',"rbd_cache_policy":"writeback"'
    config=$(ceph_rbd_config_json)
    printf '{"method":"bdev_rbd_create","params":{"name":"%s","pool_name":"%s","rbd_name":"%s","block_size":%s,"user_id":"admin","config":%s}}' \
        "$1" "$CEPH_POOL" "$CEPH_IMAGE" "$BS" "${config%\}},\"rbd_cache\":\"$2\"$policy}"
}

malloc_json() { # name size-mb
    printf '{"method":"bdev_malloc_create","params":{"name":"%s","num_blocks":%s,"block_size":%s}}' "$1" $(($2 * 1048576 / BS)) "$BS"
}

model_json() { # name base model params
    printf '{"method":"bdev_hhc_model_create","params":{"name":"%s","base_bdev_name":"%s","model":"%s","params":%s}}' "$1" "$2" "$3" "$4"
}

# The bdev config: the devices a target needs and the target as bench0.
bdev_json() { # target
    local t=$1 devs=() create back=rbd0 logmodel=hdd logparams=$HDD_PARAMS
    case $t in
        rbd) devs+=("$(rbd_create_json bench0 false)") ;;
        rbd-cache) devs+=("$(rbd_create_json bench0 true)") ;;
        *)
            case $t in
                hhc-ram) back=back; devs+=("$(malloc_json back "$BACK_MB")") ;;
                *) devs+=("$(rbd_create_json rbd0 "$BACKING_RBD_CACHE")") ;;
            esac
            [ "$t" != hhc-ssdlog ] || { logmodel=ssd; logparams=$SSD_PARAMS; }
            devs+=("$(malloc_json ssd_base "$CACHE_MB")" "$(model_json ssd ssd_base ssd "$SSD_PARAMS")")
            case $t in
                ocf-*)
                    # No sequential cut-off: the read pass must be inserted.
                    create='{"method":"bdev_ocf_create","params":{"name":"bench0","mode":"'${t#ocf-}'","cache_bdev_name":"ssd","core_bdev_name":"rbd0"}},
 {"method":"bdev_ocf_set_seqcutoff","params":{"name":"bench0","policy":"never"}}' ;;
                *)
                    local policy=${t%%[@%]*} options=""
                    case $t in hhc-*) policy=hhc ;; esac
                    [[ $t != *@* ]] || options+=',"dirty_threshold":'$(sed 's/.*@\([0-9]*\).*/\1/' <<<"$t")
                    [[ $t != *%* ]] || options+=',"writeback_parallelism":'${t##*%}
                    devs+=("$(malloc_json log_base "$LOG_MB")" "$(model_json log0 log_base "$logmodel" "$logparams")")
                    create='{"method":"bdev_hhc_create","params":{"name":"bench0","backing":"'$back'","cache":"ssd","logs":["log0"],"policy":"'$policy'","segment_size":'$SEGMENT_SIZE$options'}}' ;;
            esac
            devs+=("$create") ;;
    esac
    printf '{"subsystems":[{"subsystem":"bdev","config":[\n'
    printf ' %s,\n' "${devs[@]}"
    printf ' {"method":"bdev_wait_for_examine"}]}]}\n'
}

fio_workload() {
    case $1 in
        randread | mixed) echo "$1" ;;
        *) echo "fsync=$1" ;;
    esac
}

fio_title() {
    case $1 in
        randread) echo "randread: fio 4 KiB iodepth 32 over the ${BACK_MB} MiB image, after a sequential read pass over it (fits the ${CACHE_MB} MiB cache; us)" ;;
        mixed) echo "mixed: fio randrw 70 % reads 4 KiB iodepth 32, a FLUSH every $MIX_FSYNC writes, after the read pass (latencies: reads and writes; us)" ;;
        *) echo "fsync=$1: fio randwrite 4 KiB iodepth 32, a FLUSH every $1 writes (write clat; flush = fio sync latency, us)" ;;
    esac
}

# The measured job, behind a read pass over the image for the workloads that read.
fio_bench_job() { # workload time
    local fill=(--name=fill --rw=read --bs=128k --iodepth=8 --size=100%)
    local timed=(--stonewall --time_based=1 --runtime="$2" --norandommap=1 --randrepeat=0 --iodepth=32)
    case $1 in
        randread) FIO_JOB=("${fill[@]}" --name=bench --rw=randread "${timed[@]}") ;;
        mixed) FIO_JOB=("${fill[@]}" --name=bench --rw=randrw --rwmixread=70 --fsync="$MIX_FSYNC"
            --unified_rw_reporting=both "${timed[@]}") ;;
        *) FIO_JOB=(--name=bench --rw=randwrite --iodepth=32 --fsync="$1" --time_based=1 --runtime="$2"
            --norandommap=1 --randrepeat=0) ;;
    esac
}

# What the run needs, else a ### SKIPPED banner.
preflight() {
    local f missing=
    ceph_available || missing="Ceph's $CEPH_MISSING (apt-get install ceph-mon ceph-osd ceph-mgr ceph-common)"
    [[ $(ldd "$FIO_PLUGIN" 2>/dev/null) == *libspdk_bdev_rbd* ]] || missing=${missing:-"bdev_rbd in $FIO_PLUGIN (SPDK configured without --with-rbd)"}
    for f in "$MODULE" "$EXTRA_PRELOAD" "$FIO_PLUGIN" "${FIO:-fio-not-found}"; do
        [ -e "$f" ] || missing=${missing:-$f}
    done
    [ -n "$SPDK_PY_DIR" ] || missing=${missing:-"SPDK's python spdk package under $SPDK_DIR"}
    [ -z "$missing" ] && return 0
    ceph_loud "SKIPPED tests/spdk/bench_ceph.sh: missing $missing"
    return 1
}

# The cluster (or the one running in CEPH_DIR) and the image, written in full.
setup_ceph() {
    if ! ceph_running mon.a; then
        ceph_up || return 1
        CEPH_OWNED=1
    fi
    ceph_image "$CEPH_IMAGE" "${BACK_MB}M" || return 1
    log "filling $CEPH_POOL/$CEPH_IMAGE (${BACK_MB} MiB)"
    bdev_json rbd >"$WORK/fill.json"
    timeout -k 5 600 "$FIO" --ioengine="$FIO_PLUGIN" --spdk_json_conf="$WORK/fill.json" --thread=1 \
        --env_context="--no-huge --legacy-mem" --spdk_mem=1024 --filename=bench0 --direct=1 \
        --name=fill --rw=write --bs=1M --iodepth=4 --size=100% >"$WORK/fill.log" 2>&1 ||
        { log "filling the image failed:"; tail -8 "$WORK/fill.log" >&2; return 1; }
}

run_round() {
    local t w n
    for w in $WORKLOADS; do
        case $w in
            fsync) set -- $FSYNCS ;;
            *) set -- "$w" ;;
        esac
        for n in "$@"; do
            for t in $TARGETS; do
                if [ "${t#ocf-}" != "$t" ] && ! have_ocf; then
                    skip "$(fio_workload "$n")" "$(fio_title "$n")" "$(target_label "$t")" "no OCF in this SPDK"
                    continue
                fi
                bench_fio "$t" "$n"
            done
        done
    done
}

main() {
    spdk_env_describe "[bench] " >&2
    preflight || exit 0
    log "devices: image $BACK_MB MiB over bdev_rbd; cache $CACHE_MB MiB SSD model; log $LOG_MB MiB ($BENCH_LOG_SEGMENTS segments of $SEGMENT_SIZE B) HDD model (hhc-ssdlog: SSD model); malloc bases, $BS B blocks"
    log "runs: $BENCH_TIME s each (HHC runs that log: until the log wrapped $MIN_WRAPS times, at most $MAX_TIME s)"
    setup_ceph || { log "the Ceph cluster or its image did not come up"; exit 1; }
    for ROUND in $(seq "$ROUNDS"); do
        [ "$ROUNDS" -eq 1 ] || log "round $ROUND of $ROUNDS"
        run_round
    done
    echo "HHC over Ceph RBD, side by side, $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null), $(nproc) CPUs, $ROUNDS round(s)"
    echo "one-node Ceph $(ceph --version 2>/dev/null | awk '{print $3}') (one BlueStore OSD on a sparse file, pool size 1) on the same machine"
    echo "devices: image $BACK_MB MiB (bdev_rbd, 4 KiB blocks; under OCF and HHC rbd_cache=$BACKING_RBD_CACHE); cache $CACHE_MB MiB SSD model; log $LOG_MB MiB HDD model ($BENCH_LOG_SEGMENTS segments of $SEGMENT_SIZE B); models over malloc"
    $LIB report "$RESULTS"
    [ -z "${KEEP_WORK:-}" ] || cp "$RESULTS" "$WORK/results-final.jsonl"
}

main "$@"
