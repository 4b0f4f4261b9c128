/* SPDX-License-Identifier: Apache-2.0 */
/* Staging (core/stage.c), by order and not by time: two forked ranks over
 * shm put "device" memory (host memory registered as CUDA, which only the
 * stagefake stand-in accepts, tests/plugins/stage_fake.c), so it is staged
 * through bounce buffers. A shared trace orders every copy and put of both
 * ranks; the stand-in holds copies until the event an order needs, so a
 * pipelined stage passes every run and an unpipelined one fails every run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/weft.h>

#include "stage.h"
#include "testlib.h"

#define CHUNK (64u << 10)
#define TRACE_CAP 4096
#define SRC_OFF 5
#define DST_OFF 3

static struct weft_unique_id g_id;

enum { BY_CALLS, BY_PORT, BY_BOTH };
struct stage_case {
	size_t len;     /* bytes per put */
	unsigned depth; /* core.stage_depth */
	int by;         /* BY_PORT: puts, signals and flushes go through a port
			 * channel, so the core's proxy drives the stage; BY_BOTH:
			 * the port's put and a weft_put race on one connection */
};

static unsigned char pattern(size_t i, unsigned seed)
{
	uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;
	return (unsigned char)(x >> 13 ^ x >> 24);
}

/* Every byte of [DST_OFF, DST_OFF + len) holds the pattern, and the poison
 * around it is untouched. */
static int check_dst(int rank, const unsigned char *buf, size_t size, size_t len, unsigned seed)
{
	for (size_t i = 0; i < size; i++) {
		int in = i >= DST_OFF && i < DST_OFF + len;
		unsigned char want = in ? pattern(i - DST_OFF, seed) : 0xA5;
		RCHECK(buf[i] == want, "byte %zu is 0x%02x, expected 0x%02x (%s)", i, buf[i], want,
		       in ? "data" : "poison");
	}
	return 0;
}

/* Rank 0 sends, rank 1 receives. Round 1 ends in a signal: the receiver's
 * wait must see the data in its "device" memory. Round 2 ends in a flush:
 * after it, the receiver sees the data without waiting on anything. */
static int send_round(int rank, const struct stage_case *sc, weft_conn_t *conn, weft_port_t *port, weft_rmem_t *rmem,
		      weft_mem_t *mem, weft_rsem_t *rsem, unsigned round)
{
	size_t half = sc->by == BY_BOTH ? sc->len / 2 : sc->len;
	if (sc->by == BY_CALLS) {
		ROK(weft_put(conn, rmem, DST_OFF, mem, SRC_OFF, sc->len));
	} else {
		ROK(weft_port_put(port, rmem, DST_OFF, mem, SRC_OFF, half));
		/* Pushed, not done: the proxy is still staging the first half. */
		if (half < sc->len)
			ROK(weft_put(conn, rmem, DST_OFF + half, mem, SRC_OFF + half, sc->len - half));
	}
	if (sc->by == BY_CALLS)
		return round == 1 ? weft_signal(conn, rsem, 1) : weft_flush(conn);
	if (round == 1)
		ROK(weft_port_signal(port, rsem, 1));
	/* A port's put reads its source until a flush completes: the next
	 * round rewrites it. */
	return weft_port_flush(port);
}

static int rank_main(int rank, int nranks, void *arg)
{
	const struct stage_case *sc = arg;
	size_t size = sc->len + 16;
	weft_comm_t *comm;
	weft_conn_t *conn;
	ROK(weft_comm_create(&g_id, nranks, rank, &comm));
	ROK(weft_connect_mem(comm, 1 - rank, NULL, WEFT_MEM_CUDA, &conn));
	RCHECK(strcmp(weft_conn_transport(conn), "shm") == 0, "carried by %s", weft_conn_transport(conn));
	unsigned char *buf = malloc(size);
	RCHECK(buf != NULL, "malloc");
	memset(buf, 0xA5, size);
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	ROK(weft_mem_register(comm, buf, size, WEFT_MEM_CUDA, &mem));
	ROK(weft_mem_exchange(mem, 1 - rank, &rmem));
	ROK(weft_sem_create(comm, &sem));
	ROK(weft_sem_exchange(sem, 1 - rank, &rsem));
	weft_port_t *port = NULL;
	if (rank == 0 && sc->by != BY_CALLS)
		ROK(weft_port_create(conn, 0, &port));
	for (unsigned round = 1; round <= 2; round++) {
		if (rank == 0)
			for (size_t i = 0; i < sc->len; i++)
				buf[SRC_OFF + i] = pattern(i, round);
		else
			memset(buf, 0xA5, size);
		ROK(weft_comm_barrier(comm));
		if (rank == 0) {
			ROK(send_round(rank, sc, conn, port, rmem, mem, rsem, round));
			if (round == 2)
				ROK(weft_comm_send(comm, 1, 7, "f", 1));
		} else if (round == 1) {
			ROK(weft_sem_wait(sem, 1));
			if (check_dst(rank, buf, size, sc->len, round))
				return 1;
		} else {
			char f;
			ROK(weft_comm_recv(comm, 0, 7, &f, 1));
			if (check_dst(rank, buf, size, sc->len, round))
				return 1;
		}
	}
	ROK(weft_comm_barrier(comm));
	ROK(weft_port_destroy(port));
	ROK(weft_rsem_release(rsem));
	ROK(weft_sem_destroy(sem));
	ROK(weft_rmem_release(rmem));
	ROK(weft_mem_deregister(mem));
	ROK(weft_conn_close(conn));
	ROK(weft_comm_destroy(comm));
	free(buf);
	return 0;
}

