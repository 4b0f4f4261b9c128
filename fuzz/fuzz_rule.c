/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for the rule grammar of [transport] and [algorithm] (weft__rule_parse)
 * and the size syntax it shares with SIZE parameters (weft__parse_size): one
 * line per input; a rule that parses is also matched against a few queries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "rules.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("WEFT_LOG_FILE", "/dev/null", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0; /* the file parser refuses longer lines before the grammar sees them */
	char *line = malloc(size + 1);
	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';

	struct weft__rule r;
	char err[256];
	memset(&r, 0, sizeof(r));
	/* The error buffer is written whole or not at all, never past errlen:
	 * a short buffer must stay terminated. */
	char small[8];
	weft__rule_parse(line, &r, small, sizeof(small));
	if (memchr(small, '\0', sizeof(small)) == NULL)
		__builtin_trap();
	int rc = weft__rule_parse(line, &r, err, sizeof(err));
	if (rc == 0) {
		if (r.size_lo > r.size_hi || r.ranks_lo > r.ranks_hi || strnlen(r.target, sizeof(r.target)) == sizeof(r.target))
			__builtin_trap(); /* the parser promised a sane rule */
		struct weft__rule_query qs[] = {
			{-1, 0, -1, -1, -1},
			{0, 1 << 20, 8, 0, 1},
			{3, UINT64_MAX, 1 << 20, 1, 2},
		};
		for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
			weft__rule_matches(&r, &qs[i]);
	} else if (memchr(err, '\0', sizeof(err)) == NULL) {
		__builtin_trap();
	}
	uint64_t v;
	weft__parse_size(line, &v);
	weft__edit_distance(line, "allreduce");
	free(line);
	return 0;
}
