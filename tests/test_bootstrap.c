/* SPDX-License-Identifier: Apache-2.0 */
/* Bootstrap tests: SHA-256/HMAC vectors, host identity, launcher variables, and
 * real forked ranks meeting over 127.0.0.1: rendezvous, messages, liveness,
 * clean shutdown, and strangers that must be refused without harm. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "hostid.h"
#include "sha256.h"
#include "testlib.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void unhex(const char *s, uint8_t *out, size_t *n)
{
	size_t k = strlen(s) / 2;
	for (size_t i = 0; i < k; i++) {
		unsigned v;
		sscanf(s + 2 * i, "%2x", &v);
		out[i] = (uint8_t)v;
	}
	*n = k;
}

/* The environment every multi-process test starts from: loopback only, short
 * timeouts, fast heartbeats. */
static void base_env(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "10", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "2", 1);
	setenv("WEFT_CORE_HEARTBEAT_INTERVAL", "0.2", 1);
	unsetenv("WEFT_CORE_BOOTSTRAP_ROOT");
	unsetenv("WEFT_CORE_BOOTSTRAP_SECRET");
}

/* Sends this process's stderr (where weft logs) to a file, to check the log. */
static char *capture_stderr(const char *tag)
{
	char *dir = wt_mkdtemp(tag), *path;
	ck_assert_ptr_nonnull(dir);
	ck_assert_int_ge(asprintf(&path, "%s/log", dir), 0);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	ck_assert_int_ge(fd, 0);
	dup2(fd, 2);
	close(fd);
	free(dir);
	return path;
}

/* ------------------------------------------------------------ SHA-256 */

START_TEST(test_sha256_vectors)
{
	/* FIPS 180-2 appendix B. */
	static const struct {
		const char *msg;
		const char *digest;
	} v[] = {
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	};
	uint8_t d[32];
	char h[65];
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		weft__sha256(v[i].msg, strlen(v[i].msg), d);
		hex(d, 32, h);
		ck_assert_str_eq(h, v[i].digest);
		/* Fed byte by byte, across block boundaries, it must agree. */
		struct weft__sha256 c;
		weft__sha256_init(&c);
		for (size_t k = 0; k < strlen(v[i].msg); k++)
			weft__sha256_update(&c, v[i].msg + k, 1);
		weft__sha256_final(&c, d);
		hex(d, 32, h);
		ck_assert_str_eq(h, v[i].digest);
	}
	/* One million 'a', in uneven pieces. */
	struct weft__sha256 c;
	char a[1000];
	memset(a, 'a', sizeof(a));
	weft__sha256_init(&c);
	size_t left = 1000000, step = 1;
	while (left) {
		size_t n = step < left ? step : left;
		weft__sha256_update(&c, a, n);
		left -= n;
		step = step % 977 + 13; /* at most 989 < sizeof(a) */
	}
	weft__sha256_final(&c, d);
	hex(d, 32, h);
	ck_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

