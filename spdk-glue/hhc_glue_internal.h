/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * What the C files of the shim share (not seen by bindgen). The HHC module
 * (libspdk_bdev_hhc.so, and hhc_tgt):
 *   hhc_glue.c   module "hhc", examine, threads, memory, logging, JSON
 *   hhc_base.c   base bdevs: open, claim, I/O, hot-remove, close
 *   hhc_node.c   the HHC bdev: fn table, channels, registration, the data path
 *   hhc_rpc.c    the JSON-RPC methods and their decoders
 * The test-only device-model module (libspdk_bdev_hhc_model.so, which the
 * tests preload; never linked into the HHC module):
 *   hhc_model.c  module "hhc_model": the device-model bdev and its RPCs
 * Linked into both, each its own copy:
 *   hhc_common.c the clock, RPC answers, the name decoder, a delete's answer
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

/* Each file's link anchor: hhc_glue_anchor references those of the HHC
 * module, hhc_model_anchor those of the device-model module, so linking a
 * module pulls every object of it (and the RPC methods its constructors
 * register) out of its static library. */
int hhc_base_linked(void);
int hhc_node_linked(void);
int hhc_rpc_linked(void);
int hhc_common_linked(void);
int hhc_model_anchor(void);

/* The RPCs that take a bdev name alone (hhc_common.c), and the answer of a
 * delete once the bdev is unregistered. */
struct rpc_name {
	char *name;
};
extern const struct spdk_json_object_decoder g_rpc_name_decoders[1];
void rpc_delete_cb(void *cb_arg, int bdeverrno);

#endif /* HHC_GLUE_INTERNAL_H */
