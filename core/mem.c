/* SPDX-License-Identifier: Apache-2.0 */
/* Registered memory: registration with every transport of a communicator, the
 * portable blob (a versioned header, then one section per transport), its
 * strict validation on import, and the exchange of blobs over the bootstrap. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "fault.h"
#include "le.h"
#include "log.h"
#include "mem.h"
#include "progress.h"
#include "handles.h"

/* Blob layout, little-endian, no padding:
 *   header  magic u32 "WFTM" | version u16 | mem type u16 | base u64 | length u64 |
 *           section count u32 | reserved u32 (0)                      = 32 bytes
 *   section name char[32] (NUL-padded) | section length u32 | reserved u32 (0) |
 *           that many bytes from the transport's mem_serialize       = 40 + n bytes */
#define BLOB_MAGIC 0x4d544657u /* "WFTM" */
#define BLOB_VERSION 1
#define BLOB_HDR 32
#define SEC_HDR (WEFT__TP_NAME_MAX + 8)
#define BLOB_MAX_SECTIONS 64
#define BLOB_MAX_SECTION (1u << 20)
#define BLOB_MAX (16u << 20) /* what mem_exchange accepts from a peer */

/* ----------------------------------------------------------- registration */
void weft__mem_free(weft_mem_t *mem)
{
	weft_comm_t *comm = mem->comm;
	for (int i = comm->ntp - 1; i >= 0; i--) {
		if (!mem->mh[i])
			continue;
		struct weft__tp *tp = &comm->tp[i];
		pthread_mutex_lock(&tp->lock);
		int rc = WEFT__TP_CALL(tp, mem_deregister, tp->tc, mem->mh[i]);
		pthread_mutex_unlock(&tp->lock);
		if (rc != 0 && rc != -ENOSYS)
			WEFT_WARN("transport %s: deregistering %p failed: %s", tp->name, mem->ptr, weft_strerror(rc));
	}
	free(mem->mh);
	free(mem);
}

int weft__mem_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, int internal,
		       weft_mem_t **out)
{
	weft_mem_t *mem = weft__fault_should_fail(WEFT_FAULT_ALLOC) ? NULL : calloc(1, sizeof(*mem));
	if (!mem)
		return -ENOMEM;
	mem->mh = calloc(comm->ntp > 0 ? (size_t)comm->ntp : 1, sizeof(*mem->mh));
	if (!mem->mh) {
		free(mem);
		return -ENOMEM;
	}
	mem->comm = comm;
	mem->ptr = ptr;
	mem->len = len;
	mem->type = type;
	mem->internal = internal;
	weft__list_init(&mem->link);

	int rc = 0, nreg = 0;
	/* A zero-length region needs no transport: nothing can be written to it. */
	for (int i = 0; len > 0 && i < comm->ntp; i++) {
		struct weft__tp *tp = &comm->tp[i];
		void *mh = NULL;
		pthread_mutex_lock(&tp->lock);
		rc = weft__fault_should_fail(WEFT_FAULT_REGISTER) ? weft__fault_error(WEFT_FAULT_REGISTER)
								  : WEFT__TP_CALL(tp, mem_register, tp->tc, ptr, len, type, &mh);
		pthread_mutex_unlock(&tp->lock);
		if (rc == -ENOTSUP || rc == -ENOSYS) {
			WEFT_DEBUG("transport %s does not reach memory type %d; skipped", tp->name, (int)type);
			rc = 0;
			continue;
		}
		if (rc != 0) {
			WEFT_ERROR("transport %s: registering %zu bytes at %p failed: %s", tp->name, len, ptr,
				   weft_strerror(rc));
			goto err_deregister;
		}
		mem->mh[i] = mh;
		nreg++;
	}
	if (len > 0 && nreg == 0) {
		WEFT_ERROR("no open transport of this communicator reaches memory type %d (%d transports open)",
			   (int)type, comm->ntp);
		rc = -ENOTSUP;
		goto err_deregister;
	}
	if (!internal) {
		pthread_mutex_lock(&comm->lock);
		rc = weft__idtab_add(&comm->mem_ids, mem, &mem->id);
		if (rc == 0)
			weft__list_push(&comm->mems, &mem->link);
		pthread_mutex_unlock(&comm->lock);
		if (rc != 0)
			goto err_deregister;
	}
	*out = mem;
	return 0;

err_deregister:
	weft__mem_free(mem);
	return rc;
}