START_TEST(test_hmac_vectors)
{
	/* RFC 4231 test cases 1-4, 6, 7 (hex key, hex data, HMAC-SHA-256); case 5
	 * is truncated to 128 bits and checked separately. */
	static const struct {
		const char *key, *data, *mac;
	} v[] = {
		{"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
		 "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
		{"4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
		 "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		 "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
		 "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
		{"0102030405060708090a0b0c0d0e0f10111213141516171819",
		 "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
		 "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
		{"aa*131",
		 "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
		 "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
		{"aa*131",
		 "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
		 "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
	};
	uint8_t key[200], data[300], mac[32];
	size_t kn, dn;
	char h[65];
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		if (strcmp(v[i].key, "aa*131") == 0) {
			memset(key, 0xaa, 131); /* cases 6 and 7: a key longer than a block */
			kn = 131;
		} else {
			unhex(v[i].key, key, &kn);
		}
		unhex(v[i].data, data, &dn);
		weft__hmac_sha256(key, kn, data, dn, mac);
		hex(mac, 32, h);
		ck_assert_msg(strcmp(h, v[i].mac) == 0, "RFC 4231 vector %zu: got %s", i, h);
	}
	/* Case 5: truncated output. */
	unhex("0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", key, &kn);
	weft__hmac_sha256(key, kn, "Test With Truncation", 20, mac);
	hex(mac, 16, h);
	ck_assert_str_eq(h, "a3b6167473100ee06e0c796c2955552b");
	ck_assert(weft__ct_equal("abc", "abc", 3));
	ck_assert(!weft__ct_equal("abc", "abd", 3));
}
END_TEST

/* ---------------------------------------------------------- host identity */

static void *proc_id_thread(void *arg)
{
	*(uint64_t *)arg = weft__proc_id();
	return NULL;
}

START_TEST(test_host_and_proc_id)
{
	char a[WEFT_HOST_ID_LEN], b[WEFT_HOST_ID_LEN], boot[64] = "", want[128];
	ck_assert_int_eq(weft__host_id(a, sizeof(a)), 0);
	ck_assert_int_eq(weft__host_id(b, sizeof(b)), 0);
	ck_assert_str_eq(a, b);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f) {
		ck_assert_ptr_nonnull(fgets(boot, sizeof(boot), f));
		fclose(f);
		boot[strcspn(boot, "\n")] = '\0';
		struct stat st;
		ck_assert_int_eq(stat("/proc/self/ns/net", &st), 0);
		snprintf(want, sizeof(want), "%s-%llu", boot, (unsigned long long)st.st_ino);
		ck_assert_str_eq(a, want);
	}
	char small[8];
	ck_assert_int_eq(weft__host_id(small, sizeof(small)), -ENOSPC);

	uint64_t mine = weft__proc_id(), other = 0;
	pthread_t th;
	pthread_create(&th, NULL, proc_id_thread, &other);
	pthread_join(th, NULL);
	ck_assert_uint_eq(mine, other);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		uint64_t c = weft__proc_id();
		char h[WEFT_HOST_ID_LEN];
		weft__host_id(h, sizeof(h));
		/* Same host, another process. */
		_exit(write(p[1], &c, sizeof(c)) == sizeof(c) && strcmp(h, a) == 0 ? 0 : 1);
	}
	uint64_t child = 0;
	ck_assert_int_eq(read(p[0], &child, sizeof(child)), (int)sizeof(child));
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_uint_ne(child, mine);
}
END_TEST

/* ---------------------------------------------------------- launcher env */

static void clear_launcher_env(void)
{
	const char *v[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
			   "SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE"};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		unsetenv(v[i]);
}

START_TEST(test_env_rank)
{
	int r = -7, n = -7;
	clear_launcher_env();
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), -ENOENT);
	ck_assert_int_eq(r, -7);
	setenv("RANK", "3", 1);
	setenv("WORLD_SIZE", "8", 1);
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), 0);
	ck_assert_int_eq(r, 3);
	ck_assert_int_eq(n, 8);
	/* Slurm outranks torchrun, PMI outranks Slurm, Open MPI outranks all. */
	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_NTASKS", "4", 1);
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), 0);
	ck_assert_int_eq(r, 1);
	ck_assert_int_eq(n, 4);
	setenv("PMI_RANK", "2", 1);
	setenv("PMI_SIZE", "5", 1);
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), 0);
	ck_assert_int_eq(r, 2);
	ck_assert_int_eq(n, 5);
	setenv("OMPI_COMM_WORLD_RANK", "0", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), 0);
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(n, 2);
	/* Malformed values are errors, not silently skipped. */
	setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
	r = n = -7;
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), -EINVAL);
	ck_assert_int_eq(r, -7);
	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), -EINVAL); /* rank 2 of 2 */
	unsetenv("OMPI_COMM_WORLD_SIZE");
	ck_assert_int_eq(weft__bootstrap_env_rank(&r, &n), -EINVAL);
	clear_launcher_env();
}
END_TEST

START_TEST(test_bad_args)
{
	struct weft__bootstrap *bs = NULL;
	struct weft_unique_id id;
	base_env();
	memset(&id, 0x5a, sizeof(id));
	ck_assert_int_eq(weft__bootstrap_create(&id, 2, 2, &bs), -EINVAL);
	ck_assert_int_eq(weft__bootstrap_create(&id, 0, 0, &bs), -EINVAL);
	ck_assert_int_eq(weft__bootstrap_create(&id, 2, 0, NULL), -EINVAL);
	/* Not an id at all. */
	ck_assert_int_eq(weft__bootstrap_create(&id, 2, 0, &bs), -EINVAL);
	ck_assert_ptr_null(bs);
	/* No id and no root. */
	unsetenv("MASTER_ADDR");
	ck_assert_int_eq(weft__bootstrap_create(NULL, 2, 0, &bs), -EINVAL);
	setenv("WEFT_CORE_BOOTSTRAP_ROOT", "localhost", 1);
	ck_assert_int_eq(weft__bootstrap_create(NULL, 2, 0, &bs), -WEFT_ERR_CONFIG);
	weft__bootstrap_destroy(NULL);
}
END_TEST

/* ------------------------------------------------------------ one job */

struct job {
	struct weft_unique_id id;
	int use_id;        /* else WEFT_CORE_BOOTSTRAP_ROOT */
	int late_rank;     /* this rank sleeps late_s before joining */
	double late_s;
	int absent_rank;   /* this rank never joins (-1: none) */
	const char *log;   /* rank 0's log file, or NULL */
	int kind;          /* what happens after the rendezvous */
	double start_at;   /* no rank starts before this (see fork_ranks) */
};

/* The parent's root thread serves while the parent is still forking ranks.
 * glibc's malloc is fork-safe, but sanitizer allocators are not: a child forked
 * while that thread held an allocator lock would hang. So no rank talks to the
 * root until every rank has been forked. */
