/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugins/algo-plan's JSON reader and plan loader: MSCCL++
 * 0.9's own plan files (tests/data/mscclpp-0.9-plans/), checked against
 * counts read from the files here; malformed JSON and inconsistent plans,
 * each refused with a message that names the problem and where it is; and a
 * failed allocation at every step of a load, which must free all it took. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "plan.h"
#include "wp_sha256.h"
#include "testlib.h"

#ifndef PLAN_DATA_DIR
#error "PLAN_DATA_DIR (the folder of MSCCL++'s plan files) must be defined by the build"
#endif

static char *data_path(const char *file)
{
	char *p;
	ck_assert_int_ge(asprintf(&p, "%s/%s", PLAN_DATA_DIR, file), 0);
	return p;
}

/* Occurrences of needle in the text: counts read from the file itself. */
static unsigned count_text(const char *text, const char *needle)
{
	unsigned n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static unsigned count_kind(const struct wp_op *ops, uint32_t n, enum wp_op_kind kind)
{
	unsigned c = 0;
	for (uint32_t k = 0; k < n; k++)
		c += (ops[k].kind == kind) + count_kind(ops[k].ops, ops[k].nops, kind);
	return c;
}

static const struct plan_file {
	const char *file;
	const char *sha256; /* as sha256sum prints it */
	const char *collective;
	int protocol, nranks, tbs;
	const char *op; /* an operation and how many times the plan has it (read with jq) */
	unsigned op_count;
	const char *refused_at; /* for the multicast plans: where the first glres is */
} plan_files[] = {
	{"allreduce.json", "a97535cccba7172a8b06487e5dd7c6d12c2d4c8cd09ec0968d1be3ac313d6fef", "allreduce",
	 WP_PROTO_SIMPLE, 2, 16, "rres", 16, NULL},
	{"allreduce_packet.json", "9117bc5dd2668024d12499c6d1bc3cb36dcfed5227890c9bd790bbf75f4ad2b8", "allreduce",
	 WP_PROTO_LL, 2, 4, "respkt", 4, NULL},
	{"allreduce_pipeline.json", "791618445b4a14566cd516eb350dd7af1f9e3cee8e1dce2e0144bbab68860419", NULL, 0, 0, 0,
	 NULL, 0, "rank 0, threadblock 1, op 0.2"},
	{"reduce.json", "7814a69c07ad1d688a840dd468c2ea9022bd34178ed31c2dafe85cf7e358d55d", "allreduce",
	 WP_PROTO_SIMPLE, 2, 2, "copy", 3, NULL},
	{"reduce_nvls.json", "faf4d0804573024321215c384d26e4817a06d1d0b324efb810441023a05a4006", NULL, 0, 0, 0, NULL, 0,
	 "rank 0, threadblock 0, op 5"},
	{"reduce_nvls_pipeline.json", "c395ce1319061fe29065144de636d99192f3c3025cd79f41781ff18878658d94", NULL, 0, 0, 0,
	 NULL, 0, "rank 0, threadblock 0, op 5.0"},
	{"reduce_pack.json", "a892629b28c7c25493a7c21ea9daeabe1a7864a4940878ed1e448b2289663f0b", "allreduce",
	 WP_PROTO_LL, 2, 6, "recspkt", 1, NULL},
	{"reduce_pack_tbg.json", "80e4aa7130036a597d3b42930576f7fed38d969a16a8a0b82c53297fb3c2a9f0", "allreduce",
	 WP_PROTO_LL, 2, 12, "ppkt", 4, NULL},
	{"reduce_tbg.json", "6fa6018e7571015e533b22625c38c65949b6a2f54c9a3940b91d95376eee4be8", "allreduce",
	 WP_PROTO_SIMPLE, 2, 4, "nop", 30, NULL},
	{"transfer_pack.json", "7e7ef4586f75ffe91d507bc6c20ff5e72c97a691ffc299e7876a5942db944dc6", "allgather",
	 WP_PROTO_LL, 2, 5, "upkt", 2, NULL},
	{"transfer_pack_tbg.json", "063ea9a70e9a16cef69ad34ee9fe06b133bfed12aa3cc9418e3399f2062a93c1", "allgather",
	 WP_PROTO_LL, 2, 10, "rppkt", 2, NULL},
};
#define NPLAN_FILES (int)(sizeof(plan_files) / sizeof(plan_files[0]))

START_TEST(data_folder_holds_the_eleven)
{
	DIR *d = opendir(PLAN_DATA_DIR);
	struct dirent *e;
	int n = 0;

	ck_assert_msg(d, "cannot open %s", PLAN_DATA_DIR);
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 5, ".json"))
			continue;
		int known = 0;
		for (int k = 0; k < NPLAN_FILES; k++)
			known |= !strcmp(plan_files[k].file, e->d_name);
		ck_assert_msg(known, "%s: a plan file the test does not know", e->d_name);
		n++;
	}
	closedir(d);
	ck_assert_int_eq(n, NPLAN_FILES);
	char *lic = data_path("LICENSE.mscclpp");
	char *text = wt_read_file(lic);
	ck_assert_msg(text && strstr(text, "MIT License"), "%s: MSCCL++'s license must stay beside its files", lic);
	free(text);
	free(lic);
}
END_TEST

/* Each of the eleven: the eight without switch channels load with what the
 * file says, and the three with them are refused, naming file and glres. */
