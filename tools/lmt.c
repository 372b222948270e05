/*
 * lmt: the one command on PATH, git-style: `lmt train ...` runs the tool train.
 *
 *	lmt train -c run.cfg              # executes PREFIX/libexec/lmt/train
 *	lmt help train                    # its manual page
 *	lmt --list                        # the tools, one line each
 *
 * The tools keep the design's short names (train, runcard, shard-pack), which would
 * collide with other programs on PATH, so `make install` puts them in
 * PREFIX/libexec/lmt/ and only this front end in PREFIX/bin/. The tools are found
 * from where this binary is, not from a path compiled in, so an installed tree
 * can be moved (DESTDIR staging, a relocated PREFIX) and the build tree works as
 * it is: LMT_EXEC_PATH if set, else BINDIR/../libexec/lmt if it exists, else
 * BINDIR itself (build/bin, where every tool sits beside lmt). The manual pages
 * are looked for the same way, in BINDIR/../share/man (installed) or
 * BINDIR/../../man (the source tree, when B is the default build/).
 *
 * The tool is exec'd, not run as a child, so its exit status, signals and
 * standard streams are its own. Exit codes of lmt itself: 0, 1 (a tool or page
 * that cannot be run), 2 (usage error, an unknown tool).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

enum {
	OPT_EXEC_PATH = OPT_TOOL_BASE,
};

static const struct option longopts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "list", no_argument, NULL, 'l' },
	{ "exec-path", no_argument, NULL, OPT_EXEC_PATH },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lmt TOOL [ARGS...]\n"
		   "       lmt help TOOL\n"
		   "       lmt --list | --exec-path | --help | --version\n"
		   "\n"
		   "Run one of lmt's tools (lmt train ... runs train), or show its manual page.\n"
		   "\n"
		   "  -l, --list              the tools, each with its one-line description\n"
		   "      --exec-path         the directory the tools are run from\n"
		   "  -h, --help              this help\n"
		   "  -V, --version           version and backends\n"
		   "\n"
		   "The tools are looked for in $LMT_EXEC_PATH, else in ../libexec/lmt beside\n"
		   "this binary, else beside it.\n"
		   "Exit status: the tool's; lmt's own: 0 success, 1 error, 2 usage error.\n"
		   "See lmt(1).\n");
}

/* The directory this binary is in, without a trailing slash. */
static char bindir[PATH_MAX];
static char execdir[PATH_MAX];

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static void find_dirs(const char *argv0)
{
	ssize_t n = readlink("/proc/self/exe", bindir, sizeof bindir - 1);
	if (n > 0) {
		bindir[n] = '\0';
	} else if (!realpath(argv0, bindir)) {
		/* no /proc and argv[0] is a bare name: the tools are found by LMT_EXEC_PATH
		 * or not at all */
		path_fmt(bindir, sizeof bindir, ".");
	}
	char *slash = strrchr(bindir, '/');
	if (slash && slash != bindir)
		*slash = '\0';

	const char *env = getenv("LMT_EXEC_PATH");
	if (env && *env) {
		path_fmt(execdir, sizeof execdir, "%s", env);
		return;
	}
	char dir[PATH_MAX];
	path_fmt(dir, sizeof dir, "%s/../libexec/lmt", bindir);
	if (!is_dir(dir) || !realpath(dir, execdir))
		path_fmt(execdir, sizeof execdir, "%s", bindir);
}

/* A tool's name is a plain file name: no path, no hidden file, not lmt itself. */
static int valid_name(const char *name)
{
	return name[0] && name[0] != '.' && !strchr(name, '/') && strcmp(name, "lmt") != 0;
}

static int is_tool(const char *name)
{
	char p[PATH_MAX];
	if (!valid_name(name))
		return 0;
	path_fmt(p, sizeof p, "%s/%s", execdir, name);
	return is_file(p) && access(p, X_OK) == 0;
}

/* The page of NAME in section SEC: the installed tree's share/man/manSEC/NAME.SEC
 * (*mandir set to share/man, for MANPATH) or the source tree's man/NAME.SEC
 * (*mandir empty). 0 if there is none. */
static int find_page(const char *name, int sec, char *out, size_t cap, char *mandir, size_t mcap)
{
	path_fmt(mandir, mcap, "%s/../share/man", bindir);
	path_fmt(out, cap, "%s/man%d/%s.%d", mandir, sec, name, sec);
	if (is_file(out))
		return 1;
	mandir[0] = '\0';
	path_fmt(out, cap, "%s/../../man/%s.%d", bindir, name, sec);
	return is_file(out);
}

