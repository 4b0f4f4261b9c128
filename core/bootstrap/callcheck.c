/* SPDX-License-Identifier: Apache-2.0 */
/* Call state on the heartbeats (callstate.h). The thread in a call publishes
 * which call it is in (number and signature per communicator for
 * collectives, message numbers and signatures per pair for send/recv); every
 * heartbeat carries it, and the service thread compares it with what each
 * peer said. A call that two ranks make differently, a call one rank
 * skipped, and a peer that destroys the communicator while this rank waits
 * for it would otherwise hang for ever, both ranks alive. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "bootstrap.h"
#include "callstate.h"
#include "service.h"
#include "log.h"
#include "le.h"
#include "net.h"

/* Heartbeat flags. */
enum { CSF_IN_CALL = 1, CSF_FAILED = 4, CSF_LEAVING = 8, CSF_IN_BATCH = 16 };

int weft__bs_cs_init(struct weft__bootstrap *bs)
{
	bs->cs.p2p = calloc((size_t)bs->nranks, sizeof(*bs->cs.p2p));
	bs->cs.active = calloc((size_t)bs->nranks, sizeof(*bs->cs.active));
	return bs->cs.p2p && bs->cs.active ? 0 : -ENOMEM;
}

void weft__bs_cs_free(struct weft__bootstrap *bs)
{
	free(bs->cs.p2p);
	free(bs->cs.active);
	bs->cs.p2p = NULL;
	bs->cs.active = NULL;
}

/* ------------------------------------------------ the caller's side */

/* A sequence lock without fences (ThreadSanitizer models none): the writer's
 * stores are releases, so a reader that sees any of them sees the odd
 * generation before it; the reader's loads are acquires, so its second look
 * at the generation comes after them. Plain moves on x86. */
#define ST(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELEASE)
#define LD(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

static void w_begin(struct bs_callstate *cs)
{
	ST(cs->gen, cs->gen + 1);
}

static void w_end(struct bs_callstate *cs)
{
	__atomic_store_n(&cs->gen, cs->gen + 1, __ATOMIC_RELEASE);
}

void weft__bootstrap_call_begin(struct weft__bootstrap *bs, const struct weft__bs_call *c)
{
	struct bs_callstate *cs = &bs->cs;
	w_begin(cs);
	ST(cs->seq, c->seq);
	ST(cs->hist[c->seq % CS_HIST], c->sig);
	ST(cs->count, c->count);
	ST(cs->in_call, 1);
	w_end(cs);
}

void weft__bootstrap_call_end(struct weft__bootstrap *bs)
{
	struct bs_callstate *cs = &bs->cs;
	w_begin(cs);
	ST(cs->in_call, 0);
	w_end(cs);
}

void weft__bootstrap_p2p_begin(struct weft__bootstrap *bs, int peer, uint64_t sent, uint64_t ssig, uint64_t recvd,
			       uint64_t rsig)
{
	struct bs_callstate *cs = &bs->cs;
	if (peer < 0 || peer >= bs->nranks || cs->nactive >= bs->nranks)
		return;
	struct bs_p2p_state *p = &cs->p2p[peer];
	w_begin(cs);
	ST(p->sent, sent);
	if (ssig)
		ST(p->ssig, ssig);
	ST(p->recvd, recvd);
	if (rsig)
		ST(p->rsig, rsig);
	ST(p->in, 1);
	ST(cs->in_p2p, 1);
	w_end(cs);
	cs->active[cs->nactive++] = peer;
}

void weft__bootstrap_p2p_end(struct weft__bootstrap *bs)
{
	struct bs_callstate *cs = &bs->cs;
	w_begin(cs);
	for (int i = 0; i < cs->nactive; i++)
		ST(cs->p2p[cs->active[i]].in, 0);
	ST(cs->in_p2p, 0);
	ST(cs->batches, cs->batches + 1);
	w_end(cs);
	cs->nactive = 0;
}