START_TEST(mscclpp_plans)
{
	const struct plan_file *pf = &plan_files[_i];
	char *path = data_path(pf->file), err[512], hex[65];
	struct wp_plan *p = NULL;
	int rc = wp_plan_load(path, &p, err, sizeof(err));

	if (pf->refused_at) {
		ck_assert_msg(rc == -ENOTSUP, "%s: rc %d (%s), expected -ENOTSUP", pf->file, rc, err);
		ck_assert_msg(strstr(err, pf->file) && strstr(err, "'glres'") && strstr(err, "multicast") &&
				      strstr(err, pf->refused_at),
			      "%s: message does not name the file, %s and glres: %s", pf->file, pf->refused_at, err);
		free(path);
		return;
	}
	ck_assert_msg(rc == 0, "%s: %s", pf->file, err);
	char *text = wt_read_file(path);
	ck_assert_ptr_nonnull(text);

	ck_assert_str_eq(p->collective, pf->collective);
	ck_assert_int_eq(p->protocol, pf->protocol);
	ck_assert_int_eq((int)p->nranks, pf->nranks);
	/* Every file of the set is in place; read it from the text as well. */
	ck_assert_int_eq(p->inplace, count_text(text, "\"inplace\": true") == 1);
	ck_assert_int_eq(p->inplace, 1);
	ck_assert_int_eq((int)p->nranks, (int)count_text(text, "\"input_chunks\""));

	unsigned ops = 0, tbs = 0, named = 0;
	enum wp_op_kind kind = WP_OP_COUNT;
	for (int k = 0; k < WP_OP_COUNT; k++)
		if (!strcmp(wp_op_name((enum wp_op_kind)k), pf->op))
			kind = (enum wp_op_kind)k;
	ck_assert_int_ne(kind, WP_OP_COUNT);
	for (uint32_t r = 0; r < p->nranks; r++) {
		ck_assert_int_eq((int)p->ranks[r].id, (int)r);
		tbs += p->ranks[r].ntbs;
		for (uint32_t t = 0; t < p->ranks[r].ntbs; t++) {
			ops += wp_tb_op_count(&p->ranks[r].tbs[t]);
			named += count_kind(p->ranks[r].tbs[t].ops, p->ranks[r].tbs[t].nops, kind);
		}
	}
	/* Every op has a "name", and so has the plan itself. */
	ck_assert_uint_eq(ops, count_text(text, "\"name\"") - 1);
	ck_assert_uint_eq(tbs, (unsigned)pf->tbs);
	ck_assert_uint_eq(named, pf->op_count);
	char needle[64];
	snprintf(needle, sizeof(needle), "\"name\": \"%s\"", pf->op);
	ck_assert_uint_eq(named, count_text(text, needle));

	ck_assert_uint_eq(p->max_message_size, UINT64_MAX);
	ck_assert_uint_eq(p->buffer_alignment, 16);
	ck_assert_uint_eq(p->threads_per_block, 1024);
	wp_sha256_hex(p->sha256, hex);
	ck_assert_str_eq(hex, pf->sha256);
	ck_assert_str_eq(p->file, path);
	wp_plan_free(p);
	free(text);
	free(path);
}
END_TEST

/* Details of two of them, from the files. */
START_TEST(mscclpp_plan_details)
{
	char *path = data_path("transfer_pack.json"), err[512];
	struct wp_plan *p;

	ck_assert_msg(!wp_plan_load(path, &p, err, sizeof(err)), "%s", err);
	ck_assert_str_eq(p->name, "transfer_pack");
	ck_assert_int_eq(p->double_scratch, 1);
	ck_assert_int_eq(p->reuse_resources, 0);
	const struct wp_rank *r0 = &p->ranks[0], *r1 = &p->ranks[1];
	ck_assert_uint_eq(r0->chunks[WP_BUF_INPUT], 1);
	ck_assert_uint_eq(r0->chunks[WP_BUF_OUTPUT], 2);
	ck_assert_uint_eq(r0->chunks[WP_BUF_SCRATCH], 2);
	ck_assert_uint_eq(r0->peers[WP_CHAN_MEMORY].n, 1);
	ck_assert_uint_eq(r0->peers[WP_CHAN_MEMORY].v[0], 1);
	ck_assert_uint_eq(r0->peers[WP_CHAN_PORT].n, 0);
	ck_assert_uint_eq(r0->nrbufs, 1);
	ck_assert_uint_eq(r0->rbufs[0].rank, 1);
	ck_assert_int_eq(r0->rbufs[0].type, WP_BUF_SCRATCH);
	ck_assert_uint_eq(r0->rbufs[0].access, 1u << WP_CHAN_MEMORY);
	/* Rank 1, threadblock 1: rppkt from scratch chunk 1 to rank 0's scratch. */
	const struct wp_op *op = &r1->tbs[1].ops[0];
	ck_assert_int_eq(op->kind, WP_OP_RPPKT);
	ck_assert_int_eq(op->chan, WP_CHAN_MEMORY);
	ck_assert_uint_eq(op->nsrc, 1);
	ck_assert_int_eq(op->src[0].remote, 0);
	ck_assert_int_eq(op->src[0].type, WP_BUF_SCRATCH);
	ck_assert_uint_eq(op->src[0].index, 1);
	ck_assert_uint_eq(op->ndst, 1);
	ck_assert_int_eq(op->dst[0].remote, 1);
	ck_assert_uint_eq(op->dst[0].peer, 0);
	ck_assert_int_eq(op->dst[0].type, WP_BUF_SCRATCH);
	wp_plan_free(p);
	free(path);

	path = data_path("reduce_tbg.json");
	ck_assert_msg(!wp_plan_load(path, &p, err, sizeof(err)), "%s", err);
	unsigned tbg = 0;
	for (uint32_t r = 0; r < p->nranks; r++)
		for (uint32_t t = 0; t < p->ranks[r].ntbs; t++)
			for (uint32_t k = 0; k < p->ranks[r].tbs[t].nops; k++) {
				const struct wp_op *o = &p->ranks[r].tbs[t].ops[k];
				ck_assert_uint_lt(o->tbg_id, o->tbg_size);
				tbg += o->tbg_size > 1;
				if (o->kind == WP_OP_RRES)
					ck_assert_int_eq(o->reduce, WP_REDUCE_SUM);
			}
	char *text = wt_read_file(path);
	ck_assert_uint_eq(tbg, count_text(text, "\"tbg_info\""));
	free(text);
	wp_plan_free(p);
	free(path);
}
END_TEST