static int fork_ranks_status(int nranks, wt_rank_fn fn, struct job *j, int timeout_s, int *status)
{
	j->start_at = now_s() + 0.3 + 0.05 * nranks;
	return wt_fork_ranks_status(nranks, fn, j, timeout_s, status);
}

static int fork_ranks(int nranks, wt_rank_fn fn, struct job *j, int timeout_s)
{
	j->start_at = now_s() + 0.3 + 0.05 * nranks;
	return wt_fork_ranks(nranks, fn, j, timeout_s);
}

static int create(struct job *j, int rank, int nranks, struct weft__bootstrap **bs)
{
	double wait = j->start_at - now_s();
	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));
	return weft__bootstrap_create(j->use_id ? &j->id : NULL, nranks, rank, bs);
}

#define CHECK(cond)                                                                               \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "rank %d: check failed at line %d: %s\n", rank, __LINE__, #cond); \
			return 1;                                                                 \
		}                                                                                 \
	} while (0)

static uint8_t pattern(int from, int to, size_t size, size_t i)
{
	return (uint8_t)(i * 131 + (size_t)from * 17 + (size_t)to * 5 + size);
}

/* Rendezvous, allgather, every pair exchanging 1 B .. 8 MiB both ways at
 * once, barrier, clean destroy. */
static int full_exchange(struct weft__bootstrap *bs, int rank, int nranks, int same_process)
{
	static const size_t sizes[] = {1, 1000, 65536, 1 << 20, 8 << 20};
	struct info {
		uint64_t tag, proc;
		char host[WEFT_HOST_ID_LEN];
		int rank;
	} mine = {0}, all[8];
	mine.tag = weft__bootstrap_tag(bs);
	mine.proc = weft__proc_id();
	mine.rank = rank;
	weft__host_id(mine.host, sizeof(mine.host));
	CHECK(weft__bootstrap_rank(bs) == rank && weft__bootstrap_size(bs) == nranks);
	CHECK(strcmp(weft__bootstrap_local_addr(bs), "127.0.0.1") == 0);
	CHECK(weft__bootstrap_allgather(bs, &mine, all, sizeof(mine)) == 0);
	for (int i = 0; i < nranks; i++) {
		CHECK(all[i].rank == i);
		CHECK(all[i].tag == mine.tag);
		CHECK(strcmp(all[i].host, mine.host) == 0);
		CHECK(strcmp(weft__bootstrap_host_id(bs, i), mine.host) == 0);
		CHECK(weft__bootstrap_proc_id(bs, i) == all[i].proc);
		CHECK(strcmp(weft__bootstrap_peer_addr(bs, i), "127.0.0.1") == 0);
		/* Forked ranks are separate processes; thread ranks share one. */
		CHECK(i == rank || (all[i].proc != mine.proc) == !same_process);
	}
	uint8_t *out = malloc(8 << 20), *in = malloc(8 << 20);
	CHECK(out && in);
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		/* Everyone sends to everyone first, then receives: only queued,
		 * concurrently drained sockets survive this with 8 MiB messages. */
		for (int p = 0; p < nranks; p++) {
			if (p == rank)
				continue;
			for (size_t i = 0; i < n; i++)
				out[i] = pattern(rank, p, n, i);
			CHECK(weft__bootstrap_send(bs, p, (uint32_t)s, out, n) == 0);
		}
		for (int p = 0; p < nranks; p++) {
			if (p == rank)
				continue;
			memset(in, 0, n);
			CHECK(weft__bootstrap_recv(bs, p, (uint32_t)s, in, n) == 0);
			for (size_t i = 0; i < n; i++)
				if (in[i] != pattern(p, rank, n, i)) {
					fprintf(stderr, "rank %d: byte %zu of %zu from %d wrong\n", rank, i, n, p);
					return 1;
				}
		}
	}
	/* Tags are independent queues: receive in the opposite order of sending. */
	int peer = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
	uint32_t a = 0xa0 + (uint32_t)rank, b = 0xb0 + (uint32_t)rank, x, y;
	CHECK(weft__bootstrap_send(bs, peer, 7, &a, 4) == 0);
	CHECK(weft__bootstrap_send(bs, peer, 8, &b, 4) == 0);
	CHECK(weft__bootstrap_recv(bs, from, 8, &y, 4) == 0);
	CHECK(weft__bootstrap_recv(bs, from, 7, &x, 4) == 0);
	CHECK(x == 0xa0 + (uint32_t)from && y == 0xb0 + (uint32_t)from);
	/* A wrong length is reported, not truncated. */
	CHECK(weft__bootstrap_send(bs, peer, 9, &a, 4) == 0);
	CHECK(weft__bootstrap_recv(bs, from, 9, &x, 2) == -EMSGSIZE);
	free(out);
	free(in);
	CHECK(weft__bootstrap_barrier(bs) == 0);
	CHECK(weft__bootstrap_status(bs) == 0);
	return 0;
}

