#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# plangen: writes weft's own MSCCL++ 0.9 execution plans (algo-plan, issue 31)
# into a folder. The output is committed under plugins/algo-plan/plans/ and CI
# regenerates it and compares (tests/plan.cmake, plangen_fresh), so this file
# is the source and the JSON files are its build product.
#
# Usage: plangen.py --out DIR   writes every plan into DIR
#        plangen.py --list      prints the file names
#
# Each plan runs every rank as LANES threadblocks. Lane l owns the chunks
# x * LANES + l of every buffer and its own channel to each peer (the l-th of
# connected_to), so the lanes never share a semaphore and the algorithm is
# written once, for one lane, in single-lane chunk numbers.
#
# Every plan keeps these rules, because ranks run calls back to back without
# a barrier between them and semaphores and scratch last from call to call:
# - Simple: a rank writes into a peer's buffers, or reads its input, only
#   after the peer has signalled that it is in the same call, and the peer
#   returns only after the signal that follows the last such access. Each
#   signal is waited for in its own call.
# - LL: packets carry the call's flag, so data needs no signal. Scratch
#   halves alternate per call (use_double_scratch_buffer), and each rank hears
#   from every other in each call, so no rank is two calls ahead of one whose
#   scratch it writes.
# - Port channels: a last flush, so that no put still reads a buffer the
#   call hands back.
import argparse
import json
import os
import sys

LANES = 2
MEM, PORT = "memory", "port"
SIMPLE, LL = "Simple", "LL"
MAX_SIZE = 2**64 - 1
# One-shot LL sends the whole message to every peer as packets, twice its
# size, into scratch that is doubled again for alternating calls.
ONESHOT_LL_MAX = 1 << 20


class Rank:
    """One entry of 'gpus': its channels (one per peer and lane, lane-major,
    so a lane's channel to a peer is the lane-th occurrence of the peer, which
    pairs it with the peer's channel of the same lane) and remote buffers."""

    def __init__(self, rid, peers, kind):
        self.id = rid
        self.peers = sorted(peers)
        self.kind = kind
        self.rbufs = []
        self.tbs = []

    def chan(self, peer, lane):
        return lane * len(self.peers) + self.peers.index(peer)

    def rbuf(self, peer, btype):
        key = (peer, btype)
        if key not in self.rbufs:
            self.rbufs.append(key)
        return self.rbufs.index(key)

    def to_json(self, chunks):
        return {
            "id": self.id,
            "input_chunks": chunks[0],
            "output_chunks": chunks[1],
            "scratch_chunks": chunks[2],
            "channels": [{"channel_type": self.kind,
                          "connected_to": self.peers * LANES}],
            "remote_buffers": [{"rank": p, "type": t, "access_channel_types": [self.kind]}
                               for p, t in self.rbufs],
            "semaphores": [],
            "threadblocks": [tb.to_json() for tb in self.tbs],
        }