void weft__bootstrap_leaving(struct weft__bootstrap *bs)
{
	if (!bs || !bs->thread_started)
		return;
	struct bs_callstate *cs = &bs->cs;
	w_begin(cs);
	ST(cs->leaving, 1);
	w_end(cs);
	pthread_mutex_lock(&bs->mu);
	cs->push = 1;
	pthread_mutex_unlock(&bs->mu);
	weft__bs_wake(bs);
}

/* ------------------------------------------ the service thread's side */

struct cs_snap {
	uint32_t in_call, in_p2p, leaving;
	uint64_t batches;
	uint64_t seq, sig, count; /* sig: the history's entry for seq */
	uint64_t hist[CS_HIST];
	struct bs_p2p_state p; /* with one peer */
};

/* A consistent copy of this rank's state (the pair part for peer, if >= 0). */
static void snap(struct weft__bootstrap *bs, int peer, struct cs_snap *s)
{
	struct bs_callstate *cs = &bs->cs;
	for (;;) {
		uint32_t g = __atomic_load_n(&cs->gen, __ATOMIC_ACQUIRE);
		if (g & 1) {
			sched_yield();
			continue;
		}
		s->in_call = LD(cs->in_call);
		s->in_p2p = LD(cs->in_p2p);
		s->batches = LD(cs->batches);
		s->leaving = LD(cs->leaving);
		s->seq = LD(cs->seq);
		for (int k = 0; k < CS_HIST; k++)
			s->hist[k] = LD(cs->hist[k]);
		s->count = LD(cs->count);
		memset(&s->p, 0, sizeof(s->p));
		if (peer >= 0) {
			s->p.sent = LD(cs->p2p[peer].sent);
			s->p.ssig = LD(cs->p2p[peer].ssig);
			s->p.recvd = LD(cs->p2p[peer].recvd);
			s->p.rsig = LD(cs->p2p[peer].rsig);
			s->p.in = LD(cs->p2p[peer].in);
		}
		if (LD(cs->gen) == g) {
			s->sig = s->hist[s->seq % CS_HIST];
			return;
		}
	}
}

void weft__bs_cs_encode(struct weft__bootstrap *bs, int peer, uint8_t *out)
{
	struct cs_snap s;
	snap(bs, peer, &s);
	int st = weft__bootstrap_status(bs);
	uint32_t flags = (s.in_call ? CSF_IN_CALL : 0) | (st ? CSF_FAILED : 0) | (s.leaving ? CSF_LEAVING : 0) |
			 (s.in_p2p ? CSF_IN_BATCH : 0);
	double in_state = weft__bs_now_s() - bs->cs.obs_since;
	put32(out, flags);
	put32(out + 4, (uint32_t)st);
	put64(out + 8, s.seq);
	put64(out + 16, s.count);
	put64(out + 24, s.p.sent);
	put64(out + 32, s.p.ssig);
	put64(out + 40, s.p.recvd);
	put64(out + 48, s.p.rsig);
	put64(out + 56, in_state > 0 ? (uint64_t)(in_state * 1000) : 0);
	for (int k = 0; k < CS_HIST; k++)
		put64(out + 64 + 8 * k, s.hist[k]);
}

const char *weft__bs_cs_heard(struct weft__bootstrap *bs, int peer, const uint8_t *p, size_t len)
{
	if (len != CS_LEN)
		return "sent a heartbeat of the wrong length (another weft version?)";
	struct bs_peer_state *ps = &bs->peers[peer].cs;
	ps->flags = get32(p);
	ps->fail = (int32_t)get32(p + 4);
	ps->seq = get64(p + 8);
	ps->count = get64(p + 16);
	ps->psent = get64(p + 24);
	ps->pssig = get64(p + 32);
	ps->precvd = get64(p + 40);
	ps->prsig = get64(p + 48);
	ps->in_state_s = (double)get64(p + 56) / 1000;
	for (int k = 0; k < CS_HIST; k++)
		ps->hist[k] = get64(p + 64 + 8 * k);
	ps->have = 1;
	return NULL;
}

