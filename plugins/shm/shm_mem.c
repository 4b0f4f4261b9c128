/* SPDX-License-Identifier: Apache-2.0 */
/* shm plugin: shared-memory segments (memfd, allocated by mem_alloc), local
 * registrations, and the plugin's versioned section of a memory blob: how a
 * peer on this host maps the region, or at least writes it with CMA. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

/* Segments are process-wide (any context of this process may register memory
 * inside one), so their list is the plugin's only global state besides the
 * core table. */
struct shm_seg {
	struct shm_seg *next;
	uint64_t id;
	int fd;
	char *base;
	size_t len;
};

static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_seg *segs;

#define SEG_NAME_FMT "weft-shm-%016" PRIx64

/* Blob section, little-endian, 64 bytes:
 *   magic u32 "WFSH" | version u32 | flags u32 (SHM_BLOB_SEG) | pid u32 |
 *   base u64 | len u64 | segment id u64 | segment fd u32 | zero u32 |
 *   segment length u64 | region offset in the segment u64
 * The segment fields are zero for a region outside any segment. */
#define SHM_BLOB_MAGIC 0x48534657u
#define SHM_BLOB_VERSION 1
#define SHM_BLOB_BYTES 64
#define SHM_BLOB_SEG 0x1u
#define SHM_PID_MAX 4194304 /* the kernel's PID_MAX_LIMIT on 64-bit */

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (n + pg - 1) / pg * pg;
}

int shm_mem_alloc(void *tc, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr)
{
	if (!tc || !host_ptr || !dev_ptr || bytes == 0)
		return -EINVAL;
	if (type != WEFT_MEM_HOST)
		return -ENOTSUP;
	size_t len = page_round(bytes);
	if (len < bytes)
		return -ENOMEM;
	struct shm_seg *s = shm_core->calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	while (s->id == 0)
		if (getrandom(&s->id, sizeof(s->id), 0) != (ssize_t)sizeof(s->id))
			s->id = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)s;
	char name[64];
	snprintf(name, sizeof(name), SEG_NAME_FMT, s->id);
	/* memfd: no name in any file system, so nothing outlives a crash; peers
	 * reach it through /proc/<pid>/fd (see shm_mem_import). */
	int rc;
	s->fd = memfd_create(name, MFD_CLOEXEC);
	if (s->fd < 0) {
		rc = -errno;
		SHM_ERR("memfd_create: %s", strerror(errno));
		goto err_free;
	}
	if (ftruncate(s->fd, (off_t)len) != 0) {
		rc = -errno;
		SHM_ERR("ftruncate of a %zu-byte segment: %s", len, strerror(errno));
		goto err_close;
	}
	/* MAP_POPULATE: the page faults happen here, not in the first calls
	 * that use the memory (scratch areas are touched by peers at once). */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		SHM_ERR("mmap of a %zu-byte segment: %s", len, strerror(errno));
		goto err_close;
	}
	s->base = p;
	s->len = len;
	pthread_mutex_lock(&seg_lock);
	s->next = segs;
	segs = s;
	pthread_mutex_unlock(&seg_lock);
	*host_ptr = p;
	*dev_ptr = p;
	return 0;

err_close:
	close(s->fd);
err_free:
	shm_core->free(s);
	return rc == -ENOSPC || rc == -EFBIG ? -ENOMEM : rc;
}

int shm_mem_free(void *tc, void *host_ptr, void *dev_ptr)
{
	const void *p = host_ptr ? host_ptr : dev_ptr;
	if (!p)
		return 0;
	struct shm_seg *s = NULL;
	pthread_mutex_lock(&seg_lock);
	for (struct shm_seg **pp = &segs; *pp; pp = &(*pp)->next)
		if ((*pp)->base == p) {
			s = *pp;
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&seg_lock);
	if (!s)
		return -ENOENT;
	munmap(s->base, s->len);
	close(s->fd);
	shm_core->free(s);
	return 0;
}

int shm_mem_query(void *tc, const void *ptr, enum weft_mem_type *type)
{
	if (!ptr || !type)
		return -EINVAL;
	int found = 0;
	pthread_mutex_lock(&seg_lock);
	for (struct shm_seg *s = segs; s; s = s->next)
		if ((const char *)ptr >= s->base && (const char *)ptr < s->base + s->len)
			found = 1;
	pthread_mutex_unlock(&seg_lock);
	if (!found)
		return -ENOENT;
	*type = WEFT_MEM_HOST;
	return 0;
}

/* Every region registered in this process, by any context: a blob that says
 * it comes from this process must name one of them, or a peer could make this
 * rank write wherever it likes in its own memory. */
static pthread_mutex_t regs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shm_mh *regs;

static int region_is_local(uint64_t base, uint64_t len)
{
	int found = 0;
	pthread_mutex_lock(&regs_lock);
	for (struct shm_mh *m = regs; m && !found; m = m->next)
		found = base >= (uintptr_t)m->base && base - (uintptr_t)m->base <= m->len &&
			len <= m->len - (base - (uintptr_t)m->base);
	pthread_mutex_unlock(&regs_lock);
	return found;
}

