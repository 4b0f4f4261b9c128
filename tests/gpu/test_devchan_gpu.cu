/* SPDX-License-Identifier: Apache-2.0 */
/* GPU tests of device channels through the public API alone (libweft and the
 * nvlink plugin it loads): memory channels built from weft_mem_register of
 * cudaMalloc memory, weft_mem_exchange, weft_sem_create_on(WEFT_MEM_CUDA) and
 * weft_sem_exchange; port channels fed by a host thread and by a kernel
 * (weft_port_device_handle), drained by the core's proxy into the nvlink
 * copy engine; abort flags raised by weft_comm_abort and by a peer's death.
 * Data is random (host-generated) and checked byte for byte. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <weft/device.h>
#include <weft/weft.h>

extern "C" {
#include "testlib.h"
}

#pragma GCC diagnostic ignored "-Wunused-function"

static int g_rank = -1;
static struct weft_unique_id g_id;

#define GFAIL(...)                                                                                                \
	do {                                                                                                      \
		fprintf(stderr, "[rank %d] %s:%d: ", g_rank, __FILE__, __LINE__);                                \
		fprintf(stderr, __VA_ARGS__);                                                                     \
		fputc('\n', stderr);                                                                              \
		return 1;                                                                                         \
	} while (0)
#define CK(call)                                                                                                  \
	do {                                                                                                      \
		cudaError_t e_ = (call);                                                                          \
		if (e_ != cudaSuccess)                                                                            \
			GFAIL("%s: %s", #call, cudaGetErrorString(e_));                                           \
	} while (0)
#define OK(call)                                                                                                  \
	do {                                                                                                      \
		int r_ = (call);                                                                                  \
		if (r_ != 0)                                                                                      \
			GFAIL("%s returned %d (%s)", #call, r_, weft_strerror(r_));                               \
	} while (0)

/* xorshift64*: the same bytes on both ranks for a seed. */
static void g_fill(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t s = seed | 1;
	for (size_t i = 0; i < n; i += 8) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		uint64_t v = s * 2685821657736338717ull;
		for (size_t k = 0; k < 8 && i + k < n; k++)
			p[i + k] = (unsigned char)(v >> (8 * k));
	}
}

#define DATA_BYTES ((size_t)32 << 20)

/* One rank's end of a channel pair built through the public API. */
struct pctx {
	weft_comm_t *comm;
	weft_conn_t *conn;
	void *data;
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	weft_memchan_t *ch;
	struct weft_memchan_dev h;
	unsigned char *host, *back;
};

static int pctx_setup(int rank, struct pctx *c)
{
	g_rank = rank;
	memset(c, 0, sizeof(*c));
	int n = 0;
	CK(cudaGetDeviceCount(&n));
	CK(cudaSetDevice(rank % n)); /* nvlink.device -1: the current device */
	OK(weft_comm_create(&g_id, 2, rank, &c->comm));
	int peer = 1 - rank;
	OK(weft_connect(c->comm, peer, "nvlink", &c->conn));
	CK(cudaMalloc(&c->data, DATA_BYTES));
	CK(cudaMemset(c->data, 0, DATA_BYTES));
	CK(cudaDeviceSynchronize());
	OK(weft_mem_register(c->comm, c->data, DATA_BYTES, WEFT_MEM_CUDA, &c->mem));
	OK(weft_mem_exchange(c->mem, peer, &c->rmem));
	OK(weft_sem_create_on(c->comm, WEFT_MEM_CUDA, &c->sem));
	OK(weft_sem_exchange(c->sem, peer, &c->rsem));
	OK(weft_memchan_create(c->conn, c->rmem, c->mem, c->sem, c->rsem, &c->ch));
	OK(weft_memchan_device_handle(c->ch, &c->h));
	c->host = (unsigned char *)malloc(DATA_BYTES);
	c->back = (unsigned char *)malloc(DATA_BYTES);
	if (!c->host || !c->back)
		GFAIL("host memory");
	return 0;
}

static int pctx_teardown(struct pctx *c)
{
	OK(weft_comm_barrier(c->comm));
	OK(weft_memchan_destroy(c->ch));
	OK(weft_rsem_release(c->rsem));
	OK(weft_sem_destroy(c->sem));
	OK(weft_rmem_release(c->rmem));
	OK(weft_mem_deregister(c->mem));
	OK(weft_conn_close(c->conn));
	OK(weft_comm_destroy(c->comm));
	cudaFree(c->data);
	free(c->host);
	free(c->back);
	return 0;
}