/* Two ranks that copy their input into their output and put it into the
 * peer's; rank 0 also uses its semaphore, rank 1 a barrier and a pipeline.
 * Markers such as "index": 1 in rank 1's put keep each mutation below to the
 * place it names. */
static const char base_plan[] =
	"{\n"
	"  \"name\": \"t\", \"collective\": \"allgather\", \"protocol\": \"Simple\", \"inplace\": false,\n"
	"  \"gpus\": [\n"
	"    {\"id\": 0, \"input_chunks\": 1, \"output_chunks\": 2, \"scratch_chunks\": 1,\n"
	"     \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [1]}],\n"
	"     \"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}],\n"
	"     \"semaphores\": [{\"init_value\": 0}],\n"
	"     \"threadblocks\": [{\"id\": 0,\n"
	"       \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}],\n"
	"       \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
	"       \"ops\": [\n"
	"         {\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}],"
	" \"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]},\n"
	"         {\"name\": \"put\", \"channel_type\": \"memory\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, "
	"\"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, \"size\": 1}]},\n"
	"         {\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]},\n"
	"         {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]},\n"
	"         {\"name\": \"sem_release\", \"semaphore_ids\": [0]},\n"
	"         {\"name\": \"sem_acquire\", \"semaphore_ids\": [0]}]}]},\n"
	"    {\"id\": 1, \"input_chunks\": 1, \"output_chunks\": 2, \"scratch_chunks\": 0,\n"
	"     \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [0]}],\n"
	"     \"remote_buffers\": [{\"rank\": 0, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}],\n"
	"     \"threadblocks\": [{\"id\": 0,\n"
	"       \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}],\n"
	"       \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
	"       \"ops\": [\n"
	"         {\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}],"
	" \"dst_buff\": [{\"type\": \"o\", \"index\": 1, \"size\": 1}]},\n"
	"         {\"name\": \"put\", \"channel_type\": \"memory\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, "
	"\"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 1, \"size\": 1}]},\n"
	"         {\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]},\n"
	"         {\"name\": \"barrier\", \"barrier_id\": 0, \"num_threadblocks\": 1},\n"
	"         {\"name\": \"pipeline\", \"iter_context\": {\"unit_size\": 1048576, \"num_chunks\": 1},"
	" \"ops\": [{\"name\": \"nop\"}, {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]}]}"
	"]}]}\n"
	"  ],\n"
	"  \"min_message_size\": 0, \"max_message_size\": 18446744073709551615\n"
	"}\n";

/* base_plan with the first `from` (rank 0's where both ranks have it)
 * replaced by `to`. */
static char *mutate(const char *from, const char *to)
{
	const char *at = strstr(base_plan, from);
	ck_assert_msg(at, "the base plan has no %s", from);
	char *s;
	ck_assert_int_ge(asprintf(&s, "%.*s%s%s", (int)(at - base_plan), base_plan, to, at + strlen(from)), 0);
	return s;
}

START_TEST(base_plan_loads)
{
	struct wp_plan *p;
	char err[512];
	int rc = wp_plan_load_mem("base.json", base_plan, strlen(base_plan), &p, err, sizeof(err));

	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_str_eq(p->file, "base.json");
	ck_assert_str_eq(p->collective, "allgather");
	ck_assert_int_eq(p->inplace, 0);
	ck_assert_uint_eq(p->buffer_alignment, 16); /* the defaults of what is left out */
	ck_assert_uint_eq(p->threads_per_block, 1024);
	ck_assert_int_eq(p->reuse_resources, 0);
	ck_assert_uint_eq(p->ranks[0].nsems, 1);
	ck_assert_uint_eq(p->ranks[1].nsems, 0);
	ck_assert_uint_eq(wp_tb_op_count(&p->ranks[1].tbs[0]), 7);
	const struct wp_op *pl = &p->ranks[1].tbs[0].ops[4];
	ck_assert_int_eq(pl->kind, WP_OP_PIPELINE);
	ck_assert_uint_eq(pl->unit_size, 1048576);
	ck_assert_uint_eq(pl->nops, 2);
	ck_assert_int_eq(pl->ops[1].kind, WP_OP_WAIT);
	const struct wp_op *put = &p->ranks[1].tbs[0].ops[1];
	ck_assert_int_eq(put->dst[0].remote, 1);
	ck_assert_uint_eq(put->dst[0].peer, 0);
	ck_assert_uint_eq(put->dst[0].index, 1);
	ck_assert_int_eq(p->ranks[1].tbs[0].ops[3].kind, WP_OP_BARRIER);
	unsigned char d[32];
	wp_sha256(base_plan, strlen(base_plan), d);
	ck_assert_mem_eq(d, p->sha256, 32);
	wp_plan_free(p);
	wp_plan_free(NULL);
}
END_TEST