class TB:
    """One threadblock, running one lane. Its methods take single-lane chunk
    numbers. It puts a nop (__syncthreads on a GPU) where the DSL would: after
    a wait, before a signal that follows data, and between ops whose local
    accesses conflict, since consecutive ops split the work among threads
    differently."""

    def __init__(self, rank, lane):
        self.rank = rank
        self.lane = lane
        self.kind = rank.kind
        self.chans = []
        self.rrefs = []
        self.ops = []
        self.acc = []
        self.dirty = False
        self.waited = False

    def x(self, chunk):
        return chunk * LANES + self.lane

    def ch(self, peer):
        c = self.rank.chan(peer, self.lane)
        if c not in self.chans:
            self.chans.append(c)
        return self.chans.index(c)

    def loc(self, btype, chunk):
        return {"type": btype, "index": self.x(chunk), "size": 1}

    def rem(self, peer, btype, chunk):
        b = self.rank.rbuf(peer, btype)
        if b not in self.rrefs:
            self.rrefs.append(b)
        return {"buffer_id": self.rrefs.index(b), "index": self.x(chunk), "size": 1}

    def _span(self, ref):
        # A packet slot of scratch takes twice the bytes of a plain chunk.
        btype, chunk, pkt = ref
        i = self.x(chunk)
        return (btype, 2 * i, 2 * i + 2) if pkt else (btype, i, i + 1)

    def _conflicts(self, reads, writes):
        new = [(self._span(r), False) for r in reads] + [(self._span(w), True) for w in writes]
        for (b, lo, hi), w in new:
            for (b2, lo2, hi2), w2 in self.acc:
                if b == b2 and lo < hi2 and lo2 < hi and (w or w2):
                    return True
        return False

    def nop(self):
        self.ops.append({"name": "nop"})
        self.acc = []
        self.dirty = self.waited = False

    def _data(self, op, reads=(), writes=()):
        if self.waited or self._conflicts(reads, writes):
            self.nop()
        self.ops.append(op)
        self.acc += [(self._span(r), False) for r in reads] + [(self._span(w), True) for w in writes]
        self.dirty = True

    def _sync(self, name, peers):
        if name != "wait" and self.dirty:
            self.nop()
        self.ops.append({"name": name, "channel_type": self.kind,
                         "channel_ids": [self.ch(p) for p in peers]})
        if name == "wait":
            self.waited = True

    def signal(self, peers):
        self._sync("signal", peers)

    def wait(self, peers):
        self._sync("wait", peers)

    def flush(self, peers):
        self._sync("flush", peers)

    def put(self, src, dsts, name="put"):
        """put, pws, ppkt or rppkt of local src (btype, chunk) to dsts
        [(peer, btype, chunk)]. rppkt, and ppkt on port channels, read
        packets already in scratch; ppkt on memory channels reads plain
        data and writes packets."""
        op = {"name": name, "channel_type": self.kind}
        if self.kind == PORT:
            op["channel_ids"] = [self.ch(p) for p, _, _ in dsts]
        nsrc = 1 if name == "rppkt" else len(dsts)
        op["src_buff"] = [self.loc(*src)] * nsrc
        op["dst_buff"] = [self.rem(*d) for d in dsts]
        src_pkt = name == "rppkt" or (name == "ppkt" and self.kind == PORT)
        self._data(op, reads=[src + (src_pkt,)])

    def local(self, name, srcs, dsts, pkt_srcs=(), pkt_dsts=(), rdsts=(), rsrcs=()):
        """An op on local buffers: srcs and dsts plain (btype, chunk),
        pkt_srcs and pkt_dsts scratch packet slots, rsrcs and rdsts a
        peer's (peer, btype, chunk)."""
        op = {"name": name}
        if rdsts or rsrcs:
            op["channel_type"] = MEM
        op["src_buff"] = ([self.loc(*s) for s in srcs] + [self.loc("s", k) for k in pkt_srcs] +
                          [self.rem(*s) for s in rsrcs])
        op["dst_buff"] = ([self.loc(*d) for d in dsts] + [self.loc("s", k) for k in pkt_dsts] +
                          [self.rem(*d) for d in rdsts])
        reads = [s + (False,) for s in srcs] + [("s", k, True) for k in pkt_srcs]
        writes = [d + (False,) for d in dsts] + [("s", k, True) for k in pkt_dsts]
        self._data(op, reads, writes)

    def to_json(self):
        tb = {"id": self.rank.tbs.index(self), "channels": [], "remote_buffer_refs": []}
        if self.chans:
            tb["channels"] = [{"channel_type": self.kind, "channel_ids": self.chans}]
        if self.rrefs:
            tb["remote_buffer_refs"] = [{"access_channel_type": self.kind,
                                         "remote_buffer_ids": self.rrefs}]
        tb["ops"] = self.ops
        return tb


# The algorithms, one lane of rank r of n each. prv and nxt are the ring
# neighbours; "others" are the peers in ring order of distance.

def ring(r, n):
    return (r - 1) % n, (r + 1) % n


def others(r, n):
    return [(r + d) % n for d in range(1, n)]


def slot(q, p, n):
    """The scratch slot at rank p that peer q writes: q's distance from p."""
    return (q - p - 1) % n


