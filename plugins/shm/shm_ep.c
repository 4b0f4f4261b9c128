/* SPDX-License-Identifier: Apache-2.0 */
/* shm plugin: endpoints (which process a peer is, checked to share this
 * kernel) and data movement: memcpy into mapped segments, process_vm_writev
 * (cross-memory attach, CMA) into any other registered memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm.h"

/* Endpoint address, little-endian, 64 bytes: magic u32 "WFSE" | version u32 |
 * pid u32 | uid u32 | pid namespace inode u64 | boot id char[40] (NUL-padded).
 * Same boot id and pid namespace: the pid names the same process here. */
#define SHM_ADDR_MAGIC 0x45534657u
#define SHM_ADDR_VERSION 1
#define SHM_ADDR_BYTES 64
#define SHM_BOOT_ID 40

static void boot_id(char out[SHM_BOOT_ID])
{
	memset(out, 0, SHM_BOOT_ID);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (!f)
		return;
	if (!fgets(out, SHM_BOOT_ID, f))
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	memset(out + strlen(out), 0, SHM_BOOT_ID - strlen(out));
}

static uint64_t pidns_ino(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int shm_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep)
{
	struct shm_ctx *ctx = tc;
	if (!ctx || !peer || !len || !ep)
		return -EINVAL;
	if (peer->peer_class != WEFT_PEER_SAME_PROCESS && peer->peer_class != WEFT_PEER_SAME_HOST)
		return -EHOSTUNREACH;
	if (!addr || *len < SHM_ADDR_BYTES) {
		*len = SHM_ADDR_BYTES;
		return -ENOSPC;
	}
	struct shm_ep *e = shm_core->calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->ctx = ctx;
	e->peer = peer->rank;
	unsigned char *p = addr;
	memset(p, 0, SHM_ADDR_BYTES);
	weft_kit_le_put32(p, SHM_ADDR_MAGIC);
	weft_kit_le_put32(p + 4, SHM_ADDR_VERSION);
	weft_kit_le_put32(p + 8, (uint32_t)ctx->pid);
	weft_kit_le_put32(p + 12, (uint32_t)getuid());
	weft_kit_le_put64(p + 16, pidns_ino());
	boot_id((char *)p + 24);
	ctx->neps++;
	*len = SHM_ADDR_BYTES;
	*ep = e;
	return 0;
}

int shm_connect(void *ep, const void *peer_addr, size_t len)
{
	struct shm_ep *e = ep;
	const unsigned char *p = peer_addr;
	if (!e || (!p && len > 0))
		return -EINVAL;
	if (e->peer_pid) {
		SHM_ERR("connect: the endpoint for rank %d is connected already", e->peer);
		return -EINVAL;
	}
	if (len != SHM_ADDR_BYTES || weft_kit_le_get32(p) != SHM_ADDR_MAGIC || weft_kit_le_get32(p + 4) != SHM_ADDR_VERSION) {
		SHM_ERR("connect: rank %d sent a malformed address (%zu bytes)", e->peer, len);
		return -WEFT_ERR_PROTOCOL;
	}
	uint32_t pid = weft_kit_le_get32(p + 8);
	char mine[SHM_BOOT_ID];
	boot_id(mine);
	if (pid == 0 || pid > 4194304 || p[24 + SHM_BOOT_ID - 1] != '\0') {
		SHM_ERR("connect: rank %d sent a malformed address (pid %u)", e->peer, pid);
		return -WEFT_ERR_PROTOCOL;
	}
	if (memcmp(mine, p + 24, SHM_BOOT_ID) != 0 || weft_kit_le_get64(p + 16) != pidns_ino()) {
		SHM_ERR("connect: rank %d runs under another kernel or pid namespace (boot id %.36s, here %.36s): "
			"shm cannot reach it", e->peer, (const char *)p + 24, mine);
		return -EHOSTUNREACH;
	}
	if (weft_kit_le_get32(p + 12) != (uint32_t)getuid())
		SHM_WARN("connect: rank %d runs as uid %u, this rank as %u: mapping and CMA will likely be refused",
			 e->peer, weft_kit_le_get32(p + 12), (unsigned)getuid());
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
		SHM_ERR("connect: rank %d's process %u is gone", e->peer, pid);
		return -WEFT_ERR_PEER;
	}
	e->peer_pid = (pid_t)pid;
	return 0;
}

int shm_disconnect(void *ep)
{
	struct shm_ep *e = ep;
	if (!e)
		return 0;
	e->ctx->neps--;
	shm_core->free(e);
	return 0;
}

/* Writes len bytes at the peer's address `to` with process_vm_writev, which
 * may write less than asked: loop. */