/* Malformed JSON: each refused with -EINVAL, where and what. */
static const struct bad_json {
	const char *text;
	const char *msg; /* in the message, after "FILE:" */
} bad_json[] = {
	{"", "1:1: expected a value, found the end of the input"},
	{"{\"name\": \"t\",", "1:14: expected a string (an object key), found the end of the input"},
	{"{\"name\": \"t", "1:12: the input ends inside the string that starts at line 1, column 10"},
	{"[1, 2", "1:6: expected ',' or ']' after an array element, found the end of the input"},
	{"{\"a\": [1,]}", "1:10: expected a value"},
	{"{\"a\" 1}", "1:6: expected ':' after the key \"a\", found '1'"},
	{"{\"a\": 1 \"b\": 2}", "expected ',' or '}' after an object member, found '\"'"},
	{"{\"a\": 1} x", "1:10: expected the end of the input after the top-level value, found 'x'"},
	{"{\"a\": 1, \"a\": 2}", "duplicate key \"a\" in an object (first at line 1, column 7)"},
	{"{\n  \"s\": \"a\\qb\"\n}", "2:10: invalid escape '\\q'"},
	{"\"\\u12G4\"", "expected 4 hex digits after \\u, found 'G'"},
	{"\"\\uDC00\"", "a low surrogate without a high one before it"},
	{"\"\\uD800x\"", "a high surrogate must be followed by a \\uDC00-\\uDFFF low surrogate"},
	{"\"\\uD800\\u0041\"", "\\uD800\\u0041: a high surrogate must be followed"},
	{"\"a\tb\"", "1:3: control character U+0009 inside a string"},
	{"\"a\nb\"", "control character U+000A inside a string"},
	{"\"\xff\"", "invalid UTF-8 byte 0xFF inside a string"},
	{"\"\xc0\xaf\"", "invalid UTF-8 byte 0xC0"},     /* overlong '/' */
	{"\"\xed\xa0\x80\"", "invalid UTF-8 byte 0xED"}, /* a surrogate in UTF-8 */
	{"{\"x\": 18446744073709551616}", "1:7: integer 18446744073709551616 is out of range (more than 64 bits)"},
	{"[-9223372036854775809]", "integer -9223372036854775809 is out of range (below -2^63)"},
	{"[1e999]", "number 1e999 is out of range (beyond a double)"},
	{"[01]", "a number cannot have a leading zero"},
	{"[-]", "expected a digit after '-', found ']'"},
	{"[1.]", "expected a digit after the decimal point"},
	{"[1e+]", "expected a digit in the exponent"},
	{"[tru]", "expected 'true'"},
	{"[nul", "expected 'null'"},
	{"[+1]", "expected a value (an object, array, string, number, true, false or null), found '+'"},
	{"{\"a\": 1}\0", "found byte 0x00"},
	{"[1]\n\n   ]", "3:4: expected the end of the input"},
};

START_TEST(malformed_json)
{
	const struct bad_json *b = &bad_json[_i];
	size_t len = strlen(b->text) + (strstr(b->msg, "byte 0x00") ? 1 : 0);
	struct wp_plan *p = (void *)0x1;
	char err[512];
	int rc = wp_plan_load_mem("bad.json", b->text, len, &p, err, sizeof(err));

	ck_assert_msg(rc == -EINVAL, "case %d: rc %d (%s)", _i, rc, err);
	ck_assert_ptr_eq(p, (void *)0x1);
	ck_assert_msg(!strncmp(err, "bad.json:", 9) && strstr(err, b->msg), "case %d: \"%s\" lacks \"%s\"", _i, err,
		      b->msg);
}
END_TEST

/* Nesting: 64 levels parse, 65 do not; the limits of struct wp_json_limits. */
START_TEST(json_limits)
{
	char deep[2 * 65 + 1];
	struct wp_json *v;
	struct wp_json_error e;

	memset(deep, '[', 64);
	memset(deep + 64, ']', 64);
	ck_assert_int_eq(wp_json_parse(deep, 128, NULL, &v, &e), 0);
	wp_json_free(v);
	memset(deep, '[', 65);
	memset(deep + 65, ']', 65);
	ck_assert_int_eq(wp_json_parse(deep, 130, NULL, &v, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "nested more than 64 deep") && e.col == 65, "%u: %s", e.col, e.msg);

	/* The same through the loader: an array inside a rank's object, which
	 * is itself three levels down. */
	char nest[2 * 62 + 64];
	memset(nest, '[', 62);
	memset(nest + 62, ']', 62);
	nest[124] = 0;
	char to[256];
	snprintf(to, sizeof(to), "\"scratch_chunks\": 1, \"x\": %s", nest);
	char *plan = mutate("\"scratch_chunks\": 1", to);
	char err[512];
	struct wp_plan *p;
	ck_assert_int_eq(wp_plan_load_mem("deep.json", plan, strlen(plan), &p, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "deep.json:4:") && strstr(err, "nested more than 64 deep"), "%s", err);
	free(plan);

	struct wp_json_limits lim = {.max_bytes = 8};
	ck_assert_int_eq(wp_json_parse("[1, 2, 3]", 9, &lim, &v, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "9 bytes, more than the limit of 8"), "%s", e.msg);
	lim = (struct wp_json_limits){.max_values = 3};
	ck_assert_int_eq(wp_json_parse("[1, 2]", 6, &lim, &v, &e), 0);
	wp_json_free(v);
	ck_assert_int_eq(wp_json_parse("[1, 2, 3]", 9, &lim, &v, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "more than 3 values") && e.col == 8, "%u: %s", e.col, e.msg);
	lim = (struct wp_json_limits){.max_depth = 2};
	ck_assert_int_eq(wp_json_parse("{\"a\": [{}]}", 11, &lim, &v, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "nested more than 2 deep"), "%s", e.msg);
}
END_TEST

/* What the reader gives: numbers at the edges of 64 bits, strings with
 * escapes decoded to UTF-8, positions of values, a byte-order mark. */
