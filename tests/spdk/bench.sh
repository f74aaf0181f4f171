#!/usr/bin/env bash
# Side-by-side benchmark of the HHC bdev (docs/spdk.md, "Benchmarks"): every
# target over the same RAM devices (bdev_malloc, 4 KiB blocks) in one run,
# one table per workload.
#
#   targets   bdev_passthru over the backing malloc; HHC in each policy
#             (passthrough wt wb wb-flush wb-ordered hhc; POLICY@N sets a
#             dirty threshold of N %, e.g. wb@100: write-back only when idle
#             or short of blocks, as OCF's default cleaner; POLICY%D a
#             write-back depth of D, e.g. wb@100%16); SPDK's OCF vbdev
#             in cache modes wt and wb (cache = the "SSD" malloc, core = the
#             backing malloc) where the install has it
#   workloads randread   bdevperf, 4 KiB, QD, after a sequential read pass
#                        over the whole bdev (it fits the cache: reads hit)
#             randwrite  bdevperf, 4 KiB, QD
#             fsync=N    fio (spdk_bdev plugin) randwrite 4 KiB, iodepth 32,
#                        a FLUSH every N writes, for N in FSYNCS
#
# Builds nothing: it uses OUT's libspdk_bdev_hhc.so (preloaded into bdevperf
# and fio for every target alike), SPDK_DIR's bdevperf and fio plugin, and
# fio (found as in run.sh). Every process runs under a timeout and is
# stopped by PID on exit.
#
# A run on the HHC policy that logs goes on until its log has wrapped
# MIN_WRAPS times: a run that wrapped fewer is repeated, longer (up to
# MAX_TIME s). Wraps come from the engine's `log_wraps` stat where it has
# one, else from log_segments_written and the log's segment count; the
# footer says which.
#
# Environment (defaults): SPDK_DIR (/opt/spdk), OUT (target/spdk), FIO,
# BACK_MB (256), CACHE_MB (512), LOG_MB (256, one mirror: it holds the
# dirty threshold's 154 MiB, so hhc is not forced to write back by log space), SEGMENT_SIZE
# (1048576), QD (32), BENCH_TIME (10 s a measured run), WARMUP_TIME (5 s),
# MIN_WRAPS (10), MAX_TIME (180 s), FSYNCS ("1 8 64"), TARGETS ("passthru
# passthrough wt wb wb-flush wb-ordered hhc ocf-wt ocf-wb"), WORKLOADS
# ("randread randwrite fsync"), BDEVPERF_MEM_MB and FIO_SPDK_MEM_MB (3072),
# BDEVPERF_CORES ("": one core; "-m 0x3 -C": a bdevperf job on each of 2),
# ROUNDS (1: every target once; N: N rounds, each running every target
# once, back to back, reported as medians with the range of the rounds'
# ratios: a process's IOPS on RAM devices move with where its buffers
# land, so one process per target says little),
# HUGE (unset: --no-huge; 1: bdevperf and fio take hugepages, which must
# be reserved and mounted, see docs/spdk.md),
# BEFORE_OUT (unset): a directory holding another build's module, e.g. of
# an earlier commit; a target written before/POLICY (before/wb) runs that
# module, so a before/after pair shares one run and its devices,
# KEEP_WORK=1 keeps the scratch directory (logs, raw results),
# PERF=1 records each measured bdevperf run with `perf record -e cpu-clock -g` into
# that directory (perf-TARGET-WORKLOAD.data, the last round's; set KEEP_WORK too) and prints
# its top symbols.
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
SPDK_DIR=${SPDK_DIR:-/opt/spdk}
# shellcheck source=tests/spdk/env.sh
. "$REPO/tests/spdk/env.sh"
spdk_find_fio
OUT=${OUT:-$REPO/target/spdk}
MODULE=$OUT/libspdk_bdev_hhc.so
BEFORE_MODULE=${BEFORE_OUT:+$BEFORE_OUT/libspdk_bdev_hhc.so}
# Preloaded next to a target's module when set: the test-only device-model
# bdevs' module (bench_ceph.sh's SSD and HDD models).
EXTRA_PRELOAD=${EXTRA_PRELOAD:-}
BDEVPERF=$SPDK_DIR/bin/bdevperf
FIO_PLUGIN=$SPDK_DIR/lib/fio/spdk_bdev
BACK_MB=${BACK_MB:-256}
CACHE_MB=${CACHE_MB:-512}
LOG_MB=${LOG_MB:-256}
SEGMENT_SIZE=${SEGMENT_SIZE:-1048576}
QD=${QD:-32}
BENCH_TIME=${BENCH_TIME:-10}
WARMUP_TIME=${WARMUP_TIME:-5}
MIN_WRAPS=${MIN_WRAPS:-10}
MAX_TIME=${MAX_TIME:-180}
FSYNCS=${FSYNCS:-"1 8 64"}
TARGETS=${TARGETS:-"passthru passthrough wt wb wb-flush wb-ordered hhc ocf-wt ocf-wb"}
WORKLOADS=${WORKLOADS:-"randread randwrite fsync"}
BDEVPERF_MEM_MB=${BDEVPERF_MEM_MB:-3072}
# bdevperf's cores: "" (one), or e.g. "-m 0x3 -C" (a job on each core).
BDEVPERF_CORES=${BDEVPERF_CORES:-}
ROUNDS=${ROUNDS:-1}
# Memory of bdevperf and fio: anonymous pages (default) or hugepages.
NO_HUGE=--no-huge
[ -z "${HUGE:-}" ] || NO_HUGE=
ROUND=1
FIO_SPDK_MEM_MB=${FIO_SPDK_MEM_MB:-3072}
BS=4096
# The engine's log layout (src/config.rs): two 4 KiB units of superblock,
# then whole segments.
export BENCH_LOG_SEGMENTS=$(((LOG_MB * 1048576 - 8192) / SEGMENT_SIZE))

