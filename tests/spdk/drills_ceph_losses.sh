#!/usr/bin/env bash
# What each cache in front of Ceph RBD loses (docs/ceph.md, "What each
# cache loses"): the rig over Ceph (drills_ceph.sh) with the host
# exporting, in place of hhc0, one configuration over the rig's image:
#
#   rbd        bdev_rbd alone, librbd's rbd_cache off
#   rbd-cache  bdev_rbd alone, rbd_cache on in write-back (in RAM)
#   ocf-wt     SPDK's OCF vbdev in wt, cache = the SSD model, core = bdev_rbd
#   ocf-wb     the same in wb
#   hhc-wb     HHC policy wb (hhc0 as in the other drills), write-back
#              held off (RIG_HHC_ARGS, default '"dirty_threshold":100,
#              "idle_after_ms":600000') so the passes are still dirty in
#              the cache at the kill
#
# and one fault under the pass load of drills.sh:
#
#   ssd   the cache bdev removed (a dead SSD); the host killed; the image
#         read alone by a fresh bdev_rbd
#   kill  kill -9 of the host, restarted over the same files and image
#         (LOSS_KILLS times); read through the restarted host
#
# Each ends in the check of drills.sh: the newest pass done (covered by a
# flush) must verify in full. A configuration that keeps flushed writes
# must pass it; one that loses them must fail it, and the drill passes
# only when the check catches the loss (as drill_check_can_fail).
# tests/spdk/run.sh runs them as ceph_loss_*; alone:
# `bash tests/spdk/drills_ceph_losses.sh [CONFIG:FAULT...]`.

set -u -o pipefail
DRILL_REGION_MB=${DRILL_REGION_MB:-4}   # a pass: 1024 writes (raw RBD takes them slowly)
# shellcheck source=tests/spdk/drills_ceph.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/drills_ceph.sh"

LOSS_KILLS=${LOSS_KILLS:-2}     # kill -9 rounds of a configuration that must keep its flushed writes
# shellcheck disable=SC2034 # (rig_lib.sh's rig_up)
RIG_HOST_START=loss_host_start
LOSS_LOST=3                     # a drill's status when the newest pass did not verify
# HHC's write-back held off: what a kill finds is dirty in the cache alone.
LOSS_HHC_ARGS='"dirty_threshold":100,"idle_after_ms":600000'

# The bdev the host exports for a configuration.
loss_bdev() { # config
    case $1 in
        rbd*) echo rbd0 ;;
        ocf-*) echo ocf0 ;;
        *) echo "$RIG_HHC" ;;
    esac
}

# bdev_rbd_create's params over the rig's image, rbd_cache on (true) or
# off, 4 KiB blocks (OCF refuses a core of smaller blocks than its cache).
loss_rbd_params() { # name true|false
    local p policy=
    p=$(server_rbd_params "$1")
    p=${p/\"block_size\":512/\"block_size\":4096}
    [ "$2" = false ] || policy=',"rbd_cache_policy":"writeback"'
    echo "${p%\}\}},\"rbd_cache\":\"$2\"$policy}}"
}

# The host with a configuration's bdevs, exported over NVMe-oF (rig_up's
# RIG_HOST_START). A restart re-creates them over the same files: OCF's
# bdev_ocf_create over a cache that holds OCF metadata.
loss_host_start() { # config
    local cfg=$1 RIG_SOCK=$RIG_HOST_SOCK
    case $cfg in hhc-*) RIG_HHC_ARGS=${RIG_HHC_ARGS:-$LOSS_HHC_ARGS} host_start "${cfg#hhc-}"; return ;; esac
    rig_running host && { rig_log "host already running (pid $(rig_pid host))"; return 0; }
    RIG_POLICY=$cfg
    host_spawn || return 1
    case $cfg in
        rbd | rbd-cache)
            rig_call bdev_rbd_create "$(loss_rbd_params rbd0 "$([ "$cfg" = rbd ] && echo false || echo true)")" >/dev/null ;;
        ocf-wt | ocf-wb)
            # The cache behind an error bdev: a dead SSD fails its I/O.
            rig_aio ssd0_base "$RIG_WORK/ssd0.img" "$RIG_SSD_MB" 4096 && make_ssd "$RIG_CACHE" ssd0_base &&
                rig_call bdev_error_create "{\"base_name\":\"$RIG_CACHE\"}" bdev_rbd_create "$(loss_rbd_params rbd0 false)" \
                    bdev_ocf_create "{\"name\":\"ocf0\",\"mode\":\"${cfg#ocf-}\",\"cache_bdev_name\":\"EE_$RIG_CACHE\",\"core_bdev_name\":\"rbd0\"}" \
                    >/dev/null ;;
        *) rig_log "no configuration $cfg"; false ;;
    esac || { rig_log "host: the bdevs of $cfg could not be created"; return 1; }
    rig_log "host: $cfg as $(loss_bdev "$cfg")"
    RIG_HHC=$(loss_bdev "$cfg") host_export
}

