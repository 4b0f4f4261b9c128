/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: pre-multiplied sums (ncclRedOpCreatePreMulSum, ncclRedOpDestroy),
 * kept per communicator as NCCL does; the collectives (coll.c) run them as
 * weft's *_premul calls. */
#include <stdlib.h>
#include <string.h>

#include "wn.h"

/* A refused creation writes WN_OP_REFUSED (see wn.h), never a usable value. */
static ncclResult_t refuse(ncclRedOp_t *op, ncclResult_t r)
{
	if (op)
		*op = WN_OP_REFUSED;
	return r;
}

WN_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
					     ncclScalarResidence_t residence, ncclComm_t comm)
{
	static const char fn[] = "ncclRedOpCreatePreMulSum";
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return refuse(op, r);
	enum weft_datatype wt;
	if (!op || !scalar) {
		WN_ERROR("%s: %s is NULL", fn, !op ? "op" : "scalar");
		return refuse(op, ncclInvalidArgument);
	}
	if (wn_map_type(datatype, &wt) != 0) {
		WN_ERROR("%s: datatype %d is not one of NCCL's", fn, (int)datatype);
		return refuse(op, ncclInvalidArgument);
	}
	if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
		WN_ERROR("%s: scalar residence %d is neither ncclScalarDevice nor ncclScalarHostImmediate", fn,
			 (int)residence);
		return refuse(op, ncclInvalidArgument);
	}
	struct wn_premul p = {.used = 1, .type = datatype, .residence = residence};
	if (residence == ncclScalarHostImmediate)
		memcpy(p.host, scalar, weft_datatype_size(wt));
	else
		p.dev = scalar;
	pthread_mutex_lock(&comm->op_lock);
	int i = 0;
	while (i < comm->npremul && comm->premul[i].used)
		i++;
	if (i == comm->npremul) {
		/* ncclNumOps + i must stay below ncclMaxRedOp (WN_OP_REFUSED). */
		struct wn_premul *n = i < ncclMaxRedOp - ncclNumOps - 1
					      ? realloc(comm->premul, (size_t)(i + 1) * sizeof(*n))
					      : NULL;
		if (!n) {
			pthread_mutex_unlock(&comm->op_lock);
			WN_ERROR("%s: out of memory for operation %d", fn, i);
			return refuse(op, ncclSystemError);
		}
		comm->premul = n;
		comm->npremul = i + 1;
	}
	comm->premul[i] = p;
	pthread_mutex_unlock(&comm->op_lock);
	*op = (ncclRedOp_t)(ncclNumOps + i);
	return ncclSuccess;
}
WN_ALIAS(ncclRedOpCreatePreMulSum);

int wn_premul_get(struct ncclComm *comm, ncclRedOp_t op, struct wn_premul *out)
{
	int i = (int)op - ncclNumOps, ok = 0;
	if (i < 0)
		return 0;
	pthread_mutex_lock(&comm->op_lock);
	if (i < comm->npremul && comm->premul[i].used) {
		*out = comm->premul[i];
		ok = 1;
	}
	pthread_mutex_unlock(&comm->op_lock);
	return ok;
}

WN_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
	static const char fn[] = "ncclRedOpDestroy";
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	int i = (int)op - ncclNumOps;
	pthread_mutex_lock(&comm->op_lock);
	int ok = i >= 0 && i < comm->npremul && comm->premul[i].used;
	if (ok)
		memset(&comm->premul[i], 0, sizeof(comm->premul[i]));
	pthread_mutex_unlock(&comm->op_lock);
	if (!ok) {
		WN_ERROR("%s: operation %d was not made by ncclRedOpCreatePreMulSum on this comm, or was destroyed", fn,
			 (int)op);
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}
WN_ALIAS(ncclRedOpDestroy);