/* ---------------------------------------------------------------- trace */
struct order {
	int early_copy;     /* copy k+1 started after put k completed */
	int late_far;       /* the far copy of k started after put k+1 completed */
	unsigned inflight;  /* most chunks between copy to host and far copy to device */
	int timeouts;
	uint64_t chunks;
	char first[160];    /* the first violation */
};

static long find(const struct weft__stage_trace *t, int rank, uint32_t what, uint32_t arg, uint64_t chunk)
{
	for (uint64_t i = 0; i < t->next && i < t->cap; i++) {
		const struct weft__stage_event *e = &t->ev[i];
		if (e->valid && (int)e->rank == rank && e->what == what && e->arg == arg && e->chunk == chunk)
			return (long)i;
	}
	return -1;
}

static void check_order(const struct weft__stage_trace *t, uint64_t per_put, struct order *o)
{
	memset(o, 0, sizeof(*o));
	for (uint64_t i = 0; i < t->next && i < t->cap; i++) {
		o->chunks += t->ev[i].what == WEFT__EV_PUT_END;
		o->timeouts += t->ev[i].what == WEFT__EV_HOLD_TIMEOUT;
	}
	for (uint64_t k = 0; k + 1 < o->chunks; k++) {
		if ((k + 1) % per_put == 0)
			continue; /* k is the last chunk of its put */
		long copy_next = find(t, 0, WEFT__EV_COPY_START, WEFT_STAGE_TO_HOST, k + 1);
		long put_end = find(t, 0, WEFT__EV_PUT_END, 0, k);
		long far = find(t, 1, WEFT__EV_COPY_START, WEFT_STAGE_TO_DEVICE, k);
		long put_next_end = find(t, 0, WEFT__EV_PUT_END, 0, k + 1);
		if (copy_next < 0 || put_end < 0 || copy_next > put_end) {
			if (!o->early_copy++)
				snprintf(o->first, sizeof(o->first), "copy of chunk %llu started at event %ld, after "
					 "the put of chunk %llu completed at %ld", (unsigned long long)k + 1, copy_next,
					 (unsigned long long)k, put_end);
		}
		if (far < 0 || put_next_end < 0 || far > put_next_end) {
			if (!o->late_far++ && !o->first[0])
				snprintf(o->first, sizeof(o->first), "far copy of chunk %llu started at event %ld, "
					 "after the put of chunk %llu completed at %ld", (unsigned long long)k, far,
					 (unsigned long long)k + 1, put_next_end);
		}
	}
	fprintf(stderr, "stage order: %llu chunks, %d early-copy and %d late-far violations, %d hold timeouts%s%s\n",
		(unsigned long long)o->chunks, o->early_copy, o->late_far, o->timeouts, o->first[0] ? "; first: " : "",
		o->first);
	/* In flight: from the copy to the host to the end of the far side's copy. */
	unsigned cur = 0;
	for (uint64_t i = 0; i < t->next && i < t->cap; i++) {
		const struct weft__stage_event *e = &t->ev[i];
		if (e->rank == 0 && e->what == WEFT__EV_COPY_START && e->arg == WEFT_STAGE_TO_HOST)
			cur++;
		if (e->rank == 1 && e->what == WEFT__EV_COPY_END && e->arg == WEFT_STAGE_TO_DEVICE && cur > 0)
			cur--;
		if (cur > o->inflight)
			o->inflight = cur;
	}
	fprintf(stderr, "stage order: at most %u chunks in flight\n", o->inflight);
}