int weft__mem_register_user(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type,
			       weft_mem_t **mem)
{
	if (!comm || !mem) {
		WEFT_ERROR("weft_mem_register: NULL %s", comm ? "mem out-pointer" : "comm");
		return -EINVAL;
	}
	if (!ptr && len > 0) {
		WEFT_ERROR("weft_mem_register: NULL pointer with length %zu", len);
		return -EINVAL;
	}
	if ((int)type < 0 || type >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("weft_mem_register: unknown memory type %d", (int)type);
		return -EINVAL;
	}
	return weft__mem_register(comm, ptr, len, type, 0, mem);
}

WEFT_API int weft_mem_deregister(weft_mem_t *mem)
{
	if (!mem)
		return 0;
	weft_comm_t *comm = mem->comm;
	if (!mem->internal) {
		pthread_mutex_lock(&comm->lock);
		weft__list_del(&mem->link);
		weft__idtab_del(&comm->mem_ids, mem->id);
		pthread_mutex_unlock(&comm->lock);
	}
	weft__mem_free(mem);
	return 0;
}

/* ------------------------------------------------------------ serializing */
/* Size of one transport's section, asked the way the ABI says: buf NULL. */
static int section_size(struct weft__tp *tp, void *mh, size_t *n)
{
	size_t need = 0;
	pthread_mutex_lock(&tp->lock);
	int rc = WEFT__TP_CALL(tp, mem_serialize, tp->tc, mh, NULL, &need);
	pthread_mutex_unlock(&tp->lock);
	if (rc != 0 && rc != -ENOSPC) {
		WEFT_ERROR("transport %s: mem_serialize failed: %s", tp->name, weft_strerror(rc));
		return rc;
	}
	if (need > BLOB_MAX_SECTION) {
		WEFT_ERROR("transport %s: mem_serialize wants %zu bytes (limit %u)", tp->name, need,
			   BLOB_MAX_SECTION);
		return -WEFT_ERR_TRANSPORT;
	}
	*n = need;
	return 0;
}

WEFT_API int weft_mem_serialize(const weft_mem_t *mem, void *buf, size_t *len)
{
	if (!mem || !len) {
		WEFT_ERROR("weft_mem_serialize: NULL %s", mem ? "len" : "mem");
		return -EINVAL;
	}
	weft_comm_t *comm = mem->comm;
	size_t need = BLOB_HDR;
	uint32_t nsec = 0;
	for (int i = 0; i < comm->ntp; i++) {
		if (!mem->mh[i])
			continue;
		size_t n;
		int rc = section_size(&comm->tp[i], mem->mh[i], &n);
		if (rc != 0)
			return rc;
		need += SEC_HDR + n;
		nsec++;
	}
	if (!buf) {
		*len = need;
		return 0;
	}
	if (*len < need) {
		*len = need;
		return -ENOSPC;
	}
	unsigned char *p = buf;
	put32(p, BLOB_MAGIC);
	put16(p + 4, BLOB_VERSION);
	put16(p + 6, (uint16_t)mem->type);
	put64(p + 8, (uint64_t)(uintptr_t)mem->ptr);
	put64(p + 16, (uint64_t)mem->len);
	put32(p + 24, nsec);
	put32(p + 28, 0);
	size_t off = BLOB_HDR;
	for (int i = 0; i < comm->ntp; i++) {
		if (!mem->mh[i])
			continue;
		struct weft__tp *tp = &comm->tp[i];
		unsigned char *s = p + off;
		memset(s, 0, WEFT__TP_NAME_MAX);
		memcpy(s, tp->name, strlen(tp->name));
		size_t n = need - off - SEC_HDR;
		pthread_mutex_lock(&tp->lock);
		int rc = WEFT__TP_CALL(tp, mem_serialize, tp->tc, mem->mh[i], s + SEC_HDR, &n);
		pthread_mutex_unlock(&tp->lock);
		if (rc != 0) {
			/* The size changed between the two calls: a transport bug. */
			WEFT_ERROR("transport %s: mem_serialize failed: %s", tp->name, weft_strerror(rc));
			return rc == -ENOSPC ? -WEFT_ERR_TRANSPORT : rc;
		}
		put32(s + WEFT__TP_NAME_MAX, (uint32_t)n);
		put32(s + WEFT__TP_NAME_MAX + 4, 0);
		off += SEC_HDR + n;
	}
	*len = off;
	return 0;
}

