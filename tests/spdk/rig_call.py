#!/usr/bin/env python3
"""JSON-RPC calls to one SPDK app over one connection, back to back, for
tests/spdk/rig_lib.sh (rig_call): no rpc.py start-up per call, params as
raw JSON. Prints each answer (JSON) on a line; the first error is printed
to stderr with the method that failed and ends the run with status 1.

    rig_call.py SOCKET METHOD PARAMS-JSON [METHOD PARAMS-JSON ...]

Needs SPDK's python `spdk` package on PYTHONPATH (tests/spdk/env.sh).
"""
import json
import os
import sys

from spdk.rpc.client import JSONRPCClient, JSONRPCException


def main():
    if len(sys.argv) < 4 or len(sys.argv) % 2 != 0:
        sys.stderr.write(__doc__)
        return 2
    client = JSONRPCClient(sys.argv[1], timeout=float(os.environ.get("RIG_CALL_TIMEOUT_S", "50")))
    calls = sys.argv[2:]
    for method, params in zip(calls[::2], calls[1::2]):
        try:
            answer = client.call(method, json.loads(params) if params else None)
        except JSONRPCException as error:
            sys.stderr.write("%s %s: %s\n" % (method, params, str(error).strip()))
            return 1
        print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