def allreduce_ring(tb, r, n, proto):
    """Reduce-scatter then allgather around the ring. Rank r ends the
    reduce-scatter owning chunk r+1 and starts the allgather with it.
    Simple: partial sums go into the next rank's scratch, one slot per
    step, and the allgather writes the next rank's output; every put is
    followed by a signal. LL: the same as packets, forwarded from scratch,
    with a second set of slots for the allgather."""
    prv, nxt = ring(r, n)
    port = tb.kind == PORT
    if proto == SIMPLE:
        # Ready: the next rank writes into our scratch and output only once
        # we are in the same call.
        tb.signal([prv])
        tb.wait([nxt])
        send = "pws" if port else "put"
        tb.put(("i", r), [(nxt, "s", 0)], send)
        if not port:
            tb.signal([nxt])
        for s in range(1, n):
            x = (r - s) % n
            dst = (nxt, "s", s) if s < n - 1 else (nxt, "o", x)
            tb.wait([prv])
            if port:
                tb.local("re", [("i", x), ("s", s - 1)], [("o", x)])
                tb.put(("o", x), [dst], "pws")
            else:
                tb.local("res", [("i", x), ("s", s - 1)], [("o", x)], rdsts=[dst])
                tb.signal([nxt])
        for t in range(1, n - 1):
            y = (r + 1 - t) % n
            tb.wait([prv])
            tb.put(("o", y), [(nxt, "o", y)], send)
            if not port:
                tb.signal([nxt])
        tb.wait([prv])
        if port:
            tb.flush([nxt])
        return
    ag = n - 1  # allgather slots
    st = 2 * (n - 1)  # port: our own packets, staged for the proxy to put
    if port:
        tb.local("cpkt", [("i", r)], [], pkt_dsts=[st])
        tb.put(("s", st), [(nxt, "s", 0)], "ppkt")
    else:
        tb.put(("i", r), [(nxt, "s", 0)], "ppkt")
    for s in range(1, n):
        x = (r - s) % n
        to = s if s < n - 1 else ag
        if port:
            tb.local("recpkt", [("i", x)], [("o", x)], pkt_srcs=[s - 1], pkt_dsts=[st + s])
            tb.put(("s", st + s), [(nxt, "s", to)], "ppkt")
        else:
            tb.local("respkt", [("i", x)], [("o", x)], pkt_srcs=[s - 1], rdsts=[(nxt, "s", to)])
    for t in range(1, n - 1):
        y = (r + 1 - t) % n
        tb.put(("s", ag + t - 1), [(nxt, "s", ag + t)], "rppkt")
        tb.local("upkt", [], [("o", y)], pkt_srcs=[ag + t - 1])
    tb.local("upkt", [], [("o", (r + 2) % n)], pkt_srcs=[ag + n - 2])
    if port:
        # Our staged packets stay in scratch until the proxy has read them.
        tb.flush([nxt])


def allreduce_oneshot(tb, r, n, proto):
    """Every rank gets every peer's whole input and reduces all of them.
    Simple on memory channels reads the peers' inputs in place (rre) between
    two barriers; on port channels each rank puts its input into every
    peer's scratch. LL sends packets to every peer's scratch."""
    peers = others(r, n)
    port = tb.kind == PORT
    mine = [slot(q, r, n) for q in peers]
    theirs = [(p, "s", slot(r, p, n)) for p in peers]
    if proto == SIMPLE:
        tb.signal(peers)
        tb.wait(peers)
        if port:
            tb.put(("i", 0), theirs, "pws")
            tb.wait(peers)
            tb.local("re", [("i", 0)] + [("s", k) for k in mine], [("o", 0)])
            tb.flush(peers)
        else:
            tb.local("rre", [("i", 0)], [("o", 0)], rsrcs=[(p, "i", 0) for p in peers])
            # The peers read our input until they signal this.
            tb.signal(peers)
            tb.wait(peers)
        return
    if port:
        st = n - 1
        tb.local("cpkt", [("i", 0)], [], pkt_dsts=[st])
        tb.put(("s", st), theirs, "ppkt")
    else:
        tb.put(("i", 0), theirs, "ppkt")
    tb.local("repkt", [("i", 0)], [("o", 0)], pkt_srcs=mine)
    if port:
        tb.flush(peers)