WORK=$(mktemp -d /tmp/hhc-spdk-bench.XXXXXX)
RESULTS=$WORK/results.jsonl
export LD_LIBRARY_PATH=$SPDK_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$REPO/json-rpc${PYTHONPATH:+:$PYTHONPATH}
spdk_find_rpc
LIB="python3 $REPO/tests/spdk/bench_lib.py"
PIDS=()

log() { echo "[bench] $*" >&2; }

stop_pid() { # pid: TERM, up to 10 s, then KILL
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
    spdk_trace_leftovers
    if [ -n "${KEEP_WORK:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What a target preloads: its module (before/POLICY runs BEFORE_OUT's),
# and EXTRA_PRELOAD.
target_module() {
    case $1 in
        before/*) echo "${BEFORE_MODULE:?before/ targets need BEFORE_OUT}${EXTRA_PRELOAD:+:$EXTRA_PRELOAD}" ;;
        *) echo "$MODULE${EXTRA_PRELOAD:+:$EXTRA_PRELOAD}" ;;
    esac
}

target_label() {
    case $1 in
        before/*) echo "before:${1#before/}" ;;
        passthru) echo bdev_passthru ;;
        ocf-*) echo "ocf:${1#ocf-}" ;;
        *) echo "hhc:$1" ;;
    esac
}

target_kind() {
    case $1 in
        passthru) echo none ;;
        ocf-*) echo ocf ;;
        *) echo hhc ;;
    esac
}

# The bdev config: three malloc bdevs and the target as bench0.
bdev_json() { # target
    local t=${1#before/} create
    case $t in
        passthru)
            create='{"method":"bdev_passthru_create","params":{"base_bdev_name":"back","name":"bench0"}}' ;;
        ocf-*)
            # No sequential cut-off: the warm-up pass must be inserted.
            create='{"method":"bdev_ocf_create","params":{"name":"bench0","mode":"'${t#ocf-}'","cache_bdev_name":"ssd","core_bdev_name":"back"}},
 {"method":"bdev_ocf_set_seqcutoff","params":{"name":"bench0","policy":"never"}}' ;;
        *)
            # policy[@N][%D]: dirty threshold N %, write-back depth D.
            local policy=${t%%[@%]*} options=""
            [[ $t != *@* ]] || options+=',"dirty_threshold":'$(sed 's/.*@\([0-9]*\).*/\1/' <<<"$t")
            [[ $t != *%* ]] || options+=',"writeback_parallelism":'${t##*%}
            create='{"method":"bdev_hhc_create","params":{"name":"bench0","backing":"back","cache":"ssd","logs":["hdd0"],"policy":"'$policy'","segment_size":'$SEGMENT_SIZE$options'}}' ;;
    esac
    cat <<EOF
{"subsystems":[{"subsystem":"bdev","config":[
 {"method":"bdev_malloc_create","params":{"name":"back","num_blocks":$((BACK_MB * 1048576 / BS)),"block_size":$BS}},
 {"method":"bdev_malloc_create","params":{"name":"ssd","num_blocks":$((CACHE_MB * 1048576 / BS)),"block_size":$BS}},
 {"method":"bdev_malloc_create","params":{"name":"hdd0","num_blocks":$((LOG_MB * 1048576 / BS)),"block_size":$BS}},
 $create,
 {"method":"bdev_wait_for_examine"}]}]}
EOF
}

record() { # workload title target json-record
    python3 - "$1" "$2" "$3" "$4" "$ROUND" >>"$RESULTS" <<'PY'
import json, sys
rec = json.loads(sys.argv[4])
rec.update(workload=sys.argv[1], title=sys.argv[2], target=sys.argv[3], round=int(sys.argv[5]))
print(json.dumps(rec))
PY
}

skip() { # workload title target reason
    log "SKIP $3 ($1): $4"
    record "$1" "$2" "$3" "$(python3 -c 'import json,sys; print(json.dumps({"skipped": sys.argv[1]}))' "$4")"
}

# Whether an HHC run must be repeated longer: prints the new time, or nothing.
longer_time() { # record-json time
    python3 - "$1" "$2" "$MIN_WRAPS" "$MAX_TIME" <<'PY'
import json, math, sys
rec, t, want, cap = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
if rec.get("stats", {}).get("log_segments_written", 0) == 0 or rec.get("wraps", 0) >= want or t >= cap:
    sys.exit(0)
# The first wrap is the fill of an empty log and comes quicker than the
# steady ones: estimate from those after it (no steady wrap seen: the cap).
runtime = max(rec.get("runtime_s") or t, 0.1)
steady = (rec["wraps"] - 1) / runtime if rec["wraps"] > 1.1 else 0
print(min(cap, math.ceil(1.3 * (want - 1) / steady)) if steady > 0 else cap)
PY
}

wraps_short() { # record-json: prints a warning when the log wrapped too few times
    python3 - "$1" "$MIN_WRAPS" <<'PY'
import json, sys
rec = json.loads(sys.argv[1])
if rec.get("stats", {}).get("log_segments_written", 0) and rec.get("wraps", 0) < float(sys.argv[2]):
    print(f"log wrapped only {rec['wraps']:.1f} times")
PY
}

BP_TITLE_READ="randread: bdevperf 4 KiB QD $QD, after a ${WARMUP_TIME} s sequential read pass over the ${BACK_MB} MiB bdev (fits the ${CACHE_MB} MiB cache)"
BP_TITLE_WRITE="randwrite: bdevperf 4 KiB QD $QD over ${BACK_MB} MiB"
fio_title() { echo "fsync=$1: fio randwrite 4 KiB iodepth 32, a FLUSH every $1 writes (write clat; flush = fio sync latency, us)"; }

# One bdevperf process per target (-z: the tests come by RPC, so the warm-up,
# randread and randwrite share its RAM devices and cache).
bench_bdevperf() { # target
    local t=$1 label kind json sock bplog pid deadline
    label=$(target_label "$t")
    kind=$(target_kind "$t")
    json=$WORK/${t//\//-}.json
    sock=$WORK/bp-${t//\//-}.sock
    bplog=$WORK/bdevperf-${t//\//-}.log
    bdev_json "$t" >"$json"
    deadline=$((WARMUP_TIME + 2 * BENCH_TIME + MAX_TIME + 300))
    timeout -k 5 "$deadline" env LD_PRELOAD="$(target_module "$t")" "$BDEVPERF" $NO_HUGE -s "$BDEVPERF_MEM_MB" --json "$json" \
        -T bench0 -z -l -q "$QD" -o "$BS" -w randread -t "$BENCH_TIME" -r "$sock" $BDEVPERF_CORES >"$bplog" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    BP_PID=$pid
    if ! $LIB wait "$sock" 120; then
        log "bdevperf for $label did not come up:"
        tail -15 "$bplog" >&2
        for w in randread randwrite; do
            case " $WORKLOADS " in *" $w "*) ;; *) continue ;; esac
            [ "$w" = randread ] && title=$BP_TITLE_READ || title=$BP_TITLE_WRITE
            skip "$w" "$title" "$label" "bdevperf did not start ($(grep -m1 -i 'error' "$bplog" | sed 's/.*\*ERROR\*: //' | cut -c1-100))"
        done
        stop_pid "$pid"
        return
    fi
    case " $WORKLOADS " in
        *" randread "*)
            log "$label: warm-up (sequential read, 128 KiB, ${WARMUP_TIME} s)"
            bp_test "$sock" "$kind" "$bplog" read 131072 "$WARMUP_TIME" >/dev/null &&
                bp_run randread "$BP_TITLE_READ" "$t" "$sock" "$kind" "$bplog" ;;
    esac
    case " $WORKLOADS " in
        *" randwrite "*) bp_run randwrite "$BP_TITLE_WRITE" "$t" "$sock" "$kind" "$bplog" ;;
    esac
    timeout 30 $LIB call "$sock" spdk_kill_instance '{"sig_name":"SIGTERM"}' 10 >/dev/null 2>&1
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    stop_pid "$pid"
}

# One perform_tests call; prints its record.
bp_test() { # sock kind bplog workload io_size time
    local sock=$1 kind=$2 bplog=$3 w=$4 io=$5 time=$6 start
    start=$(stat -c %s "$bplog")
    timeout 30 $LIB stats "$sock" "$kind" >"$WORK/before.json" || return 1
    timeout $((time + 120)) $LIB call "$sock" perform_tests \
        "{\"workload_type\":\"$w\",\"io_size\":\"$io\",\"time_in_sec\":$time,\"queue_depth\":$QD}" \
        $((time + 100)) >"$WORK/result.json" || { log "perform_tests $w failed"; tail -5 "$bplog" >&2; return 1; }
    timeout 30 $LIB stats "$sock" "$kind" >"$WORK/after.json" || return 1
    # bdevperf prints the latency summary right after its answer.
    for _ in $(seq 50); do tail -c +$((start + 1)) "$bplog" | grep -q '99.99999%' && break; sleep 0.1; done
    tail -c +$((start + 1)) "$bplog" >"$WORK/chunk.log"
    $LIB bdevperf "$WORK/result.json" "$WORK/chunk.log" "$WORK/before.json" "$WORK/after.json"
}

bp_run() { # workload title target sock kind bplog
    local w=$1 title=$2 t=$3 sock=$4 kind=$5 bplog=$6 label rec time more
    label=$(target_label "$t")
    time=$BENCH_TIME
    while :; do
        log "$label: $w ${time} s"
        perf_start "$label" "$w" "$time"
        rec=$(bp_test "$sock" "$kind" "$bplog" "$w" "$BS" "$time") || { skip "$w" "$title" "$label" "run failed"; return; }
        perf_report
        more=$(longer_time "$rec" "$time")
        [ -n "$more" ] || break
        log "$label: $w: $(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["wraps"])' "$rec") log wraps in ${time} s; again for ${more} s"
        time=$more
    done
    note_short "$rec"
    record "$w" "$title" "$label" "$rec"
}

# PERF=1: a profile of bdevperf ($BP_PID) over the measured run.
perf_start() { # label workload time
    PERF_DATA=""
    [ -n "${PERF:-}" ] || return 0
    PERF_DATA=$WORK/perf-${1//[:\/]/-}-$2.data
    # $BP_PID is the timeout wrapping bdevperf.
    local bdevperf
    bdevperf=$(pgrep -n -P "$BP_PID" || echo "$BP_PID")
    timeout $(($3 + 30)) perf record -q -e cpu-clock -g -F 997 -p "$bdevperf" -o "$PERF_DATA" -- sleep "$3" >/dev/null 2>&1 &
    PERF_PID=$!
}

perf_report() {
    [ -n "$PERF_DATA" ] || return 0
    wait "$PERF_PID"
    log "perf: $PERF_DATA, top symbols (self):"
    perf report -i "$PERF_DATA" --no-children --percent-limit 1 --stdio -g none 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -25 >&2
}

# Adds a note to the record in $rec when the log wrapped too few times.
note_short() {
    local short
    short=$(wraps_short "$1")
    [ -n "$short" ] || return 0
    log "WARNING: $short even after ${MAX_TIME} s"
    rec=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["note"]=(r.get("note","")+" "+sys.argv[2]).strip(); print(json.dumps(r))' "$1" "$short (MAX_TIME ${MAX_TIME} s)")
}

# One fio process per target and FLUSH interval. A second job ("hold", only
# a few reads) keeps the process and its RPC server up after the measured
# job, so the engine's counters can be read after every write of the run.
# Called in this shell (not in $(...)), so that PIDS keeps what it starts.
# fio_bench_job, fio_workload and fio_title are hooks a script sourcing
# this one may redefine (tests/spdk/bench_ceph.sh); FIO_EXTRA_TIME (s) adds
# to the timeouts for jobs that run before the measured one.
FIO_EXTRA_TIME=${FIO_EXTRA_TIME:-0}
fio_bench_job() { # fsync time: sets FIO_JOB, the measured job's fio arguments
    FIO_JOB=(--name=bench --rw=randwrite --iodepth=32 --fsync="$1" --time_based=1 --runtime="$2" --norandommap=1 --randrepeat=0)
}
fio_workload() { echo "fsync=$1"; }

fio_once() { # target fsync time: writes the record to $WORK/fio-rec.json
    local t=$1 n=$2 time=$3 kind json sock out poll ppid pid
    kind=$(target_kind "$t")
    json=$WORK/${t//\//-}.json
    sock=$WORK/fio-${t//\//-}-$n.sock
    out=$WORK/fio-${t//\//-}-$n.json
    poll=$WORK/poll-${t//\//-}-$n.jsonl
    bdev_json "$t" >"$json"
    fio_bench_job "$n" "$time"
    rm -f "$sock" "$out" "$poll"
    if [ "$kind" != none ]; then
        timeout $((time + FIO_EXTRA_TIME + 200)) $LIB poll "$sock" "$kind" "$poll" 2>/dev/null &
        ppid=$!
        PIDS+=("$ppid")
    fi
    # SIGPIPE ignored (inherited through exec): the fio plugin leaves it at
    # its default, so a stats call that timed out and hung up before its
    # answer would kill fio with the answer's write.
    trap '' PIPE
    timeout -k 5 $((time + FIO_EXTRA_TIME + 150)) env LD_PRELOAD="$(target_module "$t")" "$FIO" --ioengine="$FIO_PLUGIN" --spdk_json_conf="$json" \
        --thread=1 --env_context="$NO_HUGE --legacy-mem" --spdk_mem="$FIO_SPDK_MEM_MB" \
        --spdk_rpc_listen_addr="$sock" --filename=bench0 --direct=1 --bs=4k \
        --output-format=json --output="$out" \
        "${FIO_JOB[@]}" \
        --name=hold --stonewall --rw=read --iodepth=1 --time_based=1 --runtime=3 --rate_iops=10 \
        >"$WORK/fio-${t//\//-}-$n.log" 2>&1 &
    pid=$!
    trap - PIPE
    PIDS+=("$pid")
    wait "$pid"
    local rc=$?
    [ -n "${ppid:-}" ] && { for _ in $(seq 50); do kill -0 "$ppid" 2>/dev/null || break; sleep 0.1; done; stop_pid "$ppid"; }
    if [ "$rc" -ne 0 ] || [ ! -s "$out" ]; then
        log "fio for $(target_label "$t") fsync=$n failed (rc $rc):"
        tail -8 "$WORK/fio-${t//\//-}-$n.log" >&2
        return 1
    fi
    $LIB fio "$out" "$poll" >"$WORK/fio-rec.json"
}

bench_fio() { # target fsync
    local t=$1 n=$2 label title time rec more w
    label=$(target_label "$t")
    title=$(fio_title "$n")
    w=$(fio_workload "$n")
    time=$BENCH_TIME
    while :; do
        log "$label: fio $w ${time} s"
        fio_once "$t" "$n" "$time" || { skip "$w" "$title" "$label" "fio failed (see the log above)"; return; }
        rec=$(cat "$WORK/fio-rec.json")
        more=$(longer_time "$rec" "$time")
        [ -n "$more" ] || break
        log "$label: $w: $(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["wraps"])' "$rec") log wraps in ${time} s; again for ${more} s"
        time=$more
    done
    note_short "$rec"
    record "$w" "$title" "$label" "$rec"
}

have_ocf() {
    ls "$SPDK_DIR"/lib/libspdk_bdev_ocf.* >/dev/null 2>&1
}

# Every target once, on every workload.
run_round() {
    local t n
    for t in $TARGETS; do
        if [ "${t#ocf-}" != "$t" ] && ! have_ocf; then
            log "SKIP $(target_label "$t"): this SPDK has no OCF bdev module (configure --with-ocf)"
            for w in randread randwrite; do
                [ "$w" = randread ] && title=$BP_TITLE_READ || title=$BP_TITLE_WRITE
                skip "$w" "$title" "$(target_label "$t")" "no OCF in this SPDK"
            done
            for n in $FSYNCS; do skip "fsync=$n" "$(fio_title "$n")" "$(target_label "$t")" "no OCF in this SPDK"; done
            continue
        fi
        case " $WORKLOADS " in *" randread "* | *" randwrite "*) bench_bdevperf "$t" ;; esac
    done
    case " $WORKLOADS " in
        *" fsync "*)
            for n in $FSYNCS; do
                for t in $TARGETS; do
                    if [ "${t#ocf-}" != "$t" ] && ! have_ocf; then continue; fi
                    bench_fio "$t" "$n"
                done
            done ;;
    esac
}

main() {
    local missing=
    spdk_env_describe "[bench] " >&2
    for f in "$MODULE" ${BEFORE_MODULE:+"$BEFORE_MODULE"} "$BDEVPERF" "$FIO_PLUGIN" "${FIO:-fio-not-found}"; do
        [ -e "$f" ] || { log "missing $f"; missing=1; }
    done
    [ -n "$SPDK_PY_DIR" ] || { log "missing SPDK's python spdk package under $SPDK_DIR"; missing=1; }
    [ -z "$missing" ] || { log "nothing run (build with make -C spdk-glue; see docs/spdk.md)"; exit 1; }
    log "devices: backing $BACK_MB MiB, cache $CACHE_MB MiB, log $LOG_MB MiB ($BENCH_LOG_SEGMENTS segments of $SEGMENT_SIZE B), all bdev_malloc, $BS B blocks"
    log "runs: $BENCH_TIME s each (HHC runs that log: until the log wrapped $MIN_WRAPS times, at most $MAX_TIME s)"
    for ROUND in $(seq "$ROUNDS"); do
        [ "$ROUNDS" -eq 1 ] || log "round $ROUND of $ROUNDS"
        run_round
    done
    echo "HHC side-by-side benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null), $(nproc) CPUs"
    echo "devices: backing $BACK_MB MiB, cache $CACHE_MB MiB, one log mirror $LOG_MB MiB ($BENCH_LOG_SEGMENTS segments of $SEGMENT_SIZE B); all bdev_malloc, $BS B blocks"
    $LIB report "$RESULTS"
    [ -z "${KEEP_WORK:-}" ] || cp "$RESULTS" "$WORK/results-final.jsonl"
}

# Sourced (bench_ceph.sh): its functions and settings only.
[ "${BASH_SOURCE[0]}" != "$0" ] || main "$@"