int weft__mem_blob(const weft_mem_t *mem, void **blob, size_t *len)
{
	size_t n = 0;
	int rc = weft_mem_serialize(mem, NULL, &n);
	if (rc != 0)
		return rc;
	void *b = malloc(n);
	if (!b)
		return -ENOMEM;
	rc = weft_mem_serialize(mem, b, &n);
	if (rc != 0) {
		free(b);
		return rc;
	}
	*blob = b;
	*len = n;
	return 0;
}

/* -------------------------------------------------------------- importing */
void weft__rmem_free(weft_rmem_t *rmem)
{
	weft_comm_t *comm = rmem->comm;
	for (int i = comm->ntp - 1; i >= 0; i--) {
		if (!rmem->rmh[i])
			continue;
		struct weft__tp *tp = &comm->tp[i];
		pthread_mutex_lock(&tp->lock);
		int rc = WEFT__TP_CALL(tp, mem_release, tp->tc, rmem->rmh[i]);
		pthread_mutex_unlock(&tp->lock);
		if (rc != 0 && rc != -ENOSYS)
			WEFT_WARN("transport %s: releasing a region of rank %d failed: %s", tp->name, rmem->peer,
				  weft_strerror(rc));
	}
	free(rmem->rmh);
	free(rmem);
}

#define BAD_BLOB(...) \
	do { \
		WEFT_ERROR("weft_mem_import: blob from rank %d: " __VA_ARGS__); \
		rc = -WEFT_ERR_PROTOCOL; \
		goto err_release; \
	} while (0)