/* Waits for the peer's next n signals on the channel's semaphore. */
__global__ void k_wait(struct weft_memchan_dev c, int n, int *res)
{
	int r = WEFT_DEV_OK;
	for (int i = 0; i < n && r == WEFT_DEV_OK; i++)
		r = weft_memchan_wait(&c);
	*res = r;
}

/* Memory channel: put a range to the peer, fence, signal; one block. */
__global__ void k_put_signal(struct weft_memchan_dev c, uint64_t doff, uint64_t soff, uint64_t bytes)
{
	weft_memchan_put(&c, doff, soff, bytes, threadIdx.x, blockDim.x);
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence_system();
		weft_memchan_signal(&c);
	}
}

__global__ void k_signal(struct weft_memchan_dev c)
{
	weft_memchan_signal(&c);
}

static int wait_kernel(struct pctx *c, int n)
{
	int *res;
	CK(cudaMalloc(&res, sizeof(int)));
	k_wait<<<1, 1>>>(c->h, n, res);
	CK(cudaGetLastError());
	CK(cudaDeviceSynchronize());
	int r = -1;
	CK(cudaMemcpy(&r, res, sizeof(int), cudaMemcpyDeviceToHost));
	cudaFree(res);
	if (r != WEFT_DEV_OK)
		GFAIL("the waiting kernel returned %d", r);
	return 0;
}

/* Rank 1 checks [doff, doff+len) against the seed's bytes and the guard bytes
 * around it against the poison. */
static int check_range(struct pctx *c, size_t doff, size_t len, uint64_t seed, int poison)
{
	size_t lo = doff ? doff - 1 : 0, hi = doff + len + 1 <= DATA_BYTES ? doff + len + 1 : DATA_BYTES;
	CK(cudaMemcpy(c->back + lo, (char *)c->data + lo, hi - lo, cudaMemcpyDeviceToHost));
	g_fill(c->host, len, seed);
	if (memcmp(c->back + doff, c->host, len) != 0) {
		size_t k = 0;
		while (c->back[doff + k] == c->host[k])
			k++;
		GFAIL("byte %zu of %zu at offset %zu differs (%02x, expected %02x)", k, len, doff, c->back[doff + k],
		      c->host[k]);
	}
	if (poison >= 0 && ((doff && c->back[doff - 1] != poison) ||
			    (doff + len < DATA_BYTES && c->back[doff + len] != poison)))
		GFAIL("written outside [%zu, %zu)", doff, doff + len);
	return 0;
}

static int fill_src(struct pctx *c, size_t soff, size_t len, uint64_t seed)
{
	g_fill(c->host, len, seed);
	CK(cudaMemcpy((char *)c->data + soff, c->host, len, cudaMemcpyHostToDevice));
	CK(cudaDeviceSynchronize()); /* the copy engine's stream does not wait for this one */
	return 0;
}

static int poison(struct pctx *c)
{
	CK(cudaMemset(c->data, 0xA5, DATA_BYTES));
	CK(cudaDeviceSynchronize());
	return 0;
}