START_TEST(json_values)
{
	static const char text[] = "\xef\xbb\xbf{\"i\": [-9223372036854775808, 9223372036854775807,\n"
				   " 18446744073709551615, -0, 1.5e3, 0.25],\n"
				   "  \"s\": \"\\u00e9\\ud83d\\ude00\\/\\\"\\\\\\b\\f\\n\\r\\t\xc3\xa9\",\n"
				   "  \"z\": \"a\\u0000b\", \"t\": true, \"f\": false, \"n\": null}";
	struct wp_json *v;
	struct wp_json_error e;

	ck_assert_msg(!wp_json_parse(text, sizeof(text) - 1, NULL, &v, &e), "%u:%u: %s", e.line, e.col, e.msg);
	const struct wp_json *i = wp_json_get(v, "i");
	ck_assert_int_eq(i->type, WP_JSON_ARRAY);
	ck_assert_int_eq(i->arr.n, 6);
	ck_assert_int_eq(i->arr.v[0]->type, WP_JSON_INT);
	ck_assert(i->arr.v[0]->i == INT64_MIN);
	ck_assert(i->arr.v[1]->i == INT64_MAX);
	ck_assert_int_eq(i->arr.v[2]->type, WP_JSON_UINT);
	ck_assert(i->arr.v[2]->u == UINT64_MAX);
	ck_assert_int_eq(i->arr.v[2]->line, 2);
	ck_assert_int_eq(i->arr.v[2]->col, 2);
	ck_assert(i->arr.v[3]->type == WP_JSON_INT && i->arr.v[3]->i == 0);
	ck_assert(i->arr.v[4]->type == WP_JSON_DOUBLE && i->arr.v[4]->d == 1500.0);
	ck_assert(i->arr.v[5]->type == WP_JSON_DOUBLE && i->arr.v[5]->d == 0.25);
	const struct wp_json *s = wp_json_get(v, "s");
	static const char want[] = "\xc3\xa9\xf0\x9f\x98\x80/\"\\\b\f\n\r\t\xc3\xa9";
	ck_assert_uint_eq(s->str.len, sizeof(want) - 1);
	ck_assert_mem_eq(s->str.s, want, sizeof(want));
	ck_assert_int_eq(s->line, 3);
	ck_assert_int_eq(s->col, 8);
	const struct wp_json *z = wp_json_get(v, "z");
	ck_assert_uint_eq(z->str.len, 3);
	ck_assert_mem_eq(z->str.s, "a\0b", 4);
	ck_assert(wp_json_get(v, "t")->b == 1 && wp_json_get(v, "f")->b == 0);
	ck_assert_int_eq(wp_json_get(v, "n")->type, WP_JSON_NULL);
	ck_assert_ptr_null(wp_json_get(v, "absent"));
	ck_assert_ptr_null(wp_json_get(i, "i"));
	ck_assert_str_eq(wp_json_type_name(WP_JSON_OBJECT), "an object");
	wp_json_free(v);
	wp_json_free(NULL);

	/* A decimal comma in the C library's locale does not change the format. */
	if (setlocale(LC_NUMERIC, "de_DE.UTF-8") || setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
		ck_assert_int_eq(wp_json_parse("[2.5]", 5, NULL, &v, &e), 0);
		ck_assert(v->arr.v[0]->d == 2.5);
		wp_json_free(v);
		setlocale(LC_NUMERIC, "C");
	}
}
END_TEST

/* Plans that are JSON but not valid plans: -EINVAL (-ENOTSUP for multicast)
 * and a message that names the place and the problem. */