int shm_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	struct shm_ctx *ctx = tc;
	if (!ctx || !mh || !ptr || len == 0 || (uintptr_t)ptr + len < (uintptr_t)ptr)
		return -EINVAL;
	if (type != WEFT_MEM_HOST) {
		SHM_DBG("mem_register: memory type %d is not supported (host memory only)", (int)type);
		return -ENOTSUP;
	}
	struct shm_mh *m = shm_core->calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base = ptr;
	m->len = len;
	m->seg_fd = -1;
	pthread_mutex_lock(&seg_lock);
	for (struct shm_seg *s = segs; s; s = s->next) {
		if (m->base >= s->base && m->base - s->base <= (ptrdiff_t)s->len &&
		    len <= s->len - (size_t)(m->base - s->base)) {
			m->seg_id = s->id;
			m->seg_fd = s->fd;
			m->seg_len = s->len;
			m->seg_off = (size_t)(m->base - s->base);
			break;
		}
	}
	pthread_mutex_unlock(&seg_lock);
	pthread_mutex_lock(&regs_lock);
	m->next = regs;
	regs = m;
	pthread_mutex_unlock(&regs_lock);
	ctx->nregions++;
	*mh = m;
	return 0;
}

int shm_mem_deregister(void *tc, void *mh)
{
	struct shm_ctx *ctx = tc;
	if (!mh)
		return 0;
	if (ctx)
		ctx->nregions--;
	pthread_mutex_lock(&regs_lock);
	for (struct shm_mh **pp = &regs; *pp; pp = &(*pp)->next)
		if (*pp == mh) {
			*pp = ((struct shm_mh *)mh)->next;
			break;
		}
	pthread_mutex_unlock(&regs_lock);
	shm_core->free(mh);
	return 0;
}

int shm_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	struct shm_ctx *ctx = tc;
	struct shm_mh *m = mh;
	if (!ctx || !m || !len)
		return -EINVAL;
	if (!buf || *len < SHM_BLOB_BYTES) {
		*len = SHM_BLOB_BYTES;
		return -ENOSPC;
	}
	unsigned char *p = buf;
	memset(p, 0, SHM_BLOB_BYTES);
	weft_kit_le_put32(p, SHM_BLOB_MAGIC);
	weft_kit_le_put32(p + 4, SHM_BLOB_VERSION);
	weft_kit_le_put32(p + 8, m->seg_id ? SHM_BLOB_SEG : 0);
	weft_kit_le_put32(p + 12, (uint32_t)ctx->pid);
	weft_kit_le_put64(p + 16, (uint64_t)(uintptr_t)m->base);
	weft_kit_le_put64(p + 24, (uint64_t)m->len);
	if (m->seg_id) {
		weft_kit_le_put64(p + 32, m->seg_id);
		weft_kit_le_put32(p + 40, (uint32_t)m->seg_fd);
		weft_kit_le_put64(p + 48, (uint64_t)m->seg_len);
		weft_kit_le_put64(p + 56, (uint64_t)m->seg_off);
	}
	*len = SHM_BLOB_BYTES;
	return 0;
}

/* Opens the peer's segment through /proc/<pid>/fd/<fd>. That needs the same
 * access as reading the peer's memory maps (same uid, PTRACE_MODE_READ; Yama
 * does not restrict it), and no cooperation from the peer, which may be busy
 * elsewhere. The link's name proves the descriptor still is the segment the
 * blob describes (a closed and reused fd number is refused). Returns the
 * mapping or NULL with the reason logged at INFO (the caller falls back). */
