/*
 * test-error: core/error.h: messages filled and prefixed, and a failed
 * LMT_ASSERT, which aborts without the library writing anything: the message is
 * kept in lmt_assert_msg and given to the handler a program installed (the tools'
 * writes it to stderr), never printed by the library itself. The assertions run
 * in children (fork), their stderr captured in a pipe.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "tap.h"

static void handler(const char *msg)
{
	fprintf(stderr, "handled: %s\n", msg);
}

/* A child that fails an assertion (with the handler installed or not); its
 * stderr into buf, its wait status returned. */
static int failing_child(int with_handler, char *buf, size_t cap)
{
	int fd[2];
	fflush(stdout);
	if (pipe(fd))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fd[1], 2);
		close(fd[0]);
		if (with_handler)
			lmt_set_assert_handler(handler);
		int one = 1;
		LMT_ASSERT(one == 2);
		_exit(0);
	}
	close(fd[1]);
	size_t n = 0;
	ssize_t k;
	while (n + 1 < cap && (k = read(fd[0], buf + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	buf[n] = 0;
	close(fd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	return st;
}

int main(void)
{
	struct lmt_err err = { 0 };
	int rc = lmt_err_set(&err, LMT_EFORMAT, "'%s': bad", "f");
	tap_ok(rc == LMT_EFORMAT && err.code == LMT_EFORMAT && !strcmp(err.msg, "'f': bad"), "lmt_err_set: code and "
	       "message");
	lmt_err_prefix(&err, "reading %d", 2);
	tap_ok(!strcmp(err.msg, "reading 2: 'f': bad"), "lmt_err_prefix: '%s'", err.msg);
	tap_ok(lmt_err_set(NULL, LMT_EIO, "x") == LMT_EIO, "a NULL err still returns the code");

	char buf[1024];
	int st = failing_child(0, buf, sizeof buf);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "a failed assertion aborts");
	tap_ok(buf[0] == 0, "without a handler the library writes nothing (stderr: '%s')", buf);
	st = failing_child(1, buf, sizeof buf);
	tap_ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
	       strstr(buf, "handled: internal error: assertion 'one == 2' failed at tests/unit/test-error.c:"),
	       "with a handler: it is told the assertion, file and line, then the program aborts ('%.100s')", buf);
	return tap_done();
}