# Writes rbd0 (the image, under OCF) has completed.
loss_rbd_writes() {
    RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_get_iostat '{"name":"rbd0"}' |
        python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["bdevs"][0]["num_write_ops"])'
}

# OCF's dirty cache lines, or HHC's dirty blocks, as one phrase.
loss_dirty() { # config
    case $1 in
        ocf-*) RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_ocf_get_stats '{"name":"ocf0"}' |
            python3 -c 'import json, sys; u = json.loads(sys.stdin.readline())["usage"]
print("OCF dirty %s of %s occupied 4 KiB lines" % (u["dirty"]["count"], u["occupancy"]["count"]))' ;;
        hhc-*) echo "HHC dirty blocks $(drill_stat 's["gauges"]["dirty_blocks"]')" ;;
        rbd) echo "no cache" ;;
        *) echo "librbd's cache in the host's RAM" ;;
    esac
}

# Runs a verify (nvmf_fio or server_fio) of the newest pass into a log:
# 0 it verifies, LOSS_LOST it fails on the data (how many blocks are bad
# then goes to the log), 1 it could not read.
loss_verify() { # nvmf_fio|server_fio log
    local k
    k=$(drill_last_pass)
    [ -n "$k" ] || { drill_log "no pass was ever done"; return 1; }
    # shellcheck disable=SC2046
    "$1" $(drill_verify_args "$k") >"$2" 2>&1 && return 0
    grep -Eq 'verify: bad|verify failed' "$2" || { tail -20 "$2"; return 1; }
    # shellcheck disable=SC2046
    "$1" $(drill_verify_args "$k") --verify_fatal=0 --continue_on_error=verify >"$2.all" 2>&1
    drill_log "pass $k: $(grep -Ec '^verify: bad|verify failed' "$2.all") of $((DRILL_REGION_MB * 256)) blocks bad," \
        "first: $(grep -Em1 'verify: bad|verify failed' "$2")"
    return "$LOSS_LOST"
}

# The cache goes under load: dead (every I/O of it fails, then it is
# removed) or removed (a hot-remove: it stays readable until its users let
# go); the host killed; the image alone, read by a fresh bdev_rbd, must
# hold the newest pass.
loss_cache_gone() { # config dead|removed
    local cfg=$1 rc mark w0
    rig_up "$cfg" && drill_load_start && drill_wait_passes 2 || return 1
    drill_log "$cfg, before the cache goes: $(loss_dirty "$cfg")"
    mark=$(wc -l <"$RIG_HOST_LOG")
    w0=$(loss_rbd_writes)
    if [ "$2" = dead ]; then
        rig_rpc host bdev_error_inject_error "EE_$RIG_CACHE" all failure -n 100000000 >/dev/null || return 1
        drill_log "every I/O of $RIG_CACHE fails from now on (a dead SSD)"
        drill_wait_passes 1 5 >/dev/null && drill_log "a pass was done with the cache dead"
    fi
    drill_remove "$RIG_CACHE" || return 1
    drill_load_stop
    # What the OCF bdev does with the cache gone, until it is gone itself.
    for _ in $(seq 50); do
        RIG_SOCK=$RIG_HOST_SOCK rig_call bdev_get_bdevs '{"name":"ocf0"}' >/dev/null 2>&1 || break
        sleep 0.2
    done
    tail -n +"$mark" "$RIG_HOST_LOG" | grep -E 'ocf' | tail -4 | sed 's/^/[host] /'
    drill_log "rbd0 took $(($(loss_rbd_writes) - w0)) writes from the cache's loss on"
    host_kill
    loss_verify server_fio "$RIG_WORK/verify-image.log"
    rc=$?
    [ "$rc" != 0 ] || drill_log "pass $(drill_last_pass) verifies on the image alone (fresh bdev_rbd)"
    return "$rc"
}