static const struct bad_plan {
	const char *from, *to;
	int rc;
	const char *msg;
} bad_plans[] = {
	/* schema: types, required fields, values */
	{"\"protocol\": \"Simple\", ", "", -EINVAL, "bad.json:1:1: missing 'protocol'"},
	{"\"protocol\": \"Simple\"", "\"protocol\": \"LL128\"", -EINVAL,
	 "'protocol' is \"LL128\"; expected \"Simple\", \"LL\""},
	{"\"inplace\": false", "\"inplace\": 0", -EINVAL, "'inplace' must be a boolean, not an integer"},
	{"\"name\": \"t\"", "\"name\": 7", -EINVAL, "'name' must be a string, not an integer"},
	{"\"name\": \"t\"", "\"name\": \"\"", -EINVAL, "'name' must be 1 to 256 characters"},
	{"\"id\": 0, \"input_chunks\": 1", "\"id\": 0, \"input_chunks\": \"1\"", -EINVAL,
	 "rank 0: 'input_chunks' must be an integer, not a string"},
	{"\"id\": 1, \"input_chunks\": 1", "\"id\": 1, \"input_chunks\": -1", -EINVAL,
	 "rank 1: 'input_chunks' must not be negative (it is -1)"},
	{"\"id\": 1, \"input_chunks\": 1", "\"id\": 2, \"input_chunks\": 1", -EINVAL,
	 "rank 1: 'id' is 2 but this is entry 1 of 'gpus'"},
	{"\"max_message_size\": 18446744073709551615", "\"max_message_size\": 1.8446744073709552e19", -EINVAL,
	 "'max_message_size' must be an integer, not a number with a fraction or exponent"},
	{"\"min_message_size\": 0", "\"min_message_size\": 1, \"max_message_size\": 0, \"x\": 0", -EINVAL,
	 "duplicate key \"max_message_size\""},
	{"\"inplace\": false", "\"inplace\": false, \"buffer_alignment\": 24", -EINVAL,
	 "'buffer_alignment' 24 is not a power of two"},
	{"\"inplace\": false", "\"inplace\": false, \"num_threads_per_block\": 2048", -EINVAL,
	 "'num_threads_per_block' is 2048, more than 1024"},
	{"\"gpus\": [", "\"gpus\": {\"a\": 1}, \"x\": [", -EINVAL, "'gpus' must be an array, not an object"},
	{"\"scratch_chunks\": 1,", "\"scratch_chunks\": 1, \"threadblocks\": 3, \"y\": 0,", -EINVAL,
	 "duplicate key \"threadblocks\""},
	{"{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"type\": "
	 "\"o\", \"index\": 0",
	 "{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1.5}], \"dst_buff\": "
	 "[{\"type\": "
	 "\"o\", \"index\": 0",
	 -EINVAL, "rank 0, threadblock 0, op 0: 'size' must be an integer, not a number with a fraction"},
	{"{\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"type\": "
	 "\"o\", \"index\": 0",
	 "{\"name\": \"copy\", \"src_buff\": [{\"type\": \"x\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"type\": "
	 "\"o\", \"index\": 0",
	 -EINVAL, "src_buff[0] 'type' is \"x\"; expected \"i\", \"o\", \"s\""},
	{"{\"name\": \"signal\"", "{\"name\": \"sgnal\"", -EINVAL,
	 "rank 0, threadblock 0, op 2: unknown operation 'sgnal'"},
	{"{\"name\": \"signal\"", "{\"nam\": \"signal\"", -EINVAL, "rank 0, threadblock 0, op 2: missing 'name'"},
	{"{\"name\": \"signal\", \"channel_type\": \"memory\"", "{\"name\": \"signal\", \"channel_type\": \"mem\"",
	 -EINVAL, "'channel_type' is \"mem\"; expected \"memory\", \"port\", \"none\", \"switch\""},
	{"{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]}", "{\"name\": \"signal\"}",
	 -EINVAL, "op 2: operation 'signal' needs 'channel_type' memory or port"},
	{"{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]}",
	 "{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": []}", -EINVAL,
	 "operation 'signal' needs at least one of 'channel_ids'"},
	{"{\"name\": \"sem_release\", \"semaphore_ids\": [0]}", "{\"name\": \"sem_release\", \"semaphore_ids\": 0}",
	 -EINVAL, "op 4: 'semaphore_ids' must be an array, not an integer"},
	{"\"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n       "
	 "\"ops\": [\n         {\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 1",
	 "\"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n       "
	 "\"opz\": [\n         {\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 1",
	 -EINVAL, "rank 1, threadblock 0: missing 'ops'"},
	/* chunk and buffer bounds */
	{"\"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]",
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 0, "
	 "\"size\": 2}]",
	 -EINVAL,
	 "rank 0, threadblock 0, op 0: operation 'copy': dst_buff[0] covers 2 chunks but src_buff[0] covers 1"},
	{"\"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]",
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 2, "
	 "\"size\": 1}]",
	 -EINVAL,
	 "rank 0, threadblock 0, op 0: dst_buff[0] covers chunks 2 to 2 of the output buffer, which has 2 chunks"},
	{"\"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]",
	 "\"dst_buff\": [{\"type\": \"s\", \"index\": "
	 "4294967295, \"size\": 1}]",
	 -EINVAL, "dst_buff[0] covers chunks 4294967295 to 4294967295 of the scratch buffer, which has 1 chunks"},
	{"\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1, \"size\": 1}]",
	 "\"dst_buff\": [{\"buffer_id\": 0, \"index\": "
	 "2, \"size\": 1}]",
	 -EINVAL,
	 "rank 1, threadblock 0, op 1: dst_buff[0] covers chunks 2 to 2 of rank 0's output buffer, which has 2"},
	{"\"dst_buff\": [{\"type\": \"o\", \"index\": 0, \"size\": 1}]",
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 0, "
	 "\"size\": 0}]",
	 -EINVAL, "dst_buff[0] has size 0"},
	{"\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1, \"size\": 1}]",
	 "\"dst_buff\": [{\"buffer_id\": 1, \"index\": "
	 "1, \"size\": 1}]",
	 -EINVAL,
	 "rank 1, threadblock 0, op 1: dst_buff[0] 'buffer_id' is 1, but the threadblock references 1 remote "
	 "buffers through memory channels"},
	{"\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1, \"size\": 1}]",
	 "\"dst_buff\": [{\"buffer_id\": 0, \"type\": "
	 "\"o\", \"index\": 1, \"size\": 1}]",
	 -EINVAL, "dst_buff[0] needs exactly one of 'type'"},
	{"\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1, \"size\": 1}]",
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 1, "
	 "\"size\": 1}]",
	 -EINVAL, "dst_buff[0] of operation 'put' must be a remote buffer ('buffer_id')"},
	{"{\"name\": \"put\", \"channel_type\": \"memory\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": "
	 "1}], "
	 "\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1",
	 "{\"name\": \"put\", \"channel_type\": \"memory\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": "
	 "1}, "
	 "{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 1",
	 -EINVAL, "operation 'put' pairs sources with destinations, but has 2 and 1"},
	{"{\"name\": \"put\", \"channel_type\": \"memory\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": "
	 "1}], "
	 "\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1",
	 "{\"name\": \"put\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], "
	 "\"dst_buff\": [{\"buffer_id\": 0, \"index\": 1",
	 -EINVAL, "operation 'put' needs 'channel_type' memory or port"},
	/* channels, remote buffers, semaphores, barriers */
	{"\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [1]}]",
	 "\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [7]}]", -EINVAL,
	 "rank 0: 'connected_to'[0] is 7, but the plan has 2 ranks"},
	{"\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [1]}]",
	 "\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [0]}]", -EINVAL,
	 "rank 0: 'connected_to'[0] is the rank itself"},
	{"\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [1]}]",
	 "\"channels\": [{\"channel_type\": \"port\", \"connected_to\": [1]}]", -EINVAL,
	 "rank 0, threadblock 0: 'channel_ids'[0] is 0, but the rank has 0 memory channels"},
	{"{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]}",
	 "{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [3]}", -EINVAL,
	 "rank 0, threadblock 0, op 2: 'channel_ids'[0] is 3, but the threadblock has 1 memory channels"},
	{"{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]}",
	 "{\"name\": \"signal\", \"channel_type\": \"port\", \"channel_ids\": [0]}", -EINVAL,
	 "'channel_ids'[0] is 0, but the threadblock has 0 port channels"},
	{"\"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}]",
	 "\"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"port\"]}]", -EINVAL,
	 "rank 0, threadblock 0: remote buffer 0 is not reachable through memory channels"},
	{"\"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}]",
	 "\"remote_buffers\": [{\"rank\": 2, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}]", -EINVAL,
	 "rank 0: 'remote_buffers'[0] 'rank' is 2: no rank of the plan"},
	{"\"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}]",
	 "\"remote_buffers\": []", -EINVAL,
	 "rank 0, threadblock 0: 'remote_buffer_ids'[0] is 0, but the rank has 0 remote buffers"},
	{"{\"name\": \"sem_acquire\", \"semaphore_ids\": [0]}", "{\"name\": \"sem_acquire\", \"semaphore_ids\": [1]}",
	 -EINVAL, "rank 0, threadblock 0, op 5: 'semaphore_ids'[0] is 1, but the rank has 1 semaphores"},
	{"{\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]},\n         {\"name\": "
	 "\"sem_release\"",
	 "{\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0], \"semaphore_ids\": [0]},\n         "
	 "{\"name\": \"sem_release\"",
	 -EINVAL, "op 3: only sem_acquire and sem_release have 'semaphore_ids', not operation 'wait'"},
	{"\"barrier_id\": 0, \"num_threadblocks\": 1", "\"barrier_id\": 0, \"num_threadblocks\": 2", -EINVAL,
	 "rank 1, threadblock 0, op 3: 'num_threadblocks' is 2, more than 1"},
	{"\"barrier_id\": 0, \"num_threadblocks\": 1", "\"barrier_id\": 16, \"num_threadblocks\": 1", -EINVAL,
	 "'barrier_id' is 16, more than 15"},
	{"\"threadblocks\": [{\"id\": 0,\n       \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": "
	 "[0]}],\n"
	 "       \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
	 "       \"ops\": [\n         {\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": "
	 "1}], "
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 1",
	 "\"threadblocks\": [{\"id\": 1,\n       \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": "
	 "[0]}],\n"
	 "       \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
	 "       \"ops\": [\n         {\"name\": \"copy\", \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": "
	 "1}], "
	 "\"dst_buff\": [{\"type\": \"o\", \"index\": 1",
	 -EINVAL, "rank 1, threadblock 0: 'id' is 1 but this is threadblock 0 of the list"},
	/* pipelines */
	{"\"ops\": [{\"name\": \"nop\"}, ",
	 "\"ops\": [{\"name\": \"pipeline\", \"iter_context\": {\"unit_size\": 1, "
	 "\"num_chunks\": 1}, \"ops\": []}, ",
	 -EINVAL, "rank 1, threadblock 0, op 4.0: a pipeline cannot hold another pipeline"},
	{"\"ops\": [{\"name\": \"nop\"}, ", "\"ops\": [{\"name\": \"nop\", \"iter_context\": {}}, ", -EINVAL,
	 "rank 1, threadblock 0, op 4.0: only a pipeline has 'iter_context' and 'ops', not operation 'nop'"},
	{"\"iter_context\": {\"unit_size\": 1048576, ", "\"iter_context\": {\"unit_size\": 0, ", -EINVAL,
	 "op 4: 'unit_size' and 'num_chunks' of a pipeline must be at least 1"},
	{"{\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]}]}]}]}",
	 "{\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [1]}]}]}]}", -EINVAL,
	 "rank 1, threadblock 0, op 4.1: 'channel_ids'[0] is 1, but the threadblock has 1 memory channels"},
	/* NVLink multicast: refused, naming the operation or the channel */
	{"{\"name\": \"signal\"", "{\"name\": \"gstore\"", -ENOTSUP,
	 "bad.json:14:19: rank 0, threadblock 0, op 2: operation 'gstore' uses NVLink multicast, which weft does not "
	 "use; plan refused"},
	{"{\"name\": \"nop\"}", "{\"name\": \"gstorepkt\"}", -ENOTSUP, "op 4.0: operation 'gstorepkt' uses NVLink"},
	{"{\"name\": \"nop\"}", "{\"name\": \"glres\", \"bogus\": [}", -EINVAL, "expected a value"},
	{"\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [0]}]",
	 "\"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [0]}, {\"channel_type\": \"switch\", "
	 "\"buffer_type\": \"i\", \"rank_groups\": [{\"size\": 2, \"ranks\": [0, 1]}]}]",
	 -ENOTSUP, "rank 1: 'channels'[1] is a switch channel (NVLink multicast), which weft does not use"},
	{"{\"name\": \"signal\", \"channel_type\": \"memory\", \"channel_ids\": [0]}",
	 "{\"name\": \"signal\", \"channel_type\": \"switch\", \"channel_ids\": [0]}", -ENOTSUP,
	 "op 2: operation 'signal' runs on a switch channel (NVLink multicast)"},
};

