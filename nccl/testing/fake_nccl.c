/* A stand-in for a real libnccl.so.2, for tests of WEFT_NCCL_FALLBACK on
 * machines without NCCL: it records what it was asked and answers in ways a
 * test can recognize (never a real collective). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

#define FAKE_API __attribute__((visibility("default")))

/* What a fake window and a fake comm hold: enough to prove that the shadow
 * communicator was made from rank 0's id, on the right rank. */
struct ncclComm {
	ncclUniqueId id;
	int rank, nranks;
};
struct ncclWindow_vidmem {
	struct ncclComm comm;
	void *buff;
	size_t size;
};

FAKE_API ncclResult_t ncclGetVersion(int *v)
{
	*v = 22899; /* recognizably not weft's 22809 */
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->internal, sizeof(id->internal), "FAKE-NCCL-ID pid %d", (int)getpid());
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	if (strncmp(id.internal, "FAKE-NCCL-ID", 12) != 0)
		return ncclInvalidArgument;
	struct ncclComm *c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->id = id;
	c->rank = rank;
	c->nranks = nranks;
	*comm = c;
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	free(comm);
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	free(comm);
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
					     int flags)
{
	struct ncclWindow_vidmem *w = calloc(1, sizeof(*w));
	if (!w)
		return ncclSystemError;
	w->comm = *comm;
	w->buff = buff;
	w->size = size;
	*win = w;
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	if (!win || win->comm.rank != comm->rank)
		return ncclInvalidArgument;
	free(win);
	return ncclSuccess;
}

/* Writes op * 1000 + rank into every int32 of recvbuff: what the test
 * expects back from a forwarded call. */
FAKE_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t type,
				    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	if (type != ncclInt32)
		return ncclInvalidArgument;
	for (size_t i = 0; i < count; i++)
		((int32_t *)recvbuff)[i] = (int32_t)op * 1000 + comm->rank;
	return ncclSuccess;
}