static int rank_full(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	if (rank == j->late_rank)
		usleep((useconds_t)(j->late_s * 1e6));
	int rc = create(j, rank, nranks, &bs);
	if (rc != 0) {
		fprintf(stderr, "rank %d: create: %s\n", rank, weft_strerror(rc));
		return 1;
	}
	rc = full_exchange(bs, rank, nranks, 0);
	weft__bootstrap_destroy(bs);
	return rc;
}

static void run_full(int nranks)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	base_env();
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(nranks, rank_full, &j, 60), 0);
}

START_TEST(test_two_ranks)
{
	run_full(2);
}
END_TEST

START_TEST(test_three_ranks)
{
	run_full(3);
}
END_TEST

START_TEST(test_four_ranks)
{
	run_full(4);
}
END_TEST

START_TEST(test_root_from_env)
{
	struct job j = {.use_id = 0, .late_rank = -1, .absent_rank = -1};
	char root[64];
	base_env();
	snprintf(root, sizeof(root), "127.0.0.1:%d", wt_free_port());
	setenv("WEFT_CORE_BOOTSTRAP_ROOT", root, 1);
	setenv("WEFT_CORE_BOOTSTRAP_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 1);
	ck_assert_int_eq(fork_ranks(3, rank_full, &j, 60), 0);
	/* A plain-text secret works the same way, on the same port again. */
	setenv("WEFT_CORE_BOOTSTRAP_SECRET", "correct horse battery staple", 1);
	ck_assert_int_eq(fork_ranks(2, rank_full, &j, 60), 0);
}
END_TEST

static int rank_wrong_secret(int rank, int nranks, void *arg)
{
	struct weft__bootstrap *bs = NULL;
	/* Rank 1 holds another secret: the root refuses it, and it learns that
	 * the root does not hold its secret. */
	if (rank == 1)
		setenv("WEFT_CORE_BOOTSTRAP_SECRET", "a different secret", 1);
	else
		usleep(300 * 1000);
	int rc = weft__bootstrap_create(NULL, nranks, rank, &bs);
	if (rank == 1 && rc != -WEFT_ERR_AUTH) {
		fprintf(stderr, "rank 1: create returned %s, expected an authentication error\n", weft_strerror(rc));
		return 1;
	}
	if (rank == 0 && rc != -ETIMEDOUT) {
		fprintf(stderr, "rank 0: create returned %s, expected a timeout\n", weft_strerror(rc));
		return 1;
	}
	return 0;
}

START_TEST(test_root_env_wrong_secret)
{
	char root[64];
	base_env();
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "2", 1);
	snprintf(root, sizeof(root), "127.0.0.1:%d", wt_free_port());
	setenv("WEFT_CORE_BOOTSTRAP_ROOT", root, 1);
	setenv("WEFT_CORE_BOOTSTRAP_SECRET", "the job's secret", 1);
	ck_assert_int_eq(wt_fork_ranks(2, rank_wrong_secret, NULL, 30), 0);
}
END_TEST

/* --------------------------------------------------------- missing / late */

static int rank_missing(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	if (rank == j->absent_rank)
		return 0;
	double t0 = now_s();
	int rc = create(j, rank, nranks, &bs);
	double dt = now_s() - t0;
	CHECK(rc == -ETIMEDOUT);
	CHECK(bs == NULL);
	CHECK(dt > 2.0 && dt < 3.0 + 2.0);
	return 0;
}

START_TEST(test_missing_rank)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = 2};
	base_env();
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "3", 1);
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(3, rank_missing, &j, 30), 0);
}
END_TEST

START_TEST(test_late_rank)
{
	/* Joining after twice the peer timeout is fine: that timeout starts only
	 * once the rendezvous is complete. */
	struct job j = {.use_id = 1, .late_rank = 1, .late_s = 2.5, .absent_rank = -1};
	base_env();
	setenv("WEFT_CORE_PEER_TIMEOUT", "1", 1);
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(3, rank_full, &j, 60), 0);
}
END_TEST

/* ------------------------------------------------------------- strangers
 * The wire format, written out here independently of bootstrap.c so that
 * the test checks the protocol rather than reusing its code:
 *   H1 = "WFTH" | u32 version | u64 id nonce | 32-byte nonce Ni      (48 B)
 *   H2 = "WFTH" | u32 version | 32-byte nonce Na | HMAC(s, "weft-acceptor\0"|id|Ni|Na)
 *   H3 = HMAC(s, "weft-initiator\0"|id|Ni|Na)
 *   frame header = "WFTM" | u16 type | u16 class | u32 tag | u32 0 | u64 length */

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void proof(const uint8_t *secret, const char *label, uint64_t nonce, const uint8_t *ni, const uint8_t *na,
		  uint8_t *out)
{
	struct weft__hmac h;
	uint8_t n8[8];
	le(n8, nonce, 8);
	weft__hmac_init(&h, secret, 32);
	weft__hmac_update(&h, label, strlen(label) + 1);
	weft__hmac_update(&h, n8, 8);
	weft__hmac_update(&h, ni, 32);
	weft__hmac_update(&h, na, 32);
	weft__hmac_final(&h, out);
}