static int cma_write(struct shm_ep *e, pid_t pid, uint64_t to, const void *from, size_t len)
{
	size_t done = 0;
	while (done < len) {
		struct iovec l = {(char *)from + done, len - done};
		struct iovec r = {(void *)(uintptr_t)(to + done), len - done};
		ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		int err = n < 0 ? errno : EFAULT;
		switch (err) {
		case EPERM:
			SHM_ERR("process_vm_writev to rank %d (pid %d): cross-memory attach is not permitted "
				"(Yama ptrace_scope >= 2, another uid, or no PR_SET_PTRACER; allocate the region "
				"with weft_mem_alloc so it is mapped instead)", e->peer, (int)pid);
			return -EPERM;
		case ESRCH:
			SHM_ERR("process_vm_writev: rank %d's process %d is gone", e->peer, (int)pid);
			return -WEFT_ERR_PEER;
		case EFAULT:
			SHM_ERR("process_vm_writev to rank %d: address 0x%llx+%zu is not mapped in the peer "
				"(region freed before deregistration?)", e->peer, (unsigned long long)(to + done),
				len - done);
			return -WEFT_ERR_PEER;
		case ENOSYS:
			SHM_ERR("process_vm_writev is not available in this kernel");
			return -ENOTSUP;
		default:
			SHM_ERR("process_vm_writev to rank %d: %s", e->peer, strerror(err));
			return -WEFT_ERR_TRANSPORT;
		}
	}
	return 0;
}

static int target_check(const struct shm_ep *e, const struct shm_rmh *r)
{
	if (!e->peer_pid) {
		SHM_ERR("endpoint for rank %d is not connected", e->peer);
		return -EINVAL;
	}
	/* A region must belong to the process this endpoint reaches (for a peer
	 * in this process, this process: mem_import checked it is registered). */
	if (r->pid != e->peer_pid) {
		SHM_ERR("region of process %d used on the endpoint to rank %d (process %d)", (int)r->pid, e->peer,
			(int)e->peer_pid);
		return -EINVAL;
	}
	return 0;
}

int shm_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len)
{
	struct shm_ep *e = ep;
	struct shm_rmh *r = rmh;
	struct shm_mh *m = mh;
	if (!e || !r || !m)
		return -EINVAL;
	if (roff > r->len || len > r->len - roff || loff > m->len || len > m->len - loff) {
		SHM_ERR("put of %zu bytes to rank %d: remote offset %llu (region %llu) or local offset %llu "
			"(region %zu) out of bounds", len, e->peer, (unsigned long long)roff, (unsigned long long)r->len,
			(unsigned long long)loff, m->len);
		return -EINVAL;
	}
	int rc = target_check(e, r);
	if (rc != 0 || len == 0)
		return rc;
	if (r->map) {
		memcpy(r->map + roff, m->base + loff, len);
		e->last = SHM_PATH_MAPPED;
		return 0;
	}
	e->last = SHM_PATH_CMA;
	return cma_write(e, r->pid, r->base + roff, m->base + loff, len);
}

int shm_signal(void *ep, void *rmh, uint64_t roff, uint64_t value)
{
	struct shm_ep *e = ep;
	struct shm_rmh *r = rmh;
	if (!e || !r)
		return -EINVAL;
	if (roff > r->len || r->len - roff < sizeof(uint64_t) || (r->base + roff) % sizeof(uint64_t) != 0) {
		SHM_ERR("signal to rank %d: token at offset %llu of a %llu-byte region is out of bounds or not "
			"8-byte aligned", e->peer, (unsigned long long)roff, (unsigned long long)r->len);
		return -EINVAL;
	}
	int rc = target_check(e, r);
	if (rc != 0)
		return rc;
	if (r->map) {
		/* Earlier puts are this thread's plain stores (memcpy) in program
		 * order before the release store, so a reader that acquires the
		 * token sees them. glibc's memcpy may use non-temporal stores for
		 * large copies, which release does not order on x86; it ends those
		 * with an sfence, and this one makes sure of it. */
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_sfence();
#endif
		__atomic_store_n((uint64_t *)(void *)(r->map + roff), value, __ATOMIC_RELEASE);
		e->last = SHM_PATH_MAPPED;
		return 0;
	}
	/* Each process_vm_writev returns once its bytes are in the peer's pages,
	 * so the data written before is in place first. The kernel copies an
	 * aligned 8-byte span with one 8-byte store on x86-64 (copy_to_user of
	 * a word-aligned word); a reader could otherwise see a torn token. That
	 * is an assumption about the kernel's copy routine, not a guarantee of
	 * the syscall; tokens in segments (the core's semaphore pools come from
	 * mem_alloc) take the mapped path above instead. */
	e->last = SHM_PATH_CMA;
	return cma_write(e, r->pid, r->base + roff, &value, sizeof(value));
}

int shm_flush(void *ep)
{
	/* Every put and signal is complete in the peer's memory when it returns. */
	return ep ? 0 : -EINVAL;
}

int shm_progress(void *tc)
{
	(void)tc;
	return 0;
}

int shm_ep_describe(void *ep, char *buf, size_t len)
{
	struct shm_ep *e = ep;
	if (!e || !buf || len == 0)
		return -EINVAL;
	static const char *const paths[] = {"none", "mapped", "cma"};
	int n = snprintf(buf, len, "shm peer=%d pid=%d path=%s", e->peer, (int)e->peer_pid, paths[e->last]);
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}