static void fail_with(struct weft__bootstrap *bs, int err)
{
	weft__bs_fail_locked(bs, err);
	bs->cs.push = 1;
}

/* Logs the two calls, decoded, and the field that differs. full: the peer's
 * state describes the very call (same number), so the counts can be shown. */
static void report(struct weft__bootstrap *bs, int peer, const char *what, uint64_t mine, uint64_t theirs,
		   const struct cs_snap *s, const struct bs_peer_state *ps, int full)
{
	char a[128], b[128];
	weft_kit_sig_describe(mine, a, sizeof(a));
	weft_kit_sig_describe(theirs, b, sizeof(b));
	const char *field = weft_kit_sig_diff(mine, theirs);
	if (full && field && !strcmp(field, "count or window"))
		WEFT_ERROR("%s disagree: rank %d made %s with count %llu, rank %d %s with count %llu: the %s "
			   "differs; the communicator fails on every rank",
			   what, bs->rank, a, (unsigned long long)s->count, peer, b, (unsigned long long)ps->count,
			   field);
	else
		WEFT_ERROR("%s disagree: rank %d made %s, rank %d %s: the %s differs; the communicator fails on "
			   "every rank",
			   what, bs->rank, a, peer, b, field ? field : "signature");
}

/* A peer that failed: a mismatch it found fails this rank too; any failure
 * does while this rank destroys the communicator (a pack's last barrier may
 * wait for that peer, which will not come). */
static void peer_failed(struct weft__bootstrap *bs, int i, const struct bs_peer_state *ps, const struct cs_snap *s)
{
	if (ps->fail == -WEFT_ERR_MISMATCH) {
		WEFT_ERROR("rank %d found that the ranks' calls disagree (its log says how); the communicator fails "
			   "here too",
			   i);
		fail_with(bs, -WEFT_ERR_MISMATCH);
	} else if (ps->fail == -ETIMEDOUT) {
		WEFT_ERROR("rank %d's call waited past core.stall_timeout (its log names the stuck ranks); the "
			   "communicator fails here too",
			   i);
		fail_with(bs, -ETIMEDOUT);
	} else if (s->leaving) {
		WEFT_INFO("bootstrap: rank %d failed (%s) while this rank destroys the communicator", i,
			  weft_kit_errname(ps->fail));
		weft__bs_fail_locked(bs, -WEFT_ERR_PEER);
	}
}

/* A peer that began weft_comm_destroy: this rank fails a call it waits in
 * that the peer never made. */
static void peer_leaving(struct weft__bootstrap *bs, int i, const struct bs_peer_state *ps, const struct cs_snap *s)
{
	if (s->in_call && ps->seq < s->seq) {
		WEFT_ERROR("rank %d destroyed the communicator during call %llu (it made %llu collective calls)", i,
			   (unsigned long long)s->seq, (unsigned long long)ps->seq);
		weft__bs_fail_locked(bs, -WEFT_ERR_PEER);
	} else if (s->p.in && (ps->psent < s->p.recvd || ps->precvd < s->p.sent)) {
		WEFT_ERROR("rank %d destroyed the communicator while this rank exchanges with it (it sent %llu of the "
			   "%llu messages this rank receives, and posted %llu of the %llu receives for this rank's)",
			   i, (unsigned long long)ps->psent, (unsigned long long)s->p.recvd,
			   (unsigned long long)ps->precvd, (unsigned long long)s->p.sent);
		weft__bs_fail_locked(bs, -WEFT_ERR_PEER);
	}
}

