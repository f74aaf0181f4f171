#!/usr/bin/env bash
# A takeover over Ceph RBD, fenced with Ceph's own mechanism (docs/ceph.md,
# "A takeover"): the rig with RIG_SERVER=ceph and RIG_PEER=1 (a log mirror
# on the peer over NVMe-oF; hhc0's backing is bdev_rbd on either host), the
# image with `exclusive-lock`, write-back held off so the flushed passes
# are in the host's cache and the logs alone. The host is frozen (SIGSTOP:
# cut off, not dead), the peer takes the volume over and writes a newer
# pass and writes it back; then the host is let go and told to write its
# cache back. With the host fenced first (scripts/ceph-fence.sh), the
# cluster refuses the host's writes and the image alone holds the peer's
# pass; without the fence, the same check fails: the host takes the
# exclusive lock back and writes older passes over the peer's.
# tests/spdk/run.sh runs them as ceph_peer_*; alone (a cluster already
# running in CEPH_DIR is shared, else the rig brings one up and down):
#
#   bash tests/spdk/drills_ceph_peer.sh [drill...]

set -u -o pipefail
export RIG_SERVER=ceph RIG_PEER=1
# shellcheck source=tests/spdk/drills.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/drills.sh"

# shellcheck source=tests/spdk/takeover_frozen.sh
. "$RIG_REPO/tests/spdk/takeover_frozen.sh"

CEPH_TAKEOVER_FEATURES=layering,exclusive-lock

# One takeover (takeover_frozen.sh): fence = 1 blocklists the host before
# the peer opens the image; locked = 1 has the host write its cache back
# once after the first pass, so that it holds the image's exclusive lock
# when it is frozen.
ceph_takeover() { # fence locked
    local fence=$1 locked=$2
    local RIG_HHC_ARGS=${RIG_HHC_ARGS:-'"dirty_threshold":100,"idle_after_ms":600000'}
    CEPH_IMAGE_FEATURES=$CEPH_TAKEOVER_FEATURES rig_up hhc || return 1
    drill_load_start
    drill_wait_passes 1 || return 1
    if [ "$locked" = 1 ]; then
        takeover_flush_all "$RIG_HOST_SOCK" 60 >/dev/null || { drill_log "the host could not write its cache back"; return 1; }
    fi
    drill_wait_passes 1 || return 1
    if [ "$fence" = 1 ]; then
        takeover_of_frozen_host bash "$RIG_REPO/scripts/ceph-fence.sh" -c "$CEPH_CONF" "$CEPH_POOL/$RIG_CEPH_IMAGE"
    else
        takeover_of_frozen_host
    fi
}

# The host, holding the image's exclusive lock, fenced: the lock broken,
# its write-back refused by the cluster; the image alone holds the peer's
# pass.
drill_ceph_peer_takeover_fenced() {
    ceph_takeover 1 1 || return 1
    grep -q "lock .* broken" "$RIG_WORK/fence.log" || { drill_log "the host held no lock on the image to break"; return 1; }
    takeover_fenced_holds
}

# Without the fence the check must fail: the thawed host's write-back puts
# older passes over the peer's (the exclusive lock alone passes to it on
# request).
drill_ceph_peer_takeover_unfenced_check_can_fail() {
    ceph_takeover 0 0 && takeover_unfenced_check_fails
}

CEPH_PEER_DRILLS="drill_ceph_peer_takeover_fenced drill_ceph_peer_takeover_unfenced_check_can_fail"

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    failed=0
    [ $# -gt 0 ] || read -ra drills <<<"$CEPH_PEER_DRILLS"
    for drill in "${@:-${drills[@]}}"; do
        drill_run "$drill" || failed=$((failed + 1))
    done
    [ "$failed" = 0 ]
fi