static int read_full(int fd, void *buf, size_t n, int ms)
{
	uint8_t *p = buf;
	while (n) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, ms) <= 0)
			return -1;
		ssize_t k = read(fd, p, n);
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Client side of the handshake with the given secret. Returns the fd after
 * sending H3, or -1. With a wrong secret the acceptor's proof does not verify
 * here; we send our (wrong) proof anyway, as an intruder would. */
static int handshake(int port, const struct weft_unique_id *id, const uint8_t *secret)
{
	struct weft__unique_id_layout u;
	memcpy(&u, id->internal, sizeof(u));
	int fd = dial(port);
	if (fd < 0)
		return -1;
	uint8_t h1[48], h2[72], p[32];
	memcpy(h1, "WFTH", 4);
	le(h1 + 4, WEFT__BOOTSTRAP_VERSION, 4);
	le(h1 + 8, u.nonce, 8);
	if (getrandom(h1 + 16, 32, 0) != 32 || write(fd, h1, 48) != 48 || read_full(fd, h2, 72, 3000) != 0) {
		close(fd);
		return -1;
	}
	proof(secret, "weft-initiator", u.nonce, h1 + 16, h2 + 8, p);
	if (write(fd, p, 32) != 32) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Four strangers at one port: silent, garbage, wrong secret, and a right
 * handshake followed by a 2^62-byte length. fds[0] is the silent one. */
static void strangers(int port, const struct weft_unique_id *id, int fds[4])
{
	struct weft__unique_id_layout u;
	uint8_t wrong[32];
	memcpy(&u, id->internal, sizeof(u));
	memcpy(wrong, u.secret, 32);
	wrong[0] ^= 1;
	fds[0] = dial(port);
	fds[1] = dial(port);
	const char junk[] = "GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: not-weft/1.0\r\nAccept: */*\r\n\r\n";
	if (fds[1] >= 0 && write(fds[1], junk, sizeof(junk) - 1) < 0)
		perror("write");
	fds[2] = handshake(port, id, wrong);
	fds[3] = handshake(port, id, u.secret);
	uint8_t hdr[24] = "WFTM";
	le(hdr + 4, 1, 2);
	le(hdr + 6, 0, 2);
	le(hdr + 8, 0, 4);
	le(hdr + 12, 0, 4);
	le(hdr + 16, (uint64_t)1 << 62, 8);
	if (fds[3] >= 0 && write(fds[3], hdr, sizeof(hdr)) < 0)
		perror("write");
}

/* 1 when the peer closed fd (EOF or reset) within ms. */
static int closed_by_peer(int fd, int ms)
{
	char c[256];
	double end = now_s() + ms / 1000.0;
	while (now_s() < end) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 50) > 0) {
			ssize_t k = read(fd, c, sizeof(c));
			if (k <= 0)
				return 1;
		}
	}
	return 0;
}

static int log_has(const char *path, const char *a, const char *b)
{
	char *text = wt_read_file(path);
	int found = 0;
	for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
		if (strstr(line, a) && (!b || strstr(line, b)))
			found = 1;
	free(text);
	return found;
}

static int rank_quick(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	int rc = create(j, rank, nranks, &bs);
	CHECK(rc == 0);
	uint64_t t = weft__bootstrap_tag(bs), all[8];
	CHECK(weft__bootstrap_allgather(bs, &t, all, 8) == 0);
	for (int i = 0; i < nranks; i++)
		CHECK(all[i] == t);
	CHECK(weft__bootstrap_barrier(bs) == 0);
	weft__bootstrap_destroy(bs);
	return 0;
}

START_TEST(test_strangers_at_root)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	struct weft__unique_id_layout u;
	int fds[4];
	base_env();
	char *log = capture_stderr("bs-root");
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	memcpy(&u, j.id.internal, sizeof(u));
	strangers(ntohs(u.port), &j.id, fds);
	for (int i = 0; i < 4; i++)
		ck_assert_int_ge(fds[i], 0);
	double t0 = now_s();
	for (int i = 1; i < 4; i++)
		ck_assert_msg(closed_by_peer(fds[i], 2000), "stranger %d was not disconnected", i);
	/* The job completes while the silent connection is still pending (the
	 * handshake timeout is 5 s): it never stalls the root. */
	ck_assert_int_eq(fork_ranks(3, rank_quick, &j, 30), 0);
	ck_assert(now_s() - t0 < 4.5);
	ck_assert(log_has(log, "sent garbage", "127.0.0.1:"));
	ck_assert(log_has(log, "failed authentication (wrong secret)", "127.0.0.1:"));
	ck_assert(log_has(log, "4611686018427387904-byte message", "127.0.0.1:"));
	/* The root lingers after the job to answer late ranks, and drops the
	 * silent one at its handshake deadline (5 s after it connected). */
	ck_assert(closed_by_peer(fds[0], 6000));
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	free(log);
}
END_TEST

