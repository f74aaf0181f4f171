#!/usr/bin/env bash
# The paper's topology on 127.0.0.1 (docs/spdk.md, "Topology rig"): a
# storage server exporting an HDD RAID5 model over iSCSI, a host running
# hhc0 over it (SSD cache, HDD log mirrors) exported over NVMe-oF/TCP and
# vhost-blk, and clients through either. The functions are in rig_lib.sh.
#
#   rig.sh up [policy]     start server and host (policy default hhc)
#   rig.sh down            stop both, remove RIG_WORK (KEEP=1 keeps it)
#   rig.sh status          processes, exports, hhc0's state and counters
#   rig.sh env             the rig's paths, sockets and ports as assignments
#   rig.sh nvmf-fio ARGS   fio through the NVMe-oF client (nvmf_fio)
#   rig.sh vhost-fio ARGS  fio through the virtio-user client (vhost_fio)
#
# RIG_SERVER picks the storage server: spdk (default, hhc_tgt over a RAID
# model), tgt (Debian's tgtd, a file-backed LUN), ceph (an RBD image of
# the one-node cluster of tests/ceph/cluster.sh, docs/ceph.md) or tgt-rbd
# (tgtd serving such an image: an iSCSI gateway to Ceph); rig_lib.sh
# lists what each kind provides. RIG_PEER=1 adds a peer host whose HDD
# model, exported over NVMe-oF/TCP, is one more log mirror (rig_peer.sh).
# RIG_WORK (default /dev/shm/hhc-rig, or /tmp/hhc-rig) holds everything. Other settings: see
# rig_defaults in rig_lib.sh (ports RIG_ISCSI_PORT 3260, RIG_NVMF_PORT
# 4420; RIG_HDDS; sizes; masks; memory).
#
# Processes inherit this script's open files: under
# `flock /tmp/hhc-spdk-tests.lock bash rig.sh up` the lock stays held until
# they are stopped, so run `rig.sh down` without flock (or do up, the work
# and down inside one `flock ... bash -c '...'`).
set -u -o pipefail

# shellcheck source=tests/spdk/rig_lib.sh
. "$(dirname "$0")/rig_lib.sh"

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
    up)
        rig_up "$@" || { KEEP=1 rig_down; rig_log "(the failed rig's files are kept in $RIG_WORK)"; exit 1; }
        rig_status
        echo "RIG_WORK=$RIG_WORK"
        ;;
    down) rig_down ;;
    status) rig_status ;;
    env) rig_env ;;
    nvmf-fio) nvmf_fio "$@" ;;
    vhost-fio) vhost_fio "$@" ;;
    *)
        sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
        [ -z "$cmd" ] || [ "$cmd" = help ] || [ "$cmd" = -h ]
        ;;
esac
