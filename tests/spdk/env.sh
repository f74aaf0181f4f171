# Sourced by tests/spdk/run.sh, tests/spdk/bench.sh and .ci/run: finds the
# pieces of an SPDK install (a standard `make install` prefix, or a source
# tree) and fio. Nothing here starts anything or exits.
#
#   spdk_find_rpc      sets SPDK_RPC_CMD (the RPC client, a command line) and
#                      puts SPDK's python `spdk` package on PYTHONPATH
#   spdk_find_fio      sets FIO and FIO_FOUND_BY
#   spdk_env_describe  one line per choice, for the log
#
# Overrides: SPDK_RPC_CMD (a command line, e.g. "python3 /src/spdk/scripts/rpc.py"),
# SPDK_PYTHONPATH (a directory holding the `spdk` package), FIO.

SPDK_DIR=${SPDK_DIR:-/opt/spdk}

# A directory whose `spdk/rpc/client.py` makes `import spdk.rpc.client` work:
# `make install` puts the package under <prefix>/lib/pythonX.Y/site-packages
# (pip --prefix; Debian's pip may use local/lib/pythonX.Y/dist-packages), a
# source tree has it in python/. The running python3's own version first.
spdk_python_dir() {
    local ver d
    if [ -n "${SPDK_PYTHONPATH:-}" ]; then
        echo "$SPDK_PYTHONPATH"
        return 0
    fi
    ver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
    for d in "$SPDK_DIR"/lib/python"$ver"/site-packages "$SPDK_DIR"/lib64/python"$ver"/site-packages \
        "$SPDK_DIR"/local/lib/python"$ver"/dist-packages \
        "$SPDK_DIR"/lib/python3*/site-packages "$SPDK_DIR"/lib64/python3*/site-packages \
        "$SPDK_DIR"/local/lib/python3*/dist-packages "$SPDK_DIR"/python; do
        [ -f "$d/spdk/rpc/client.py" ] && { echo "$d"; return 0; }
    done
    return 1
}

# The RPC client where a standard install puts it: bin/spdk-rpc (make
# install), then scripts/rpc.py (source tree, also installed by some
# packagings), then python/rpc.py (older layouts).
spdk_find_rpc() {
    local pydir
    if pydir=$(spdk_python_dir); then
        SPDK_PY_DIR=$pydir
        case ":${PYTHONPATH:-}:" in
            *":$pydir:"*) ;;
            *) export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$pydir ;;
        esac
    else
        SPDK_PY_DIR=
    fi
    if [ -n "${SPDK_RPC_CMD:-}" ]; then
        SPDK_RPC_FOUND_BY="SPDK_RPC_CMD"
    elif [ -x "$SPDK_DIR/bin/spdk-rpc" ]; then
        # Its shebang names the python it was installed for.
        SPDK_RPC_CMD="$SPDK_DIR/bin/spdk-rpc"
        SPDK_RPC_FOUND_BY="bin/spdk-rpc"
    elif [ -f "$SPDK_DIR/scripts/rpc.py" ]; then
        SPDK_RPC_CMD="python3 $SPDK_DIR/scripts/rpc.py"
        SPDK_RPC_FOUND_BY="scripts/rpc.py"
    elif [ -f "$SPDK_DIR/python/rpc.py" ]; then
        SPDK_RPC_CMD="python3 $SPDK_DIR/python/rpc.py"
        SPDK_RPC_FOUND_BY="python/rpc.py"
    else
        SPDK_RPC_CMD=
        SPDK_RPC_FOUND_BY=
        return 1
    fi
    return 0
}

# fio: FIO, else the one on PATH, else the usual build directories. fio
# loads the spdk_bdev plugin only if both come from the same fio release.
spdk_find_fio() {
    local f
    FIO_FOUND_BY=
    if [ -n "${FIO:-}" ]; then
        FIO_FOUND_BY="FIO"
        return 0
    fi
    if f=$(command -v fio 2>/dev/null) && [ -n "$f" ]; then
        FIO=$f
        FIO_FOUND_BY="PATH"
        return 0
    fi
    for f in /opt/fio/fio /opt/src/fio/fio; do
        [ -x "$f" ] && { FIO=$f; FIO_FOUND_BY="default location"; return 0; }
    done
    FIO=
    return 1
}

# Removes each FILE whose name holds, right after MARKER, the pid of a
# process that is gone (what a killed SPDK process leaves behind).
spdk_remove_if_gone() { # marker file...
    local marker=$1 f pid
    shift
    for f in "$@"; do
        [ -e "$f" ] || continue
        pid=${f##*"$marker"}
        pid=${pid%%[!0-9]*}
        if [ -n "$pid" ] && ! [ -e "/proc/$pid" ]; then rm -f "$f"; fi
    done
}

# An SPDK app keeps its trace in /dev/shm/<app>_trace.pid<pid> (3 MiB)
# and removes it on a clean exit only: the drills' kill -9s left hundreds.
spdk_trace_leftovers() {
    spdk_remove_if_gone _trace.pid /dev/shm/hhc_tgt_trace.pid* /dev/shm/bdevperf_trace.pid*
}

spdk_env_describe() { # prefix
    local p=${1:-}
    echo "${p}SPDK_DIR=$SPDK_DIR"
    echo "${p}RPC client: ${SPDK_RPC_CMD:-NONE FOUND (looked for bin/spdk-rpc, scripts/rpc.py, python/rpc.py)}${SPDK_RPC_FOUND_BY:+ (from $SPDK_RPC_FOUND_BY)}"
    echo "${p}python spdk package: ${SPDK_PY_DIR:-NOT FOUND under $SPDK_DIR (set SPDK_PYTHONPATH)}"
    echo "${p}fio: ${FIO:-NONE FOUND (set FIO; looked on PATH, /opt/fio/fio, /opt/src/fio/fio)}${FIO_FOUND_BY:+ (from $FIO_FOUND_BY)}${FIO:+, $("$FIO" --version 2>/dev/null)}"
}