/* The text of the page's .Nd line (its one-line description), or "". */
static void page_description(const char *name, char *out, size_t cap)
{
	char page[PATH_MAX], mandir[PATH_MAX], line[512];
	out[0] = '\0';
	if (!find_page(name, 1, page, sizeof page, mandir, sizeof mandir))
		return;
	FILE *f = fopen(page, "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, ".Nd ", 4) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(out, cap, "%s", line + 4);
		break;
	}
	fclose(f);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Print the tools in execdir; returns how many there are. */
static int list_tools(FILE *f)
{
	struct dirent **ents;
	int n = scandir(execdir, &ents, NULL, by_name);
	if (n < 0)
		return 0;
	int count = 0;
	for (int i = 0; i < n; i++) {
		if (is_tool(ents[i]->d_name)) {
			char desc[512];
			page_description(ents[i]->d_name, desc, sizeof desc);
			fprintf(f, "  %-15s %s\n", ents[i]->d_name, desc);
			count++;
		}
		free(ents[i]);
	}
	free(ents);
	return count;
}

/* Not a tool here: a name not among the tools is a usage error (2); a tool that is
 * there but cannot be run, or a directory with no tools at all, is the
 * installation's fault, not the name's (1). */
static void __attribute__((noreturn)) unknown_tool(const char *name)
{
	char p[PATH_MAX];
	path_fmt(p, sizeof p, "%s/%s", execdir, name);
	if (valid_name(name) && is_file(p)) {
		fprintf(stderr, "%s: '%s' cannot be run: %s\n", tool_name, p, strerror(EACCES));
		exit(1);
	}
	fprintf(stderr, "%s: '%s' is not an lmt tool; the tools in '%s':\n", tool_name, name, execdir);
	if (!list_tools(stderr)) {
		fprintf(stderr, "  (none: set LMT_EXEC_PATH to the directory that holds them)\n");
		exit(1);
	}
	exit(2);
}

/* lmt help NAME: the page of a tool, of lmt itself or of the formats (section 5). */
static void __attribute__((noreturn)) help(const char *name)
{
	char page[PATH_MAX], mandir[PATH_MAX];
	int sec = 1;
	if (strcmp(name, "formats") == 0 || strcmp(name, "lmt-formats") == 0) {
		name = "lmt-formats";
		sec = 5;
	} else if (strcmp(name, "lmt") != 0 && !is_tool(name)) {
		unknown_tool(name);
	}
	if (!find_page(name, sec, page, sizeof page, mandir, sizeof mandir))
		die("no manual page for '%s' beside '%s'", name, bindir);
	fflush(stdout);
	if (mandir[0]) {
		/* man finds the page by name; the trailing ':' keeps the system's manpath */
		const char *old = getenv("MANPATH");
		char mp[2 * PATH_MAX];
		path_fmt(mp, sizeof mp, "%s:%s", mandir, old ? old : "");
		setenv("MANPATH", mp, 1);
		char secs[8];
		snprintf(secs, sizeof secs, "%d", sec);
		execlp("man", "man", secs, name, (char *)NULL);
	} else {
		execlp("man", "man", "-l", page, (char *)NULL);
	}
	if (errno != ENOENT)
		die("cannot run man: %s", strerror(errno));
	execlp("mandoc", "mandoc", page, (char *)NULL);
	die("neither man nor mandoc is installed; the page is '%s'", page);
}

static void __attribute__((noreturn)) run_tool(char **argv)
{
	char p[PATH_MAX];
	if (!is_tool(argv[0]))
		unknown_tool(argv[0]);
	path_fmt(p, sizeof p, "%s/%s", execdir, argv[0]);
	fflush(stdout);
	execv(p, argv);
	die("'%s': cannot execute: %s", p, strerror(errno));
}

int main(int argc, char **argv)
{
	tool_init("lmt");
	find_dirs(argv[0]);
	int c, mode = 0;
	while ((c = getopt_long(argc, argv, "+hVl", longopts, NULL)) != -1) {
		switch (c) {
		case 'h': case 'V': case 'l': case OPT_EXEC_PATH:
			/* each is the whole of what lmt is asked: alone, with nothing after */
			if (mode && mode != c)
				usage_error("--help, --version, --list and --exec-path exclude each other");
			mode = c;
			break;
		default:
			bad_option(argv);
		}
	}
	argv += optind;
	argc -= optind;
	if (mode && argc)
		usage_error("unexpected argument '%s' (a tool is run as 'lmt TOOL ...', without lmt's options)", argv[0]);
	switch (mode) {
	case 'h':
		usage(stdout);
		return 0;
	case 'V':
		print_version();
		return 0;
	case 'l':
		if (!list_tools(stdout))
			die("no tools in '%s'", execdir);
		return 0;
	case OPT_EXEC_PATH:
		printf("%s\n", execdir);
		return 0;
	}
	if (argc == 0) {
		usage(stderr);
		exit(2);
	}
	if (strcmp(argv[0], "help") == 0) {
		if (argc == 1) {
			usage(stdout);
			return 0;
		}
		if (argc > 2)
			usage_error("help takes one name");
		help(argv[1]);
	}
	run_tool(argv);
}