static void *map_segment(pid_t pid, uint32_t fd, uint64_t id, uint64_t seg_len)
{
	char path[64], link[128], want[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%u", (int)pid, fd);
	snprintf(want, sizeof(want), "/memfd:" SEG_NAME_FMT, id);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0) {
		SHM_INFO("cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	link[n] = '\0';
	if (strncmp(link, want, strlen(want)) != 0) {
		SHM_INFO("%s is '%s', not the segment %s", path, link, want + 7);
		return NULL;
	}
	int sfd = open(path, O_RDWR | O_CLOEXEC);
	if (sfd < 0) {
		SHM_INFO("cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	void *p = NULL;
	if (fstat(sfd, &st) != 0 || (uint64_t)st.st_size != seg_len) {
		SHM_INFO("segment %s has %lld bytes, the blob says %llu", path, (long long)st.st_size,
			 (unsigned long long)seg_len);
	} else {
		p = mmap(NULL, (size_t)seg_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, sfd, 0);
		if (p == MAP_FAILED) {
			SHM_INFO("mmap of %s: %s", path, strerror(errno));
			p = NULL;
		}
	}
	close(sfd);
	return p;
}

#define BAD(...)                                                                    \
	do {                                                                        \
		char why_[192];                                                     \
		snprintf(why_, sizeof(why_), __VA_ARGS__);                          \
		SHM_ERR("mem_import from rank %d: malformed blob: %s", peer, why_); \
		return -WEFT_ERR_PROTOCOL;                                          \
	} while (0)

int shm_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	struct shm_ctx *ctx = tc;
	const unsigned char *p = buf;
	if (!ctx || !rmh || (!buf && len > 0))
		return -EINVAL;
	if (len != SHM_BLOB_BYTES)
		BAD("%zu bytes, expected %d", len, SHM_BLOB_BYTES);
	if (weft_kit_le_get32(p) != SHM_BLOB_MAGIC)
		BAD("magic 0x%08x, expected 0x%08x", weft_kit_le_get32(p), SHM_BLOB_MAGIC);
	if (weft_kit_le_get32(p + 4) != SHM_BLOB_VERSION)
		BAD("version %u, this plugin reads version %d", weft_kit_le_get32(p + 4), SHM_BLOB_VERSION);
	uint32_t flags = weft_kit_le_get32(p + 8), pid = weft_kit_le_get32(p + 12);
	uint64_t base = weft_kit_le_get64(p + 16), rlen = weft_kit_le_get64(p + 24);
	uint64_t seg_id = weft_kit_le_get64(p + 32), seg_len = weft_kit_le_get64(p + 48), seg_off = weft_kit_le_get64(p + 56);
	uint32_t seg_fd = weft_kit_le_get32(p + 40);
	if (flags & ~SHM_BLOB_SEG)
		BAD("unknown flags 0x%x", flags);
	if (pid == 0 || pid > SHM_PID_MAX)
		BAD("process id %u is out of range 1..%d", pid, SHM_PID_MAX);
	if (base == 0 || rlen == 0)
		BAD("region 0x%llx+%llu is empty or at address 0", (unsigned long long)base, (unsigned long long)rlen);
	if (base + rlen < base || base + rlen > ((uint64_t)1 << 57))
		BAD("region 0x%llx+%llu is outside any user address space", (unsigned long long)base,
		    (unsigned long long)rlen);
	if (weft_kit_le_get32(p + 44) != 0)
		BAD("reserved field is 0x%x, expected 0", weft_kit_le_get32(p + 44));
	if (flags & SHM_BLOB_SEG) {
		if (seg_id == 0)
			BAD("segment id 0");
		if (seg_fd > INT_MAX)
			BAD("segment fd %u is no descriptor", seg_fd);
		if (seg_len == 0 || seg_len % (uint64_t)sysconf(_SC_PAGESIZE) != 0 || seg_len > ((uint64_t)1 << 47))
			BAD("segment length %llu is not a page multiple", (unsigned long long)seg_len);
		if (seg_off > seg_len || rlen > seg_len - seg_off)
			BAD("region %llu+%llu lies outside its %llu-byte segment", (unsigned long long)seg_off,
			    (unsigned long long)rlen, (unsigned long long)seg_len);
		if (seg_off > base)
			BAD("segment offset %llu exceeds the region's address", (unsigned long long)seg_off);
	} else if (seg_id || seg_fd || seg_len || seg_off) {
		BAD("segment fields set on a region outside any segment");
	}
	if ((pid_t)pid == ctx->pid && !region_is_local(base, rlen))
		BAD("region 0x%llx+%llu claims this process (%u) but no rank here registered it",
		    (unsigned long long)base, (unsigned long long)rlen, pid);

	struct shm_rmh *r = shm_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->pid = (pid_t)pid;
	r->base = base;
	r->len = rlen;
	if (r->pid == ctx->pid) {
		/* A peer in this process: its address is valid here as it is. */
		r->map = (char *)(uintptr_t)base;
	} else if ((flags & SHM_BLOB_SEG) && ctx->map) {
		r->map_base = map_segment(r->pid, seg_fd, seg_id, seg_len);
		if (r->map_base) {
			r->map_len = (size_t)seg_len;
			r->map = (char *)r->map_base + seg_off;
		} else if (ctx->cma) {
			SHM_INFO("rank %d's segment is not mappable here: writes to it use CMA", peer);
		}
	}
	if (!r->map && !ctx->cma) {
		SHM_ERR("rank %d's region %s and shm.cma=0: this rank cannot write it", peer,
			(flags & SHM_BLOB_SEG) ? "could not be mapped" : "is not in a shared segment (weft_mem_alloc)");
		shm_core->free(r);
		return -ENOTSUP;
	}
	ctx->nregions++;
	*rmh = r;
	return 0;
}

int shm_mem_release(void *tc, void *rmh)
{
	struct shm_ctx *ctx = tc;
	struct shm_rmh *r = rmh;
	if (!r)
		return 0;
	if (r->map_base)
		munmap(r->map_base, r->map_len);
	if (ctx)
		ctx->nregions--;
	shm_core->free(r);
	return 0;
}

int shm_mem_map(void *tc, void *rmh, void **dev_ptr)
{
	struct shm_rmh *r = rmh;
	if (!r || !dev_ptr)
		return -EINVAL;
	if (!r->map)
		return -ENOTSUP;
	*dev_ptr = r->map;
	return 0;
}