loss_ssd() { loss_cache_gone "$1" dead; }
loss_remove() { loss_cache_gone "$1" removed; }

# kill -9 of the host 0-2.5 s into the pass after a flushed one, a restart
# of the same configuration, the newest pass read through it; LOSS_KILLS
# rounds, or until one loses it. Configurations whose image must hold
# everything (rbd, ocf-wt) are then read on the image alone too.
loss_kill() { # config
    local cfg=$1 i delay rc
    rig_up "$cfg" || return 1
    for i in $(seq "$LOSS_KILLS"); do
        drill_load_start
        drill_wait_passes 1 || return 1
        delay=$(awk -v r="$RANDOM" 'BEGIN {printf "%.1f", (r % 26) / 10}')
        sleep "$delay"
        drill_log "kill $i: $(loss_dirty "$cfg")"
        host_kill
        drill_load_stop
        loss_host_start "$cfg" >>"$RIG_WORK/restarts.log" 2>&1 || { drill_log "restart $i failed"; tail -5 "$RIG_HOST_LOG"; return 1; }
        case $cfg in hhc-*) [ "$(grep -c "host: $RIG_HHC warm" "$RIG_WORK/restarts.log")" = "$i" ] ||
            { drill_log "restart $i: hhc0 did not come back warm"; return 1; } ;; esac
        loss_verify nvmf_fio "$RIG_WORK/verify.log"
        rc=$?
        [ "$rc" = 0 ] || { drill_log "kill $i after ${delay} s: the newest pass is not there after the restart"; return "$rc"; }
        drill_log "kill $i after ${delay} s: pass $(drill_last_pass) verifies through the restarted $(loss_bdev "$cfg")"
    done
    case $cfg in
        rbd | ocf-wt)
            host_kill
            drill_verify_raid || return 1 ;;
    esac
}

# One drill on a rig of its own: CONFIG:FAULT. For OCF wb, which loses
# flushed writes to both faults (its dirty lines live on the SSD only, and
# SPDK's OCF cannot load a cache after a restart), it passes only if the
# check caught the loss. (HHC wb's SSD loss: ceph_check_can_fail.)
loss_run() { # config:fault
    local cfg=${1%%:*} fault=${1#*:} rc expect=kept
    if [[ $cfg == ocf-* && $(ldd "$RIG_TGT" 2>/dev/null) != *libspdk_bdev_ocf* ]]; then
        rig_loud "SKIPPED $1: $RIG_TGT has no OCF (SPDK configured without --with-ocf)"
        return 0
    fi
    case $1 in ocf-wb:ssd | ocf-wb:kill) expect=lost ;; esac
    rm -f "$DRILL_PASSES_FILE"
    (
        trap 'drill_load_stop; KEEP=${KEEP:-} rig_down >/dev/null 2>&1' EXIT
        "loss_$fault" "$cfg"
    )
    rc=$?
    case $expect:$rc in
        kept:0) drill_log "checked: $cfg, $fault: the newest flushed pass kept" ;;
        lost:"$LOSS_LOST") drill_log "checked: $cfg, $fault: the newest flushed pass lost, and the check caught it"; rc=0 ;;
        lost:0) drill_log "$cfg, $fault: the newest flushed pass verifies, though $cfg should have lost it: the check checks nothing"; rc=1 ;;
    esac
    if [ "$rc" = 0 ]; then echo "[drill] PASS $1"; else echo "[drill] FAIL $1 (status $rc)"; fi
    return "$rc"
}

LOSS_CHECKS="rbd:kill rbd-cache:kill ocf-wt:ssd ocf-wt:kill ocf-wb:ssd ocf-wb:remove ocf-wb:kill hhc-wb:kill"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    failed=0
    [ $# -gt 0 ] || read -ra checks <<<"$LOSS_CHECKS"
    for check in "${@:-${checks[@]}}"; do
        loss_run "$check" || failed=$((failed + 1))
    done
    [ "$failed" = 0 ]
fi