START_TEST(malformed_plans)
{
	const struct bad_plan *b = &bad_plans[_i];
	char *text = mutate(b->from, b->to), err[512];
	struct wp_plan *p = (void *)0x1;
	int rc = wp_plan_load_mem("bad.json", text, strlen(text), &p, err, sizeof(err));

	ck_assert_msg(rc == b->rc, "case %d: rc %d, expected %d (%s)", _i, rc, b->rc, err);
	ck_assert_ptr_eq(p, (void *)0x1);
	ck_assert_msg(!strncmp(err, "bad.json:", 9) && strstr(err, b->msg), "case %d: \"%s\" lacks \"%s\"", _i, err,
		      b->msg);
	/* A short buffer gets a truncated message, never an overflow. */
	char tiny[8];
	memset(tiny, 'x', sizeof(tiny));
	ck_assert_int_eq(wp_plan_load_mem("bad.json", text, strlen(text), &p, tiny, 5), b->rc);
	ck_assert_int_eq(tiny[4], 0);
	ck_assert_int_eq(tiny[5], 'x');
	ck_assert_int_eq(wp_plan_load_mem("bad.json", text, strlen(text), &p, NULL, 0), b->rc);
	free(text);
}
END_TEST

/* Errors of the file itself name the path. */
START_TEST(file_errors)
{
	char *dir = wt_mkdtemp("plan"), err[512];
	struct wp_plan *p;
	char *missing;

	ck_assert_int_ge(asprintf(&missing, "%s/none.json", dir), 0);
	ck_assert_int_eq(wp_plan_load(missing, &p, err, sizeof(err)), -ENOENT);
	ck_assert_msg(strstr(err, missing) && strstr(err, "cannot open"), "%s", err);
	ck_assert_int_eq(wp_plan_load(dir, &p, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "not a regular file"), "%s", err);
	char *bad = wt_write_file(dir, "bad.json", "{\"name\": \"x\",\n \"gpus\": [}\n");
	ck_assert_int_eq(wp_plan_load(bad, &p, err, sizeof(err)), -EINVAL);
	char *want;
	ck_assert_int_ge(asprintf(&want, "%s:2:11: expected a value", bad), 0);
	ck_assert_msg(strstr(err, want), "%s lacks %s", err, want);
	char *empty = wt_write_file(dir, "empty.json", "");
	ck_assert_int_eq(wp_plan_load(empty, &p, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "expected a value, found the end of the input"), "%s", err);
	free(want);
	free(empty);
	free(bad);
	free(missing);
	wt_rmdir(dir);
	free(dir);
}
END_TEST