/* ------------------------------------------- memory channel, public path */
static int memchan_rank(int rank, int nranks, void *arg)
{
	struct pctx c;
	OK(pctx_setup(rank, &c));
	/* Device tokens: kernels wait, the host cannot. */
	if (weft_sem_wait(c.sem, 1) != -ENOTSUP || weft_sem_value(c.sem) != 0)
		GFAIL("weft_sem_wait / weft_sem_value on a device semaphore");
	weft_sem_t *hsem;
	weft_memchan_t *bad;
	OK(weft_sem_create(c.comm, &hsem));
	if (weft_memchan_create(c.conn, c.rmem, c.mem, hsem, NULL, &bad) != -ENOTSUP)
		GFAIL("a memory channel accepted a host semaphore");
	OK(weft_sem_destroy(hsem));
	static const size_t cases[][3] = {{1, 7, 3}, {4096 + 3, 13, 1}, {(1u << 20) + 7, 5, 11}, {(16u << 20) + 3, 64, 2}};
	for (int i = 0; i < 4; i++) {
		size_t len = cases[i][0], doff = cases[i][1], soff = cases[i][2];
		uint64_t seed = 0x51ed270b27c3a1d5ull * (uint64_t)(i + 1);
		OK(poison(&c));
		OK(weft_comm_barrier(c.comm));
		if (rank == 0) {
			OK(fill_src(&c, soff, len, seed));
			k_put_signal<<<1, 1024>>>(c.h, doff, soff, len);
			CK(cudaGetLastError());
			OK(wait_kernel(&c, 1)); /* the ack */
		} else {
			OK(wait_kernel(&c, 1));
			OK(check_range(&c, doff, len, seed, 0xA5));
			k_signal<<<1, 1>>>(c.h);
			CK(cudaGetLastError());
			CK(cudaDeviceSynchronize());
		}
	}
	/* Host-driven put + signal (copy engine) into the device semaphore. */
	OK(weft_comm_barrier(c.comm));
	if (rank == 0) {
		OK(fill_src(&c, 0, (8u << 20) + 5, 99));
		OK(weft_put(c.conn, c.rmem, 3, c.mem, 0, (8u << 20) + 5));
		OK(weft_signal(c.conn, c.rsem, 1000)); /* kernels raised it to 4 */
		OK(weft_flush(c.conn));
	} else {
		OK(wait_kernel(&c, 1));
		OK(check_range(&c, 3, (8u << 20) + 5, 99, -1));
	}
	return pctx_teardown(&c);
}

/* ----------------------------------------------- port channels */
/* Rank 0 produces (host thread or kernel) round after round; rank 1 waits on
 * its device semaphore in a kernel and checks. depth 8 with 24+ triggers a
 * round makes producers wait on the proxy. */
#define PORT_DEPTH 8
#define PORT_ROUNDS 3
#define CHUNK ((size_t)65537)
#define NCHUNKS 48

__global__ void k_produce(struct weft_port_dev p, uint32_t dst_id, uint32_t src_id, uint32_t rsem_id, uint64_t doff,
			  uint64_t soff, uint64_t value, int *res)
{
	__shared__ int bad;
	if (threadIdx.x == 0)
		bad = 0;
	__syncthreads();
	/* Several threads reserve slots at once: the device-side head. */
	for (int k = threadIdx.x; k < NCHUNKS; k += blockDim.x)
		if (weft_port_put(&p, dst_id, doff + k * CHUNK, src_id, soff + k * CHUNK, (uint32_t)CHUNK) ==
		    UINT64_MAX)
			bad = 1;
	__syncthreads();
	if (threadIdx.x == 0) {
		if (!bad && weft_port_signal(&p, rsem_id, value) == UINT64_MAX)
			bad = 1;
		if (!bad && weft_port_flush(&p) != WEFT_DEV_OK)
			bad = 1;
		*res = bad ? 2 : 1;
	}
}

/* Who pushes, and which transport carries the port's connection: nvlink
 * maps the peer's memory; the others cannot register device memory here, so
 * the core's proxy stages it through pinned host memory (core/stage.c). */
struct port_case {
	int device;
	const char *tp;
};