static int rank_strangers_listener(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	if (rank == 0) {
		int fd = open(j->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
		dup2(fd, 2);
		close(fd);
	}
	CHECK(create(j, rank, nranks, &bs) == 0);
	int port = weft__bootstrap_listen_port(bs);
	CHECK(port > 0);
	if (rank == 0) {
		CHECK(weft__bootstrap_send(bs, 1, 1, &port, sizeof(port)) == 0);
	} else {
		int fds[4];
		CHECK(weft__bootstrap_recv(bs, 0, 1, &port, sizeof(port)) == 0);
		strangers(port, &j->id, fds);
		for (int i = 0; i < 4; i++)
			CHECK(fds[i] >= 0);
		/* The handshake timeout is min(5 s, bootstrap timeout = 2 s). */
		for (int i = 0; i < 4; i++)
			CHECK(closed_by_peer(fds[i], 3500));
		for (int i = 0; i < 4; i++)
			close(fds[i]);
	}
	/* Nothing of that disturbed the job; the size limit holds for real peers. */
	CHECK(weft__bootstrap_barrier(bs) == 0);
	size_t big = 2 << 20;
	uint8_t *buf = calloc(1, big + 1);
	CHECK(buf);
	CHECK(weft__bootstrap_send(bs, 1 - rank, 2, buf, big + 1) == -EMSGSIZE);
	CHECK(weft__bootstrap_send(bs, 1 - rank, 2, buf, big) == 0);
	CHECK(weft__bootstrap_recv(bs, 1 - rank, 2, buf, big) == 0);
	free(buf);
	CHECK(weft__bootstrap_barrier(bs) == 0);
	CHECK(weft__bootstrap_status(bs) == 0);
	weft__bootstrap_destroy(bs);
	if (rank == 0) {
		CHECK(log_has(j->log, "sent nothing within 2.0 s", "127.0.0.1:"));
		CHECK(log_has(j->log, "sent garbage", "127.0.0.1:"));
		CHECK(log_has(j->log, "failed authentication (wrong secret)", "127.0.0.1:"));
		CHECK(log_has(j->log, "4611686018427387904-byte message", "127.0.0.1:"));
	}
	return 0;
}

START_TEST(test_strangers_at_listener)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	base_env();
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "2", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "1", 1);
	setenv("WEFT_CORE_BOOTSTRAP_MAX_MSG", "2M", 1);
	char *dir = wt_mkdtemp("bs-listener");
	char *log;
	ck_assert_int_ge(asprintf(&log, "%s/rank0.log", dir), 0);
	j.log = log;
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(2, rank_strangers_listener, &j, 60), 0);
	wt_rmdir(dir);
	free(dir);
	free(log);
}
END_TEST

/* --------------------------------------------------------------- liveness */

enum { DIE_KILL, DIE_STOP, DIE_EXIT };

static int rank_dies(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	CHECK(create(j, rank, nranks, &bs) == 0);
	int pid = (int)getpid(), pids[8];
	CHECK(weft__bootstrap_allgather(bs, &pid, pids, sizeof(pid)) == 0);
	CHECK(weft__bootstrap_barrier(bs) == 0);
	int victim = nranks - 1;
	if (rank == victim) {
		usleep(300 * 1000);
		if (j->kind == DIE_KILL)
			raise(SIGKILL);
		if (j->kind == DIE_STOP)
			raise(SIGSTOP);
		return 0; /* DIE_EXIT: leave without destroy */
	}
	const volatile uint32_t *word = weft__bootstrap_fail_word(bs);
	uint32_t w0 = *word;
	double t0 = now_s();
	char c;
	int rc = weft__bootstrap_recv(bs, victim, 5, &c, 1);
	double dt = now_s() - t0;
	if (j->kind == DIE_STOP && rank == 0)
		kill(pids[victim], SIGKILL);
	CHECK(rc == -WEFT_ERR_PEER);
	CHECK(weft__bootstrap_status(bs) == -WEFT_ERR_PEER);
	CHECK(*word != w0);
	/* peer_timeout is 2 s; a stopped peer needs all of it, a dead one none. */
	if (j->kind == DIE_STOP)
		CHECK(dt > 1.5 && dt < 2.0 + 1.5);
	else
		CHECK(dt < 2.0);
	/* Every later call fails the same way, including between survivors. */
	CHECK(weft__bootstrap_barrier(bs) == -WEFT_ERR_PEER);
	CHECK(weft__bootstrap_send(bs, 0, 1, &c, 1) == -WEFT_ERR_PEER);
	CHECK(weft__bootstrap_recv(bs, 0, 1, &c, 1) == -WEFT_ERR_PEER);
	weft__bootstrap_destroy(bs);
	return 0;
}

