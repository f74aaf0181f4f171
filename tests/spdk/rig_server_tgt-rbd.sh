# shellcheck shell=bash
# The rig's storage server of kind tgt-rbd (RIG_SERVER=tgt-rbd): an iSCSI
# gateway to Ceph with no SPDK in it. Debian's tgtd (package tgt) serves,
# as the tgt kind does, target RIG_TARGET_IQN on 127.0.0.1:RIG_ISCSI_PORT,
# but its LUN 1 is the backing store rbd of package tgt-rbd over an RBD
# image of the cluster the ceph kind uses (tests/ceph/cluster.sh, shared
# when already running; a new image of RIG_RAID_MB for each rig). The host
# reaches it over bdev_iscsi; the drills read the image through a
# bdev_rbd of their own, as the ceph kind's. server_kill, server_freeze
# and server_thaw act on tgtd. Sourced by rig_lib.sh, which documents the
# functions every server kind provides.
#
# tgtd's librados reads RIG_WORK/tgt-rbd.conf (the cluster's client.conf:
# the mon, CEPH_DIR's keyring, op timeouts of CEPH_CLIENT_OP_TIMEOUT s),
# named in the LUN's --bsopts; nothing in /etc. Its store turns a
# SYNCHRONIZE CACHE into rbd_flush (and flushes after every write when
# the write cache is off or the write has FUA), so librbd's own write-back
# cache may stay on: RIG_TGTRBD_CACHE=on (librbd's default; Ceph 16
# acknowledges a write before the OSD has it, a kill -9 of tgtd loses what
# was not flushed) or off (rbd_cache=false: every write the OSD's).

# shellcheck source=tests/spdk/rig_server_ceph.sh
. "$RIG_REPO/tests/spdk/rig_server_ceph.sh"
# Sourced second: tgt's server_running, _kill, _freeze, _thaw and
# _backing_create are this kind's.
# shellcheck source=tests/spdk/rig_server_tgt.sh
. "$RIG_REPO/tests/spdk/rig_server_tgt.sh"

# shellcheck disable=SC2034 # (rig_lib.sh's)
RIG_BACKING=iscsi0
RIG_TGTRBD_CACHE=${RIG_TGTRBD_CACHE:-on}
# shellcheck disable=SC2034 # (saved in rig.env by rig_save_env)
RIG_SERVER_VARS="CEPH_DIR RIG_CEPH_IMAGE RIG_CEPH_OWNED RIG_TGT_WRITE_CACHE RIG_TGT_ACL RIG_TGT_CONTROL_PORT RIG_TGTRBD_CACHE"

# rbd_cache as librados takes it.
tgtrbd_cache() { if [ "$RIG_TGTRBD_CACHE" = on ]; then echo true; else echo false; fi; }
tgtrbd_conf() { echo "$RIG_WORK/tgt-rbd.conf"; }
# tgtd's librados admin socket: what the running process has set.
tgtrbd_asok() { echo "$RIG_WORK/tgt-rbd.asok"; }

server_check_tools() {
    tgt_rig_check_tools && ceph_rig_check_tools || return 1
    [[ $(ldd "$RIG_TGT" 2>/dev/null) == *libspdk_bdev_iscsi* ]] ||
        { rig_log "$RIG_TGT has no bdev_iscsi (SPDK built without --with-iscsi-initiator)"; return 1; }
    case $RIG_TGTRBD_CACHE in
        on | off) ;;
        *) rig_log "RIG_TGTRBD_CACHE=$RIG_TGTRBD_CACHE: on or off"; return 1 ;;
    esac
}

# (tgt's server_describe names it)
tgt_lun_describe() { echo "rbd LUN over $CEPH_POOL/$RIG_CEPH_IMAGE (librbd cache $RIG_TGTRBD_CACHE, CEPH_DIR=$CEPH_DIR)"; }

# The cluster and the rig's image (ceph kind), then tgtd over it; says
# what librbd's cache is in tgtd (its admin socket), and fails if that is
# not what RIG_TGTRBD_CACHE asked for.
server_start() {
    local cfg cache policy
    ceph_rig_start && tgt_rig_start || return 1
    cfg=$(tgtrbd_config_get rbd_cache rbd_cache_policy) ||
        { rig_log "server: tgtd's librados admin socket $(tgtrbd_asok) does not answer"; return 1; }
    read -r cache policy <<<"$cfg"
    rig_log "server: librbd in tgtd: rbd_cache $cache, rbd_cache_policy $policy"
    [ "$cache" = "$(tgtrbd_cache)" ] || { rig_log "server: rbd_cache is $cache in tgtd, RIG_TGTRBD_CACHE=$RIG_TGTRBD_CACHE"; return 1; }
}

# Whether the running tgtd lists the backing store rbd.
tgtrbd_store_listed() { tgt_adm --op show --mode sys | awk '$1 == "rbd" {f = 1} END {exit !f}'; }

# The same asked of a tgtd of its own (control port and portal those of
# the rig, which must not be up), stopped again.
tgtrbd_has_store() {
    local rc=1
    mkdir -p /var/run/tgtd "$RIG_WORK" || return 1
    rig_spawn probe "$RIG_WORK/tgtd-probe.log" "$RIG_WORK" tgtd -f -C "$(tgt_port)" --iscsi portal="127.0.0.1:$RIG_ISCSI_PORT"
    for _ in $(seq 100); do
        if tgt_adm --op show --mode sys >/dev/null 2>&1; then
            tgtrbd_store_listed && rc=0
            break
        fi
        sleep 0.1
    done
    rig_stop probe KILL tgtd
    return $rc
}

# LUN 1 over the image, librados configured by tgt-rbd.conf.
tgt_lun_new() {
    tgtrbd_store_listed || { rig_loud "tgtd has no backing store rbd (apt-get install tgt-rbd)"; return 1; }
    # client.conf's [client] section comes last: the lines below go there.
    { sed '/^admin socket *=/d' "$CEPH_CLIENT_CONF" &&
        printf 'admin socket = %s\nrbd cache = %s\n' "$(tgtrbd_asok)" "$(tgtrbd_cache)"; } >"$(tgtrbd_conf)" || return 1
    tgt_adm --lld iscsi --op new --mode logicalunit --tid 1 --lun "$RIG_ISCSI_LUN" --bstype rbd \
        -b "$CEPH_POOL/$RIG_CEPH_IMAGE" --bsopts "conf=$(tgtrbd_conf);id=admin"
}

# librados settings as tgtd's running store has them, on one line.
tgtrbd_config_get() { # key...
    timeout 20 ceph --admin-daemon "$(tgtrbd_asok)" config show |
        python3 -c 'import json, sys; c = json.load(sys.stdin); print(" ".join(c[k] for k in sys.argv[1:]))' "$@"
}

# tgtd first (it holds the image open), then the image and the cluster.
server_stop() {
    tgt_rig_stop
    ceph_rig_stop
}

server_fio() { ceph_rig_fio "$@"; }