static int port_rank(int rank, int nranks, void *arg)
{
	const struct port_case *pc = (const struct port_case *)arg;
	int device = pc->device;
	struct pctx c;
	OK(pctx_setup(rank, &c));
	weft_conn_t *conn = c.conn; /* rank 1's kernel waits on the nvlink channel's semaphore */
	if (strcmp(pc->tp, "nvlink") != 0) {
		OK(weft_connect_mem(c.comm, 1 - rank, pc->tp, WEFT_MEM_CUDA, &conn));
		if (strcmp(weft_conn_transport(conn), pc->tp) != 0)
			GFAIL("the port's connection went over %s, not %s", weft_conn_transport(conn), pc->tp);
	}
	weft_port_t *port = NULL;
	OK(weft_port_create(conn, PORT_DEPTH, &port));
	struct weft_port_dev pd;
	uint32_t dst_id = 0, src_id = 0, rsem_id = 0;
	int *res = NULL;
	if (rank == 0 && device) {
		OK(weft_port_device_handle(port, &pd));
		if (pd.depth != PORT_DEPTH || !pd.head || !pd.slots || !pd.abort_flag)
			GFAIL("weft_port_device_handle filled depth %u", pd.depth);
		OK(weft_mem_port_id(c.mem, &src_id));
		OK(weft_rmem_port_id(c.rmem, &dst_id));
		OK(weft_rsem_port_id(c.rsem, &rsem_id));
		CK(cudaMalloc(&res, sizeof(int)));
		if (weft_port_flush(port) != -EBUSY)
			GFAIL("a host push into a device-mode port was not refused");
	}
	size_t len = NCHUNKS * CHUNK;
	for (int r = 0; r < PORT_ROUNDS; r++) {
		size_t doff = 1 + (size_t)r * 5, soff = 3 + (size_t)r * 7;
		uint64_t seed = 0xabcdef12345ull + (uint64_t)r * 7919 + (uint64_t)device;
		OK(poison(&c));
		OK(weft_comm_barrier(c.comm));
		if (rank == 0) {
			OK(fill_src(&c, soff, len, seed));
			if (device) {
				CK(cudaMemset(res, 0, sizeof(int)));
				k_produce<<<1, 64>>>(pd, dst_id, src_id, rsem_id, doff, soff, (uint64_t)r + 1, res);
				CK(cudaGetLastError());
				CK(cudaDeviceSynchronize());
				int h = 0;
				CK(cudaMemcpy(&h, res, sizeof(int), cudaMemcpyDeviceToHost));
				if (h != 1)
					GFAIL("round %d: the producing kernel reported %d", r, h);
			} else {
				for (int k = 0; k < NCHUNKS; k++)
					OK(weft_port_put(port, c.rmem, doff + k * CHUNK, c.mem, soff + k * CHUNK, CHUNK));
				OK(weft_port_signal(port, c.rsem, (uint64_t)r + 1));
				OK(weft_port_flush(port));
			}
		} else {
			OK(wait_kernel(&c, 1));
			OK(check_range(&c, doff, len, seed, 0xA5));
		}
	}
	OK(weft_port_destroy(port));
	if (res)
		cudaFree(res);
	if (conn != c.conn) {
		OK(weft_comm_barrier(c.comm));
		OK(weft_conn_close(conn));
	}
	return pctx_teardown(&c);
}

/* ----------------------------------------------------- abort wiring */
struct waiter {
	int *res; /* mapped host memory */
	int *dres;
};

static int launch_waiter(struct pctx *c, struct waiter *w)
{
	CK(cudaHostAlloc((void **)&w->res, sizeof(int), cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer((void **)&w->dres, w->res, 0));
	*w->res = -1;
	k_wait<<<1, 1>>>(c->h, 1, w->dres);
	CK(cudaGetLastError());
	return 0;
}

/* Both ranks' kernels wait for a signal nobody sends; weft_comm_abort from
 * the host must end them, and later calls return -WEFT_ERR_ABORTED. */
static int abort_rank(int rank, int nranks, void *arg)
{
	struct pctx c;
	OK(pctx_setup(rank, &c));
	OK(weft_comm_barrier(c.comm));
	struct waiter w;
	OK(launch_waiter(&c, &w));
	usleep(300000);
	if (*(volatile int *)w.res != -1)
		GFAIL("the kernel returned before the abort");
	OK(weft_comm_abort(c.comm));
	CK(cudaDeviceSynchronize());
	if (*w.res != WEFT_DEV_ABORTED)
		GFAIL("the waiting kernel returned %d, expected WEFT_DEV_ABORTED", *w.res);
	int rc = weft_comm_barrier(c.comm);
	if (rc != -WEFT_ERR_ABORTED)
		GFAIL("weft_comm_barrier after abort returned %d", rc);
	/* A channel made after the failure starts with its flag raised. */
	weft_memchan_t *late;
	OK(weft_memchan_create(c.conn, c.rmem, c.mem, c.sem, c.rsem, &late));
	struct weft_memchan_dev lh;
	OK(weft_memchan_device_handle(late, &lh));
	c.h = lh;
	struct waiter w2;
	OK(launch_waiter(&c, &w2));
	CK(cudaDeviceSynchronize());
	if (*w2.res != WEFT_DEV_ABORTED)
		GFAIL("a channel made after the abort let its kernel wait (%d)", *w2.res);
	OK(weft_memchan_destroy(late));
	OK(weft_comm_destroy(c.comm));
	return 0;
}

/* Rank 0 dies without a word while rank 1's kernel waits on a channel the core
 * made: the bootstrap notices, the proxy raises the flag, the kernel returns,
 * and rank 1's next host call reports the dead peer. */
static int death_rank(int rank, int nranks, void *arg)
{
	struct pctx c;
	OK(pctx_setup(rank, &c));
	OK(weft_comm_barrier(c.comm));
	if (rank == 0) {
		usleep(200000); /* rank 1's kernel is waiting by now */
		raise(SIGKILL);
		return 1;
	}
	struct waiter w;
	OK(launch_waiter(&c, &w));
	time_t t0 = time(NULL);
	CK(cudaDeviceSynchronize());
	long secs = (long)(time(NULL) - t0);
	if (*w.res != WEFT_DEV_ABORTED)
		GFAIL("the waiting kernel returned %d, expected WEFT_DEV_ABORTED", *w.res);
	if (secs > 25) /* core.peer_timeout is 20 s */
		GFAIL("the kernel took %ld s to notice the dead peer", secs);
	printf("[rank 1] kernel left its wait %ld s after the peer died\n", secs);
	int rc = weft_comm_barrier(c.comm);
	if (rc != -WEFT_ERR_PEER)
		GFAIL("weft_comm_barrier after the peer died returned %d, expected -WEFT_ERR_PEER", rc);
	if (weft_comm_status(c.comm) != -WEFT_ERR_PEER)
		GFAIL("weft_comm_status is %d", weft_comm_status(c.comm));
	OK(weft_comm_destroy(c.comm));
	return 0;
}

START_TEST(test_memchan_public_api)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, memchan_rank, NULL, 120), 0);
}
END_TEST

