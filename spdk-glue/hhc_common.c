/*   SPDX-License-Identifier: BSD-3-Clause
 *
 * What both SPDK modules of HHC link (the HHC bdev's libspdk_bdev_hhc.so and
 * the test-only device-model bdev's libspdk_bdev_hhc_model.so, each its own
 * copy): the clock, the answers Rust sends to a JSON-RPC request, the
 * decoder of the RPCs that take a bdev name alone, and a delete's answer.
 * No module registers here.
 */

#include "hhc_glue_internal.h"

#include "spdk/env.h"
#include "spdk/json.h"
#include "spdk/jsonrpc.h"
#include "spdk/likely.h"
#include "spdk/string.h"

/* Nanoseconds per tick as a 32.32 fixed-point factor: one multiply per
 * reading instead of the divisions (the data path reads the clock per
 * request). Set on first use; every thread computes the same value. */
static uint64_t g_ns_per_tick_q32;

uint64_t
hhc_glue_now_ns(void)
{
	uint64_t ticks = spdk_get_ticks();

	if (spdk_unlikely(g_ns_per_tick_q32 == 0)) {
		g_ns_per_tick_q32 = (uint64_t)(((unsigned __int128)1000000000ULL << 32) / spdk_get_ticks_hz());
	}
	return (uint64_t)(((unsigned __int128)ticks * g_ns_per_tick_q32) >> 32);
}

void
hhc_glue_rpc_reply_raw(struct hhc_glue_rpc *rpc, const char *text, size_t len)
{
	struct spdk_jsonrpc_request *request = (struct spdk_jsonrpc_request *)rpc;
	struct spdk_json_write_ctx *w = spdk_jsonrpc_begin_result(request);

	spdk_json_write_val_raw(w, text, len);
	spdk_jsonrpc_end_result(request, w);
}

void
hhc_glue_rpc_reply_error(struct hhc_glue_rpc *rpc, int code, const char *message)
{
	spdk_jsonrpc_send_error_response((struct spdk_jsonrpc_request *)rpc, code, message);
}

const struct spdk_json_object_decoder g_rpc_name_decoders[1] = {
	{"name", offsetof(struct rpc_name, name), spdk_json_decode_string},
};

void
rpc_delete_cb(void *cb_arg, int bdeverrno)
{
	struct spdk_jsonrpc_request *request = cb_arg;

	if (bdeverrno == 0) {
		spdk_jsonrpc_send_bool_response(request, true);
	} else {
		spdk_jsonrpc_send_error_response(request, bdeverrno, spdk_strerror(-bdeverrno));
	}
}

int
hhc_common_linked(void)
{
	return 0;
}