int weft__mem_import(weft_comm_t *comm, int peer, const void *buf, size_t len, int internal, weft_rmem_t **out)
{
	const unsigned char *p = buf;
	int rc = 0;
	weft_rmem_t *rmem = weft__fault_should_fail(WEFT_FAULT_ALLOC) ? NULL : calloc(1, sizeof(*rmem));
	if (!rmem)
		return -ENOMEM;
	rmem->rmh = calloc(comm->ntp > 0 ? (size_t)comm->ntp : 1, sizeof(*rmem->rmh));
	if (!rmem->rmh) {
		free(rmem);
		return -ENOMEM;
	}
	rmem->comm = comm;
	rmem->peer = peer;
	rmem->internal = internal;
	weft__list_init(&rmem->link);
	unsigned char *seen = calloc(comm->ntp > 0 ? (size_t)comm->ntp : 1, 1);
	if (!seen) {
		rc = -ENOMEM;
		goto err_release;
	}

	if (len < BLOB_HDR)
		BAD_BLOB("truncated: %zu bytes, the header alone needs %d", peer, len, BLOB_HDR);
	if (get32(p) != BLOB_MAGIC)
		BAD_BLOB("bad magic 0x%08x (not a weft memory blob)", peer, get32(p));
	if (get16(p + 4) != BLOB_VERSION)
		BAD_BLOB("unknown version %u (this core reads version %d)", peer, get16(p + 4), BLOB_VERSION);
	uint16_t type = get16(p + 6);
	if (type >= WEFT_MEM_TYPE_COUNT)
		BAD_BLOB("unknown memory type %u", peer, type);
	rmem->type = (enum weft_mem_type)type;
	rmem->base = get64(p + 8);
	rmem->len = get64(p + 16);
	uint32_t nsec = get32(p + 24);
	if (get32(p + 28) != 0)
		BAD_BLOB("reserved header field is 0x%x, not 0", peer, get32(p + 28));
	if (nsec > BLOB_MAX_SECTIONS)
		BAD_BLOB("section count %u exceeds the limit of %d", peer, nsec, BLOB_MAX_SECTIONS);

	size_t off = BLOB_HDR;
	for (uint32_t s = 0; s < nsec; s++) {
		if (len - off < SEC_HDR)
			BAD_BLOB("truncated: section %u header at byte %zu runs past the end (%zu bytes)", peer, s,
				 off, len);
		const unsigned char *sec = p + off;
		char name[WEFT__TP_NAME_MAX];
		memcpy(name, sec, WEFT__TP_NAME_MAX);
		if (memchr(name, '\0', WEFT__TP_NAME_MAX) == NULL || name[0] == '\0')
			BAD_BLOB("section %u has an empty or unterminated transport name", peer, s);
		uint32_t n = get32(sec + WEFT__TP_NAME_MAX);
		if (get32(sec + WEFT__TP_NAME_MAX + 4) != 0)
			BAD_BLOB("section %u (%s): reserved field is not 0", peer, s, name);
		if (n > len - off - SEC_HDR)
			BAD_BLOB("section %u (%s): length %u runs past the end of the %zu-byte blob", peer, s, name,
				 n, len);
		int i = weft__comm_tp_index(comm, name);
		if (i < 0) {
			/* The peer has a transport we did not open: not an error, only unusable. */
			WEFT_DEBUG("weft_mem_import: skipping section '%s' from rank %d (transport not open here)",
				   name, peer);
		} else if (seen[i]) {
			BAD_BLOB("transport '%s' has two sections", peer, name);
		} else {
			seen[i] = 1;
			struct weft__tp *tp = &comm->tp[i];
			void *rmh = NULL;
			pthread_mutex_lock(&tp->lock);
			rc = WEFT__TP_CALL(tp, mem_import, tp->tc, peer, sec + SEC_HDR, n, &rmh);
			pthread_mutex_unlock(&tp->lock);
			if (rc == -EHOSTUNREACH) {
				/* Addresses that mean nothing here (a same-process transport
				 * and a peer in another process): this transport cannot
				 * write there, the others may. */
				WEFT_DEBUG("weft_mem_import: transport %s cannot reach the region of rank %d",
					   tp->name, peer);
				rc = 0;
				rmh = NULL;
			} else if (rc == -EEXIST) {
				/* Mapped here already by other means (the transport said
				 * how): the caller may release its mappings and retry. */
				WEFT_DEBUG("transport %s: the region of rank %d is mapped in this process already", tp->name,
					   peer);
				goto err_release;
			} else if (rc != 0) {
				WEFT_ERROR("transport %s: importing the region of rank %d failed: %s", tp->name, peer,
					   weft_strerror(rc));
				goto err_release;
			}
			rmem->rmh[i] = rmh;
		}
		off += SEC_HDR + n;
	}
	if (off != len)
		BAD_BLOB("%zu trailing bytes after the last section", peer, len - off);

	if (!internal) {
		pthread_mutex_lock(&comm->lock);
		rc = weft__idtab_add(&comm->rmem_ids, rmem, &rmem->id);
		if (rc == 0)
			weft__list_push(&comm->rmems, &rmem->link);
		pthread_mutex_unlock(&comm->lock);
		if (rc != 0)
			goto err_release;
	}
	free(seen);
	*out = rmem;
	return 0;

err_release:
	free(seen);
	weft__rmem_free(rmem);
	return rc;
}

int weft__mem_import_user(weft_comm_t *comm, int peer, const void *buf, size_t len, weft_rmem_t **rmem)
{
	if (!comm || !rmem || (!buf && len > 0)) {
		WEFT_ERROR("weft_mem_import: NULL argument");
		return -EINVAL;
	}
	if (peer < 0 || peer >= comm->nranks) {
		WEFT_ERROR("weft_mem_import: peer %d out of range (size %d)", peer, comm->nranks);
		return -EINVAL;
	}
	return weft__mem_import(comm, peer, buf ? buf : "", len, 0, rmem);
}

WEFT_API int weft_rmem_release(weft_rmem_t *rmem)
{
	if (!rmem)
		return 0;
	weft_comm_t *comm = rmem->comm;
	if (!rmem->internal) {
		pthread_mutex_lock(&comm->lock);
		weft__list_del(&rmem->link);
		weft__idtab_del(&comm->rmem_ids, rmem->id);
		pthread_mutex_unlock(&comm->lock);
	}
	weft__rmem_free(rmem);
	return 0;
}