static void run_dies(int kind)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1, .kind = kind};
	int st[3];
	base_env();
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks_status(3, rank_dies, &j, 30, st), 0);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "survivor rank %d failed", r);
	if (kind == DIE_EXIT)
		ck_assert(WIFEXITED(st[2]) && WEXITSTATUS(st[2]) == 0);
	else
		ck_assert(WIFSIGNALED(st[2]) && WTERMSIG(st[2]) == SIGKILL);
}

START_TEST(test_peer_killed)
{
	run_dies(DIE_KILL);
}
END_TEST

START_TEST(test_peer_stopped)
{
	run_dies(DIE_STOP);
}
END_TEST

START_TEST(test_exit_without_destroy)
{
	run_dies(DIE_EXIT);
}
END_TEST

static int rank_slow(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	CHECK(create(j, rank, nranks, &bs) == 0);
	int v = 0;
	if (rank == 1) {
		/* Three peer timeouts of an application thread doing something else. */
		sleep(3);
		v = 42;
		CHECK(weft__bootstrap_send(bs, 0, 3, &v, sizeof(v)) == 0);
	} else {
		double t0 = now_s();
		CHECK(weft__bootstrap_recv(bs, 1, 3, &v, sizeof(v)) == 0);
		CHECK(v == 42);
		CHECK(now_s() - t0 > 2.5);
	}
	CHECK(weft__bootstrap_barrier(bs) == 0);
	CHECK(weft__bootstrap_status(bs) == 0);
	weft__bootstrap_destroy(bs);
	return 0;
}

START_TEST(test_slow_peer)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	base_env();
	setenv("WEFT_CORE_PEER_TIMEOUT", "1", 1);
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(2, rank_slow, &j, 30), 0);
}
END_TEST

static void *fail_later(void *arg)
{
	usleep(500 * 1000);
	weft__bootstrap_fail(arg, -WEFT_ERR_ABORTED);
	return NULL;
}

static int rank_abort(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	CHECK(create(j, rank, nranks, &bs) == 0);
	char c;
	if (rank == 0) {
		pthread_t th;
		uint32_t w0 = *weft__bootstrap_fail_word(bs);
		pthread_create(&th, NULL, fail_later, bs);
		double t0 = now_s();
		CHECK(weft__bootstrap_recv(bs, 1, 1, &c, 1) == -WEFT_ERR_ABORTED);
		CHECK(now_s() - t0 > 0.4 && now_s() - t0 < 2.0);
		pthread_join(th, NULL);
		CHECK(*weft__bootstrap_fail_word(bs) != w0);
		CHECK(weft__bootstrap_status(bs) == -WEFT_ERR_ABORTED);
		/* First error wins. */
		weft__bootstrap_fail(bs, -WEFT_ERR_PEER);
		CHECK(weft__bootstrap_status(bs) == -WEFT_ERR_ABORTED);
		CHECK(weft__bootstrap_barrier(bs) == -WEFT_ERR_ABORTED);
		weft__bootstrap_destroy(bs);
	} else {
		/* Rank 0's bootstrap failed (aborted) before it was destroyed, so it
		 * leaves without a goodbye: this rank's pending recv, and the whole
		 * bootstrap, fail too, rather than wait for a rank that is gone. */
		double t0 = now_s();
		CHECK(weft__bootstrap_recv(bs, 0, 1, &c, 1) == -WEFT_ERR_PEER);
		CHECK(now_s() - t0 < 2.0);
		CHECK(weft__bootstrap_status(bs) == -WEFT_ERR_PEER);
		weft__bootstrap_destroy(bs);
	}
	return 0;
}

START_TEST(test_fail_from_thread)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	base_env();
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(2, rank_abort, &j, 30), 0);
}
END_TEST

static int rank_early_destroy(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	CHECK(create(j, rank, nranks, &bs) == 0);
	uint32_t v = (uint32_t)rank * 11, w;
	/* Rank 0 sends, then leaves at once; its message must still arrive. */
	if (rank == 0) {
		CHECK(weft__bootstrap_send(bs, 1, 4, &v, 4) == 0);
		CHECK(weft__bootstrap_send(bs, 2, 4, &v, 4) == 0);
		weft__bootstrap_destroy(bs);
		return 0;
	}
	usleep(800 * 1000);
	CHECK(weft__bootstrap_recv(bs, 0, 4, &w, 4) == 0);
	CHECK(w == 0);
	CHECK(weft__bootstrap_status(bs) == 0);
	/* The others carry on, well past the peer timeout. */
	for (int round = 0; round < 3; round++) {
		int other = rank == 1 ? 2 : 1;
		CHECK(weft__bootstrap_send(bs, other, 5, &v, 4) == 0);
		CHECK(weft__bootstrap_recv(bs, other, 5, &w, 4) == 0);
		CHECK(w == (uint32_t)other * 11);
		sleep(1);
	}
	CHECK(weft__bootstrap_status(bs) == 0);
	CHECK(weft__bootstrap_recv(bs, 0, 4, &w, 4) == -WEFT_ERR_PEER);
	CHECK(weft__bootstrap_status(bs) == 0);
	weft__bootstrap_destroy(bs);
	return 0;
}

