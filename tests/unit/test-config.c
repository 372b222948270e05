/*
 * test-config: the "key = value" reader (lib/core/config.h): what a line becomes,
 * line numbers, and the bytes it refuses before handing out any entry.
 */
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "tap.h"

/* Entries as "LINE:KEY=VALUE" (or "LINE:KEY" without '='), one per line. */
static char got[1024];
static int collect(void *ctx, const struct lmt_config_entry *e)
{
	(void)ctx;
	size_t n = strlen(got);
	if (e->value)
		snprintf(got + n, sizeof got - n, "%d:%s=%s\n", e->line, e->key, e->value);
	else
		snprintf(got + n, sizeof got - n, "%d:%s\n", e->line, e->key);
	return 0;
}

static int stop_at_two(void *ctx, const struct lmt_config_entry *e)
{
	(*(int *)ctx)++;
	return e->line == 2 ? 7 : 0;
}

static void parses(const char *name, const char *text, size_t n, const char *want)
{
	struct lmt_err err = { 0 };
	got[0] = 0;
	int rc = lmt_config_parse("t.cfg", text, n, collect, NULL, &err);
	if (!tap_ok(rc == 0 && !strcmp(got, want), "%s", name))
		tap_diag("rc %d (%s), got:\n%s", rc, err.msg, got);
}

static void refuses(const char *name, const char *text, size_t n, const char *msg)
{
	struct lmt_err err = { 0 };
	got[0] = 0;
	int rc = lmt_config_parse("t.cfg", text, n, collect, NULL, &err);
	if (!tap_ok(rc == LMT_EFORMAT && !strcmp(err.msg, msg) && !got[0], "%s", name))
		tap_diag("rc %d, message '%s', entries:\n%s", rc, err.msg, got);
}

#define S(lit) lit, sizeof lit - 1

int main(void)
{
	parses("keys, values, blanks, comments and blank lines",
	       S("# top\nlayers = 4\n\n  lr=1e-3 # peak\n\tuntie\nprompt =   two words \t\n"),
	       "2:layers=4\n4:lr=1e-3\n5:untie\n6:prompt=two words\n");
	parses("'=' with nothing after is an empty value, not a key alone", S("out =\n"), "1:out=\n");
	parses("a line that starts with '=' has an empty key", S(" = 3\n"), "1:=3\n");
	parses("CR LF line ends are line ends", S("a = 1\r\nflag\r\n\r\nb = 2\r\n"), "1:a=1\n2:flag\n4:b=2\n");
	parses("the last line needs no line feed", S("a = 1\nb = 2"), "1:a=1\n2:b=2\n");
	parses("UTF-8 in values", S("prompt = caf\xc3\xa9 \xe2\x82\xac\n"), "1:prompt=caf\xc3\xa9 \xe2\x82\xac\n");
	parses("an empty file", S(""), "");

	refuses("a NUL byte, with its line", S("a = 1\nb = 2\0\nc = 3\n"),
		"'t.cfg': line 2: a NUL byte (a config file is UTF-8 text)");
	refuses("a NUL in a comment", S("a = 1 # x\0y\n"), "'t.cfg': line 1: a NUL byte (a config file is UTF-8 text)");
	refuses("a Latin-1 byte", S("a = 1\n\nb = caf\xe9\n"),
		"'t.cfg': line 3: byte 0xe9 is not UTF-8 (a config file is UTF-8 text)");
	refuses("an overlong encoding", S("a = \xc0\xaf\n"),
		"'t.cfg': line 1: byte 0xc0 is not UTF-8 (a config file is UTF-8 text)");
	refuses("a UTF-16 surrogate", S("a = \xed\xa0\x80\n"),
		"'t.cfg': line 1: byte 0xed is not UTF-8 (a config file is UTF-8 text)");
	refuses("a truncated sequence at the end", S("a = \xe2\x82"),
		"'t.cfg': line 1: byte 0xe2 is not UTF-8 (a config file is UTF-8 text)");
	refuses("a CR not before LF", S("a = 1\rb = 2\n"),
		"'t.cfg': line 1: a carriage return not followed by a line feed (a config file is UTF-8 text)");
	refuses("a CR at the very end", S("a = 1\r"),
		"'t.cfg': line 1: a carriage return not followed by a line feed (a config file is UTF-8 text)");
	refuses("an escape character", S("a = 1\n\x1b[31m\n"),
		"'t.cfg': line 2: control character 0x1b (a config file is UTF-8 text)");
	refuses("DEL", S("a = 1\x7f\n"), "'t.cfg': line 1: control character 0x7f (a config file is UTF-8 text)");

	int calls = 0;
	struct lmt_err err = { 0 };
	int rc = lmt_config_parse("t.cfg", S("a = 1\nb = 2\nc = 3\n"), stop_at_two, &calls, &err);
	tap_ok(rc == 7 && calls == 2, "a callback's nonzero return stops the walk and is returned (rc %d, %d calls)",
	       rc, calls);
	rc = lmt_config_read("/nonexistent/t.cfg", collect, NULL, &err);
	tap_ok(rc != 0 && strstr(err.msg, "/nonexistent/t.cfg"), "a missing file is an error naming it: %s", err.msg);
	return tap_done();
}