static void check_peer(struct weft__bootstrap *bs, int i)
{
	struct bs_peer_state *ps = &bs->peers[i].cs;
	struct cs_snap s;
	snap(bs, i, &s);
	if (ps->flags & CSF_FAILED) {
		peer_failed(bs, i, ps, &s);
		return;
	}
	/* Collectives: every rank makes every call, numbered alike. This
	 * rank's last call against the peer's call of that number, while the
	 * peer's history still holds it (a peer further behind checks ours). */
	if (s.seq && ps->seq >= s.seq && ps->seq - s.seq < CS_HIST && ps->hist[s.seq % CS_HIST] != s.sig) {
		report(bs, i, "collective calls", s.sig, ps->hist[s.seq % CS_HIST], &s, ps, ps->seq == s.seq);
		fail_with(bs, -WEFT_ERR_MISMATCH);
		return;
	}
	/* Send/recv: its k-th message to this rank against this rank's k-th
	 * receive from it (each side checks its receives). */
	if (s.p.recvd && ps->psent == s.p.recvd && ps->pssig && s.p.rsig && ps->pssig != s.p.rsig) {
		report(bs, i, "send/recv calls", s.p.rsig, ps->pssig, &s, ps, 0);
		fail_with(bs, -WEFT_ERR_MISMATCH);
		return;
	}
	if (ps->flags & CSF_LEAVING)
		peer_leaving(bs, i, ps, &s);
}

/* ---------------------------------------------------------------- stalls */

/* Where peer i is, as its last heartbeat said, for a stall line. */
static int where(const struct bs_peer_state *ps, char *buf, size_t len)
{
	if (ps->flags & CSF_IN_CALL)
		return snprintf(buf, len, "in call %llu for %.1f s", (unsigned long long)ps->seq, ps->in_state_s);
	if (ps->flags & CSF_IN_BATCH)
		return snprintf(buf, len, "in a send/recv for %.1f s", ps->in_state_s);
	return snprintf(buf, len, "not in weft for %.1f s (after call %llu)", ps->in_state_s,
			(unsigned long long)ps->seq);
}

/* The ranks this rank's wait is on that have not reached it (all: every
 * peer), and where they are. Returns how many. */
static int stuck_list(struct weft__bootstrap *bs, const struct cs_snap *s, int all, char *buf, size_t len)
{
	size_t k = 0;
	int n = 0;
	buf[0] = '\0';
	for (int i = 0; i < bs->nranks && k < len; i++) {
		struct peer *pe = &bs->peers[i];
		if (i == bs->rank || !pe->up || !pe->cs.have)
			continue;
		const struct bs_peer_state *ps = &pe->cs;
		int behind = s->in_call ? ps->seq < s->seq
					: s->in_p2p && ps->psent < LD(bs->cs.p2p[i].recvd) && LD(bs->cs.p2p[i].in);
		if (!behind && !all)
			continue;
		char w[96];
		where(ps, w, sizeof(w));
		int m = snprintf(buf + k, len - k, "%srank %d %s", n ? "; " : "", i, w);
		if (m > 0)
			k += (size_t)m < len - k ? (size_t)m : len - k - 1;
		n++;
	}
	return n;
}

/* A call this rank waits in for stall_warn (and then every stall_warn) is
 * named with the ranks that have not reached it; past stall_timeout it fails
 * with -ETIMEDOUT, and the peers with it. A stuck rank heartbeats, so it is
 * never declared dead. */