def allgather_ring(tb, r, n, proto):
    """Rank r puts its chunk to the next rank, which passes on what it got
    from the previous one: Simple straight into the next rank's output with
    a signal after each put, LL as packets forwarded from scratch."""
    prv, nxt = ring(r, n)
    if proto == SIMPLE:
        tb.signal([prv])
        tb.wait([nxt])
        tb.local("copy", [("i", 0)], [("o", r)])
        tb.put(("i", 0), [(nxt, "o", r)])
        tb.signal([nxt])
        for t in range(1, n - 1):
            y = (r - t) % n
            tb.wait([prv])
            tb.put(("o", y), [(nxt, "o", y)])
            tb.signal([nxt])
        tb.wait([prv])
        return
    tb.put(("i", 0), [(nxt, "s", 0)], "ppkt")
    tb.local("copy", [("i", 0)], [("o", r)])
    for t in range(1, n - 1):
        tb.put(("s", t - 1), [(nxt, "s", t)], "rppkt")
        tb.local("upkt", [], [("o", (r - t) % n)], pkt_srcs=[t - 1])
    tb.local("upkt", [], [("o", (r + 1) % n)], pkt_srcs=[n - 2])


def reducescatter_ring(tb, r, n, proto):
    """The reduce-scatter half of the ring allreduce, shifted by one so that
    rank r ends with chunk r. Simple keeps each partial sum in a scratch slot
    of its own and puts it into the next rank's scratch; LL sends it as
    packets and keeps the plain partial in the output, which the last step
    overwrites with the result."""
    prv, nxt = ring(r, n)
    first = (r - 1) % n
    if proto == SIMPLE:
        part = n - 1  # partial sums, after the n-1 slots the previous rank writes
        tb.signal([prv])
        tb.wait([nxt])
        tb.put(("i", first), [(nxt, "s", 0)])
        tb.signal([nxt])
        for s in range(1, n - 1):
            x = (r - 1 - s) % n
            tb.wait([prv])
            tb.local("res", [("i", x), ("s", s - 1)], [("s", part + s - 1)], rdsts=[(nxt, "s", s)])
            tb.signal([nxt])
        tb.wait([prv])
        tb.local("re", [("i", r), ("s", n - 2)], [("o", 0)])
        return
    tb.put(("i", first), [(nxt, "s", 0)], "ppkt")
    for s in range(1, n - 1):
        x = (r - 1 - s) % n
        tb.local("respkt", [("i", x)], [("o", 0)], pkt_srcs=[s - 1], rdsts=[(nxt, "s", s)])
    tb.local("repkt", [("i", r)], [("o", 0)], pkt_srcs=[n - 2])


def alltoall_ring(tb, r, n, proto):
    """Rank r sends its block p to each peer p, nearest first, and keeps its
    own: Simple straight into the peer's output block r with a signal after
    each put, LL as packets into the peer's scratch, unpacked there."""
    peers = others(r, n)
    senders = [(r - d) % n for d in range(1, n)]
    if proto == SIMPLE:
        tb.signal(peers)
        tb.wait(peers)
        tb.local("copy", [("i", r)], [("o", r)])
        for p in peers:
            tb.put(("i", p), [(p, "o", r)])
            tb.signal([p])
        tb.wait(senders)
        return
    for p in peers:
        tb.put(("i", p), [(p, "s", slot(r, p, n))], "ppkt")
    tb.local("copy", [("i", r)], [("o", r)])
    for q in senders:
        tb.local("upkt", [], [("o", q)], pkt_srcs=[slot(q, r, n)])


# The (input, output, scratch) chunks of one lane, as the builders above
# number them.
def _ar_ring_chunks(n, proto, kind):
    return n, n, (n - 1) if proto == SIMPLE else 2 * (n - 1) + (n if kind == PORT else 0)


def _ar_oneshot_chunks(n, proto, kind):
    if proto == SIMPLE:
        return 1, 1, 0 if kind == MEM else n - 1
    return 1, 1, n if kind == PORT else n - 1


