/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for the config file parser (core/config.c + the rule grammar it calls):
 * each input is a whole file's text, parsed as load_once would, then every core
 * parameter is resolved so that file values reach the typed value parsers. */
#include "config.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Quiet (every bad input logs an error, and the fuzzer runs millions), and
	 * no real config file: the inputs are the only file. */
	setenv("WEFT_LOG_FILE", "/dev/null", 1);
	setenv("WEFT_CONFIG", "/dev/null", 1);
	return 0;
}

static void declare_core_once(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	/* The same table load_once declares, so param_get reads file values. */
	pthread_mutex_lock(&cfg_lock);
	for (size_t i = 0; i < weft__core_nparams; i++)
		declare_locked("core", &weft__core_params[i]);
	pthread_mutex_unlock(&cfg_lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	declare_core_once();
	/* parse_text edits lines in its own copies; the text itself is read only. */
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	pthread_mutex_lock(&cfg_lock);
	int rc = parse_text("fuzz.conf", text, size);
	pthread_mutex_unlock(&cfg_lock);
	free(text);
	if (rc == 0) {
		for (size_t i = 0; i < weft__core_nparams; i++) {
			union {
				int64_t i;
				uint64_t u;
				int b;
				double d;
				const char *s;
			} v;
			weft__param_get("core", weft__core_params[i].key, weft__core_params[i].type, &v, NULL);
		}
		const char *const *lines;
		const int *linenos;
		int n = weft__config_section_lines("transport", &lines, &linenos);
		for (int i = 0; i < n; i++) {
			struct weft__rule r;
			char err[256];
			/* A line the file parser kept must parse again the same way. */
			if (weft__rule_parse(lines[i], &r, err, sizeof(err)) != 0)
				__builtin_trap();
		}
	}
	/* Every input starts from an empty file, as a fresh process would. */
	pthread_mutex_lock(&cfg_lock);
	forget_file();
	for (int i = 0; i < cfg_nparams; i++)
		cfg_params[i].bad_logged = 0;
	pthread_mutex_unlock(&cfg_lock);
	return 0;
}
