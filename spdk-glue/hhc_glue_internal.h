/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * What the C files of the HHC module's shim share (not seen by bindgen):
 *   hhc_glue.c  module "hhc", examine, threads, time, memory, logging, JSON
 *   hhc_base.c  base bdevs: open, claim, I/O, hot-remove, close
 *   hhc_node.c  the HHC bdev: fn table, channels, registration, the data path
 *   hhc_rpc.c   the JSON-RPC methods: decoders and answers
 *   hhc_model.c module "hhc_model": the test-only device-model bdev and its RPCs
 */

#ifndef HHC_GLUE_INTERNAL_H
#define HHC_GLUE_INTERNAL_H

#include "hhc_glue.h"

#include "spdk/bdev_module.h"
#include "spdk/json.h"

extern struct spdk_bdev_module g_hhc_module;

struct hhc_dev_io;

/* A request thread's lane (hhc_base.c): its own channels to the backing
 * (slot 0) and cache (slot 1) bdevs, taken at first use and given back
 * once dropped (the bdev removed) and drained, and its own pool of I/O
 * contexts. */
struct hhc_glue_lane {
	void *rs_channel;
	struct spdk_io_channel *channels[HHC_GLUE_LANE_SLOTS];
	uint32_t in_flight[HHC_GLUE_LANE_SLOTS];
	bool dropped[HHC_GLUE_LANE_SLOTS];
	struct hhc_glue_io_pool *pool;
	/* Commands taken but not started yet (hhc_glue_lane_start), in order. */
	struct hhc_dev_io *pending;
	struct hhc_dev_io **pending_tail;
};

/* Bytes of driver context per HHC bdev I/O (hhc_base.c: a bypassed
 * request's lane). */
size_t hhc_glue_io_ctx_size(void);

/* Each file's link anchor: hhc_glue_anchor references them all, so linking
 * the module pulls every object (and the RPC methods its constructors
 * register) out of the static library. */
int hhc_base_linked(void);
int hhc_node_linked(void);
int hhc_rpc_linked(void);
int hhc_model_linked(void);

/* The RPCs that take a bdev name alone (hhc_rpc.c; hhc_model.c uses them
 * too), and the answer of a delete once the bdev is unregistered. */
struct rpc_name {
	char *name;
};
extern const struct spdk_json_object_decoder g_rpc_name_decoders[1];
void rpc_delete_cb(void *cb_arg, int bdeverrno);

#endif /* HHC_GLUE_INTERNAL_H */