def _ag_chunks(n, proto, kind):
    return 1, n, 0 if proto == SIMPLE else n - 1


def _rs_chunks(n, proto, kind):
    return n, 1, (2 * n - 3) if proto == SIMPLE else n - 1


def _a2a_chunks(n, proto, kind):
    return n, n, 0 if proto == SIMPLE else n - 1


# The peers a rank has channels to: its ring neighbours, or every other rank.
def _ring_peers(r, n):
    return set(ring(r, n))


def _all_peers(r, n):
    return set(others(r, n))


# collective, algorithm, builder, rank counts, channel kinds, chunks, peers
FAMILIES = [
    ("allreduce", "ring", allreduce_ring, (2, 3, 4, 8), (MEM, PORT), _ar_ring_chunks, _ring_peers),
    ("allreduce", "oneshot", allreduce_oneshot, (2, 3, 4, 8), (MEM, PORT), _ar_oneshot_chunks, _all_peers),
    ("allgather", "ring", allgather_ring, (2, 4, 8), (MEM,), _ag_chunks, _ring_peers),
    ("reducescatter", "ring", reducescatter_ring, (2, 4, 8), (MEM,), _rs_chunks, _ring_peers),
    ("alltoall", "ring", alltoall_ring, (2, 4, 8), (MEM,), _a2a_chunks, _all_peers),
]

KIND_TAG = {MEM: "mem", PORT: "port"}


def plans():
    """Every plan as (file name, JSON object), in a fixed order."""
    out = []
    for coll, algo, build, sizes, kinds, chunks, peers in FAMILIES:
        for n in sizes:
            for proto in (SIMPLE, LL):
                for kind in kinds:
                    name = "%s_%s_%dr_%s_%s" % (coll, algo, n, proto.lower(), KIND_TAG[kind])
                    lane_chunks = chunks(n, proto, kind)
                    ranks = []
                    for r in range(n):
                        rank = Rank(r, peers(r, n), kind)
                        for lane in range(LANES):
                            tb = TB(rank, lane)
                            build(tb, r, n, proto)
                            rank.tbs.append(tb)
                        ranks.append(rank)
                    top = {
                        "name": name,
                        "collective": coll,
                        "protocol": proto,
                        "inplace": False,
                        "reuse_resources": False,
                        "use_double_scratch_buffer": proto == LL,
                        "num_threads_per_block": 1024,
                        "buffer_alignment": 16,
                        "min_message_size": 0,
                        "max_message_size": ONESHOT_LL_MAX if (algo, proto) == ("oneshot", LL) else MAX_SIZE,
                        "gpus": [rk.to_json(tuple(c * LANES for c in lane_chunks)) for rk in ranks],
                    }
                    out.append((name + ".json", top))
    return out


def dump(v, indent=0, width=100):
    """JSON with one line per value that fits in width, so that an op or a
    buffer reference reads on one line; deterministic for a given object."""
    flat = json.dumps(v, separators=(", ", ": "))
    if not isinstance(v, (dict, list)) or len(flat) + indent <= width or not v:
        return flat
    pad = " " * (indent + 1)
    if isinstance(v, dict):
        # Nested values are indented from the line's start, not the key's.
        items = ["%s%s: %s" % (pad, json.dumps(k), dump(x, indent + 1, width)) for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + dump(x, indent + 1, width) for x in v]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def main():
    ap = argparse.ArgumentParser(description="Write weft's own MSCCL++ 0.9 execution plans.")
    ap.add_argument("--out", metavar="DIR", help="folder to write every plan into (created if missing)")
    ap.add_argument("--list", action="store_true", help="print the file names")
    args = ap.parse_args()
    if not args.out and not args.list:
        ap.error("give --out DIR or --list")
    all_plans = plans()
    if args.list:
        for fname, _ in all_plans:
            print(fname)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for fname, obj in all_plans:
            with open(os.path.join(args.out, fname), "w", encoding="utf-8", newline="\n") as f:
                f.write(dump(obj) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