static void stall_check(struct weft__bootstrap *bs, double now)
{
	struct bs_callstate *cs = &bs->cs;
	struct cs_snap s;
	snap(bs, -1, &s);
	uint32_t in = s.in_call | s.in_p2p << 1;
	if (!cs->obs_since || s.seq != cs->obs_seq || s.batches != cs->obs_batches || in != cs->obs_in) {
		cs->obs_seq = s.seq;
		cs->obs_batches = s.batches;
		cs->obs_in = in;
		cs->obs_since = now;
		cs->next_warn = now + bs->p.stall_warn;
		return;
	}
	if (!in || weft__bootstrap_status(bs) != 0)
		return;
	double waited = now - cs->obs_since;
	int timeout = bs->p.stall_timeout > 0 && waited >= bs->p.stall_timeout;
	if (!timeout && !(bs->p.stall_warn > 0 && now >= cs->next_warn))
		return;
	char what[64], list[1024];
	if (s.in_call)
		snprintf(what, sizeof(what), "call %llu", (unsigned long long)s.seq);
	else
		snprintf(what, sizeof(what), "a send/recv");
	int n = stuck_list(bs, &s, 0, list, sizeof(list));
	/* Every peer reached the call: one of them is stuck inside it; say
	 * where each is. */
	const char *lead = n ? "not reached by " : "every peer reached it: ";
	if (!n)
		stuck_list(bs, &s, 1, list, sizeof(list));
	if (timeout) {
		WEFT_ERROR("%s waited %.1f s, past core.stall_timeout (%g s): %s%s; the communicator fails on every "
			   "rank with -ETIMEDOUT",
			   what, waited, bs->p.stall_timeout, lead, list);
		fail_with(bs, -ETIMEDOUT);
		return;
	}
	WEFT_WARN("%s has waited %.1f s: %s%s", what, waited, lead, list);
	cs->next_warn = now + bs->p.stall_warn;
}

void weft__bootstrap_where(struct weft__bootstrap *bs, char *buf, size_t len)
{
	struct cs_snap s;
	snap(bs, -1, &s);
	size_t k = 0;
	int m;
	pthread_mutex_lock(&bs->mu);
	double in_state = weft__bs_now_s() - bs->cs.obs_since;
	int st = weft__bootstrap_status(bs);
	/* "allreduce float32 sum": the decoded signature without its number
	 * and count hash, which the line gives in full. */
	char desc[128], *sig = desc;
	weft_kit_sig_describe(s.sig, desc, sizeof(desc));
	char *colon = strstr(desc, ": "), *hash = strstr(desc, ", count #");
	if (colon)
		sig = colon + 2;
	if (hash)
		*hash = '\0';
	if (st)
		m = snprintf(buf, len, "  failed: %s\n", weft_kit_errname(st));
	else if (s.in_call)
		m = snprintf(buf, len, "  in call %llu (%s, count %llu) for %.1f s\n", (unsigned long long)s.seq, sig,
			     (unsigned long long)s.count, in_state);
	else if (s.in_p2p)
		m = snprintf(buf, len, "  in a send/recv for %.1f s\n", in_state);
	else
		m = snprintf(buf, len, "  not in weft for %.1f s (after call %llu)\n", in_state,
			     (unsigned long long)s.seq);
	k = m > 0 && (size_t)m < len ? (size_t)m : len;
	for (int i = 0; i < bs->nranks && k < len; i++) {
		const struct bs_peer_state *ps = &bs->peers[i].cs;
		if (i == bs->rank)
			continue;
		char w[96] = "no heartbeat yet";
		if (bs->peers[i].gone)
			snprintf(w, sizeof(w), "gone");
		else if (ps->have)
			where(ps, w, sizeof(w));
		m = snprintf(buf + k, len - k, "  rank %d: %s\n", i, w);
		k = m > 0 && (size_t)m < len - k ? k + (size_t)m : len;
	}
	pthread_mutex_unlock(&bs->mu);
}

void weft__bs_cs_check_peer(struct weft__bootstrap *bs, int peer)
{
	struct peer *pe = &bs->peers[peer];
	if (peer != bs->rank && pe->up && pe->cs.have && weft__bootstrap_status(bs) == 0)
		check_peer(bs, peer);
}

void weft__bs_cs_check(struct weft__bootstrap *bs, double now)
{
	stall_check(bs, now);
	for (int i = 0; i < bs->nranks && weft__bootstrap_status(bs) == 0; i++) {
		struct peer *pe = &bs->peers[i];
		if (i != bs->rank && pe->up && pe->cs.have)
			check_peer(bs, i);
	}
}