START_TEST(test_clean_destroy)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	base_env();
	setenv("WEFT_CORE_PEER_TIMEOUT", "1", 1);
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(3, rank_early_destroy, &j, 30), 0);
}
END_TEST

static int rank_single(int rank, int nranks, void *arg)
{
	struct job *j = arg;
	struct weft__bootstrap *bs = NULL;
	CHECK(create(j, rank, nranks, &bs) == 0);
	int v = 5, all;
	CHECK(weft__bootstrap_allgather(bs, &v, &all, sizeof(v)) == 0 && all == 5);
	CHECK(weft__bootstrap_barrier(bs) == 0);
	CHECK(weft__bootstrap_send(bs, 0, 1, &v, sizeof(v)) == 0);
	CHECK(weft__bootstrap_recv(bs, 0, 1, &all, sizeof(all)) == 0 && all == 5);
	weft__bootstrap_destroy(bs);
	return 0;
}

START_TEST(test_single_rank)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	base_env();
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	ck_assert_int_eq(fork_ranks(1, rank_single, &j, 30), 0);
}
END_TEST

/* Ranks as threads of one process: the one multi-rank case ThreadSanitizer can
 * watch (it does not follow fork after threads), and ranks sharing a process. */
struct thread_rank {
	struct job *job;
	int rank, nranks, rc;
	pthread_t th;
};

static void *thread_rank_main(void *arg)
{
	struct thread_rank *t = arg;
	struct weft__bootstrap *bs = NULL;
	int rank = t->rank;
	t->rc = 1;
	if (create(t->job, t->rank, t->nranks, &bs) != 0) {
		fprintf(stderr, "thread rank %d: create failed\n", rank);
		return NULL;
	}
	t->rc = full_exchange(bs, t->rank, t->nranks, 1);
	weft__bootstrap_destroy(bs);
	return NULL;
}

START_TEST(test_ranks_as_threads)
{
	struct job j = {.use_id = 1, .late_rank = -1, .absent_rank = -1};
	struct thread_rank t[4];
	base_env();
	/* This case runs under ThreadSanitizer, which slows the 8 MiB HMACs of
	 * full_exchange tenfold: liveness is not what it checks. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "10", 1);
	ck_assert_int_eq(weft_get_unique_id(&j.id), 0);
	for (int r = 0; r < 4; r++) {
		t[r] = (struct thread_rank){.job = &j, .rank = r, .nranks = 4};
		ck_assert_int_eq(pthread_create(&t[r].th, NULL, thread_rank_main, &t[r]), 0);
	}
	/* Join every thread before asserting: a failed assertion leaves the
	 * function, and the other ranks would be leaked. */
	for (int r = 0; r < 4; r++)
		pthread_join(t[r].th, NULL);
	for (int r = 0; r < 4; r++)
		ck_assert_msg(t[r].rc == 0, "thread rank %d failed", r);
}
END_TEST

static Suite *bootstrap_suite(const char *which)
{
	Suite *s = suite_create("bootstrap");
	TCase *tc = tcase_create(which);
	if (strcmp(which, "unit") == 0) {
		tcase_add_test(tc, test_sha256_vectors);
		tcase_add_test(tc, test_hmac_vectors);
		tcase_add_test(tc, test_host_and_proc_id);
		tcase_add_test(tc, test_env_rank);
		tcase_add_test(tc, test_bad_args);
	} else {
		tcase_add_test(tc, test_single_rank);
		tcase_add_test(tc, test_two_ranks);
		tcase_add_test(tc, test_three_ranks);
		tcase_add_test(tc, test_four_ranks);
		tcase_add_test(tc, test_root_from_env);
		tcase_add_test(tc, test_root_env_wrong_secret);
		tcase_add_test(tc, test_missing_rank);
		tcase_add_test(tc, test_late_rank);
		tcase_add_test(tc, test_strangers_at_root);
		tcase_add_test(tc, test_strangers_at_listener);
		tcase_add_test(tc, test_peer_killed);
		tcase_add_test(tc, test_peer_stopped);
		tcase_add_test(tc, test_exit_without_destroy);
		tcase_add_test(tc, test_slow_peer);
		tcase_add_test(tc, test_fail_from_thread);
		tcase_add_test(tc, test_clean_destroy);
		TCase *th = tcase_create("threads");
		tcase_add_test(th, test_ranks_as_threads);
		suite_add_tcase(s, th);
	}
	suite_add_tcase(s, tc);
	return s;
}

/* Built twice (tests/bootstrap.cmake): BS_SUITE "unit" (no network) and "mp"
 * (forked ranks), so that ctest can run them by label. */
#ifndef BS_SUITE
#define BS_SUITE "mp"
#endif

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return wt_run_suite(bootstrap_suite(BS_SUITE));
}