START_TEST(test_port_host_producer)
{
	struct port_case pc = {0, "nvlink"};
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, port_rank, &pc, 120), 0);
}
END_TEST

START_TEST(test_port_device_producer)
{
	struct port_case pc = {1, "nvlink"};
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, port_rank, &pc, 120), 0);
}
END_TEST

/* A kernel's triggers over shm, ofi and ucx (loopback): device data staged
 * by the proxy, the signal applied on the far GPU after the data. */
static const char *const staged_tps[] = {"shm", "ofi", "ucx"};
START_TEST(test_port_device_producer_staged)
{
	struct port_case pc = {1, staged_tps[_i]};
	fprintf(stderr, "port channel from a kernel over %s\n", pc.tp);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, port_rank, &pc, 120), 0);
}
END_TEST

START_TEST(test_abort_ends_kernel_waits)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, abort_rank, NULL, 60), 0);
}
END_TEST

START_TEST(test_peer_death_ends_kernel_wait)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int st[2];
	wt_fork_ranks_status(2, death_rank, NULL, 90, st);
	ck_assert_msg(WIFSIGNALED(st[0]) && WTERMSIG(st[0]) == SIGKILL, "rank 0 did not die as planned");
	ck_assert_msg(WIFEXITED(st[1]) && WEXITSTATUS(st[1]) == 0, "the survivor failed (status %d)", st[1]);
}
END_TEST

/* CUDA must not be initialized in the parent before the ranks fork. */
static int probe_gpu(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int n = 0;
		cudaError_t e = cudaGetDeviceCount(&n);
		if (e == cudaSuccess && n > 0)
			_exit(0);
		const char *req = getenv("WEFT_REQUIRE_GPU");
		if (req && strcmp(req, "1") == 0) {
			fprintf(stderr, "FAIL: WEFT_REQUIRE_GPU=1 but no CUDA device: %s\n",
				e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
			_exit(1);
		}
		printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
		_exit(77);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void)
{
	int rc = probe_gpu();
	if (rc != 0)
		return rc;
	Suite *s = suite_create("devchan_gpu");
	TCase *tc = tcase_create("devchan");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_memchan_public_api);
	tcase_add_test(tc, test_port_host_producer);
	tcase_add_test(tc, test_port_device_producer);
	tcase_add_loop_test(tc, test_port_device_producer_staged, 0, 3);
	tcase_add_test(tc, test_abort_ends_kernel_waits);
	tcase_add_test(tc, test_peer_death_ends_kernel_wait);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