/* Runs both ranks with a fresh trace; returns it (munmap by the caller). */
static struct weft__stage_trace *run_case(struct stage_case *sc, const char *hold_ms)
{
	char *dir = wt_mkdtemp("stage");
	char path[512], v[32];
	snprintf(path, sizeof(path), "%s/trace", dir);
	size_t bytes = sizeof(struct weft__stage_trace) + TRACE_CAP * sizeof(struct weft__stage_event);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert(fd >= 0 && ftruncate(fd, (off_t)bytes) == 0);
	struct weft__stage_trace *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert(t != MAP_FAILED);
	t->magic = WEFT__STAGE_TRACE_MAGIC;
	t->cap = TRACE_CAP;
	t->expect = (sc->len + CHUNK - 1) / CHUNK;
	/* Data over shm, copies by the stand-in: a GPU machine's nvlink stays
	 * out (it would stage and carry device data itself). */
	char *conf = wt_write_file(dir, "weft.conf", "[transport]\nuse shm when mem=cuda\n");
	setenv("WEFT_CONFIG", conf, 1);
	free(conf);
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	setenv("WEFT_PLUGIN_PATH", WEFT_STAGEFAKE_PLUGIN_DIR, 1);
	setenv("WEFT_TEST_STAGE_TRACE", path, 1);
	setenv("WEFT_STAGEFAKE_HOLD_MS", hold_ms, 1);
	snprintf(v, sizeof(v), "%u", CHUNK);
	setenv("WEFT_CORE_STAGE_CHUNK", v, 1);
	snprintf(v, sizeof(v), "%u", sc->depth);
	setenv("WEFT_CORE_STAGE_DEPTH", v, 1);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_main, sc, 60), 0);
	wt_rmdir(dir);
	free(dir);
	return t;
}

static void trace_unmap(struct weft__stage_trace *t)
{
	munmap(t, sizeof(struct weft__stage_trace) + TRACE_CAP * sizeof(struct weft__stage_event));
}

/* Depth 4, 11 chunks a put (the last one short), odd offsets; by the
 * application's calls, or through a port channel, where the core's proxy
 * drives the stage a pass at a time and must pipeline as weft_put does. */
static void assert_pipelined(int by)
{
	struct stage_case sc = {.len = 10 * CHUNK + 1234, .depth = 4, .by = by};
	struct weft__stage_trace *t = run_case(&sc, "5000");
	struct order o;
	check_order(t, (sc.len + CHUNK - 1) / CHUNK, &o);
	trace_unmap(t);
	ck_assert_msg(o.chunks == 22, "%llu chunks posted, expected 22", (unsigned long long)o.chunks);
	ck_assert_msg(o.timeouts == 0, "%d holds timed out: the pipeline never reached the awaited event", o.timeouts);
	ck_assert_msg(!o.early_copy && !o.late_far, "%d + %d order violations; first: %s", o.early_copy, o.late_far,
		      o.first);
	ck_assert_msg(o.inflight <= sc.depth && o.inflight >= 2, "%u chunks in flight at most (depth %u)",
		      o.inflight, sc.depth);
}

START_TEST(test_pipeline_order)
{
	assert_pipelined(BY_CALLS);
}
END_TEST

START_TEST(test_port_pipeline_order)
{
	assert_pipelined(BY_PORT);
}
END_TEST

/* A port's staged put still in flight while the application's weft_put on
 * the same connection starts: neither interleaves its chunks with the
 * other's, and the port's signal lands after both (the receiver checks
 * every byte). Order is not asserted: the stand-in holds copies briefly. */
START_TEST(test_port_and_put_share_stage)
{
	struct stage_case sc = {.len = 12 * CHUNK + 77, .depth = 3, .by = BY_BOTH};
	struct weft__stage_trace *t = run_case(&sc, "20");
	struct order o;
	check_order(t, 1, &o);
	trace_unmap(t);
	/* Two halves of 6 chunks and 38 bytes, 7 chunks each, in each of 2 rounds. */
	ck_assert_msg(o.chunks == 28, "%llu chunks posted, expected 28", (unsigned long long)o.chunks);
}
END_TEST

/* The same assertions on an unpipelined stage (depth 1) must fail, for every
 * chunk: a copy to the host waits for the previous chunk's round trip. */
START_TEST(test_unpipelined_fails)
{
	struct stage_case sc = {.len = 4 * CHUNK, .depth = 1};
	struct weft__stage_trace *t = run_case(&sc, "100");
	struct order o;
	check_order(t, 4, &o);
	trace_unmap(t);
	ck_assert_msg(o.chunks == 8, "%llu chunks posted, expected 8", (unsigned long long)o.chunks);
	ck_assert_msg(o.early_copy == 6, "%d of 6 chunk pairs out of pipeline order at depth 1", o.early_copy);
	ck_assert_msg(o.inflight == 1, "%u chunks in flight at depth 1", o.inflight);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stage");
	TCase *tc = tcase_create("pipeline");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_pipeline_order);
	tcase_add_test(tc, test_unpipelined_fails);
	tcase_add_test(tc, test_port_pipeline_order);
	tcase_add_test(tc, test_port_and_put_share_stage);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