static int mem_exchange(weft_mem_t *mem, int peer, weft_rmem_t **rmem);

WEFT_API int weft_mem_exchange(weft_mem_t *mem, int peer, weft_rmem_t **rmem)
{
	if (!mem || !rmem) {
		WEFT_ERROR("weft_mem_exchange: NULL argument");
		return -EINVAL;
	}
	int rc = weft__progress_hold(mem->comm);
	if (rc != 0)
		return rc;
	rc = mem_exchange(mem, peer, rmem);
	weft__progress_release(mem->comm);
	return rc;
}

static int mem_exchange(weft_mem_t *mem, int peer, weft_rmem_t **rmem)
{
	if (!mem || !rmem) {
		WEFT_ERROR("weft_mem_exchange: NULL argument");
		return -EINVAL;
	}
	weft_comm_t *comm = mem->comm;
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank) {
		WEFT_ERROR("weft_mem_exchange: peer %d is not another rank (size %d)", peer, comm->nranks);
		return -EINVAL;
	}
	void *blob = NULL;
	size_t blen = 0;
	int rc = weft__mem_blob(mem, &blob, &blen);
	if (rc != 0)
		return rc;
	/* Length first, so the receiver can size its buffer and refuse absurd ones. */
	uint64_t mylen = blen, plen = 0;
	rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_MEM, &mylen, sizeof(mylen));
	if (rc == 0)
		rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_MEM, blob, blen);
	free(blob);
	if (rc == 0)
		rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_MEM, &plen, sizeof(plen));
	if (rc != 0)
		return rc;
	if (plen > BLOB_MAX) {
		WEFT_ERROR("weft_mem_exchange: rank %d announces a %llu-byte blob (limit %u)", peer,
			   (unsigned long long)plen, BLOB_MAX);
		return -WEFT_ERR_PROTOCOL;
	}
	void *pblob = malloc(plen ? (size_t)plen : 1);
	if (!pblob)
		return -ENOMEM;
	rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_MEM, pblob, (size_t)plen);
	if (rc == 0)
		rc = weft__mem_import(comm, peer, pblob, (size_t)plen, 0, rmem);
	free(pblob);
	return rc;
}

/* ------------------------------------------------------------- teardown */
void weft__mem_destroy_all(weft_comm_t *comm)
{
	while (!weft__list_empty(&comm->rmems))
		weft_rmem_release(weft__container_of(comm->rmems.prev, weft_rmem_t, link));
	while (!weft__list_empty(&comm->mems))
		weft_mem_deregister(weft__container_of(comm->mems.prev, weft_mem_t, link));
}

/* ---------------------------------------------------------- bounds checks */
int weft__put_check(const weft_conn_t *conn, const weft_rmem_t *dst, uint64_t dst_off, const weft_mem_t *src,
		    uint64_t src_off, size_t len)
{
	if (dst->comm != conn->comm || src->comm != conn->comm) {
		WEFT_ERROR("put: memory handles belong to another communicator");
		return -EINVAL;
	}
	if (dst->peer != conn->peer) {
		WEFT_ERROR("put: destination region belongs to rank %d but the connection goes to rank %d",
			   dst->peer, conn->peer);
		return -EINVAL;
	}
	/* Subtractions, so that huge offsets cannot wrap around the checks. */
	if (dst_off > dst->len || len > dst->len - dst_off) {
		WEFT_ERROR("put: destination [%llu, +%zu) exceeds the remote region of %llu bytes",
			   (unsigned long long)dst_off, len, (unsigned long long)dst->len);
		return -EINVAL;
	}
	if (src_off > src->len || len > src->len - src_off) {
		WEFT_ERROR("put: source [%llu, +%zu) exceeds the local region of %zu bytes",
			   (unsigned long long)src_off, len, src->len);
		return -EINVAL;
	}
	/* A staged connection carries what its transport did not register. */
	if (len > 0 && !conn->stage && (!dst->rmh[conn->tpi] || !src->mh[conn->tpi])) {
		WEFT_ERROR("put: the %s region is not registered with transport %s",
			   !dst->rmh[conn->tpi] ? "remote" : "local", conn->tp->name);
		return -ENOTSUP;
	}
	return 0;
}