/* Every allocation of a load failing in turn: -ENOMEM, and nothing left
 * allocated; then the load that succeeds frees all it took. */
static void fail_each_allocation(const char *name, const char *text, size_t len)
{
	long base = wp_alloc_live;
	int n;

	for (n = 1;; n++) {
		struct wp_plan *p = NULL;
		char err[256];
		wp_alloc_fail_countdown = n;
		int rc = wp_plan_load_mem(name, text, len, &p, err, sizeof(err));
		wp_alloc_fail_countdown = 0;
		if (rc == 0) {
			wp_plan_free(p);
			ck_assert_int_eq(wp_alloc_live, base);
			break;
		}
		ck_assert_msg(rc == -ENOMEM, "%s, allocation %d: rc %d (%s)", name, n, rc, err);
		ck_assert_msg(strstr(err, "out of memory"), "%s, allocation %d: %s", name, n, err);
		ck_assert_msg(wp_alloc_live == base, "%s: %ld allocations left after allocation %d failed", name,
			      wp_alloc_live - base, n);
	}
	ck_assert_int_gt(n, 100);
}

START_TEST(allocation_failures)
{
	fail_each_allocation("base.json", base_plan, strlen(base_plan));
	char *path = data_path("reduce_pack_tbg.json");
	char *text = wt_read_file(path);
	fail_each_allocation("reduce_pack_tbg.json", text, strlen(text));
	free(text);
	free(path);
	/* A parse error after many allocations leaves nothing either. */
	long base = wp_alloc_live;
	char err[256];
	struct wp_plan *p;
	static const char bad[] = "{\"a\": [1, \"b\", {\"c\": [2]}], \"d\": tru}";
	ck_assert_int_eq(wp_plan_load_mem("x", bad, strlen(bad), &p, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(wp_alloc_live, base);
}
END_TEST

START_TEST(sha256_vectors)
{
	static const struct {
		const char *in, *hex;
	} v[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	};
	unsigned char d[32];
	char hex[65];

	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		wp_sha256(v[k].in, strlen(v[k].in), d);
		wp_sha256_hex(d, hex);
		ck_assert_str_eq(hex, v[k].hex);
	}
	/* A million 'a' (FIPS 180-2's third example), many blocks and a tail. */
	char *m = malloc(1000000);
	memset(m, 'a', 1000000);
	wp_sha256(m, 1000000, d);
	wp_sha256_hex(d, hex);
	ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(m);
}
END_TEST

START_TEST(op_names)
{
	static const char *const names =
		" nop barrier put pws pwsf get copy signal wait flush re res rre rres ppkt rppkt respkt cpkt upkt "
		"repkt "
		"recpkt recspkt glres gstore gstorepkt rlxsignal rlxwait pipeline sem_acquire sem_release ";
	char word[32];

	ck_assert_int_eq(WP_OP_COUNT, 30);
	for (int k = 0; k < WP_OP_COUNT; k++) {
		snprintf(word, sizeof(word), " %s ", wp_op_name((enum wp_op_kind)k));
		ck_assert_msg(strstr(names, word), "%s is not one of the 30", word);
	}
	ck_assert_str_eq(wp_op_name(WP_OP_COUNT), "?");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plan_parse");
	TCase *tc = tcase_create("mscclpp");
	tcase_add_test(tc, data_folder_holds_the_eleven);
	tcase_add_loop_test(tc, mscclpp_plans, 0, NPLAN_FILES);
	tcase_add_test(tc, mscclpp_plan_details);
	suite_add_tcase(s, tc);
	tc = tcase_create("json");
	tcase_add_loop_test(tc, malformed_json, 0, (int)(sizeof(bad_json) / sizeof(bad_json[0])));
	tcase_add_test(tc, json_limits);
	tcase_add_test(tc, json_values);
	suite_add_tcase(s, tc);
	tc = tcase_create("plans");
	tcase_add_test(tc, base_plan_loads);
	tcase_add_loop_test(tc, malformed_plans, 0, (int)(sizeof(bad_plans) / sizeof(bad_plans[0])));
	tcase_add_test(tc, file_errors);
	tcase_add_test(tc, allocation_failures);
	tcase_add_test(tc, sha256_vectors);
	tcase_add_test(tc, op_names);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
