/*
 * corpus.c: the document reader described in corpus.h.
 *
 * A corpus is a list of leaf inputs (directories are expanded up front so that a
 * missing or unreadable path is reported before any work is done). Each leaf
 * remembers whether the user named it or a directory walk found it: only found
 * inputs may be skipped, because a named one that cannot be read is the user's
 * mistake, while one bad file among thousands in /usr/share/doc is not. Binary
 * files are recognised by sniffing the start of each source before its first
 * document, so the check costs one look at a buffer that is read anyway. Each leaf is a
 * plain file read with read(2), a compressed file or stdin read through libarchive's
 * "raw" format, or an archive whose regular members are sources of their own.
 * Documents are cut out of a growable input buffer, so memory holds one document
 * plus what has been read ahead of it.
 */
#include "data/corpus.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/jsonscan.h"
#include "core/utf8.h"
#include "core/util.h"
#include "core/workpool.h"

enum leaf_kind { LEAF_PLAIN, LEAF_COMPRESSED, LEAF_ARCHIVE, LEAF_STDIN };

struct lmt_corpus {
	struct lmt_corpus_opts o;
	const char *field;

	struct leaf {
		char *path;
		int found;       /* from a directory walk, not named */
	} *leaves;
	size_t nleaves, leafcap, ileaf;
	struct lmt_corpus_skips own_skips, *skips;
	uint64_t total_bytes, done_bytes;

	struct source {
		char *name;      /* "path" or "archive:member" */
		char *label;     /* the same, quoted for messages */
	} *srcs;
	size_t nnames, namecap;

	/* the open leaf */
	struct archive *arch;    /* an archive being walked member by member */
	const char *arch_path;

	/* the open source */
	int open;
	int fd;                  /* plain file, or -1 */
	struct archive *ar;      /* data source when fd < 0 */
	struct archive *nested;  /* compressed member opened from memory */
	char *nested_mem;
	int fmt;                 /* LMT_CORPUS_TEXT or LMT_CORPUS_JSONL */
	int found;               /* the open source may be skipped (see struct leaf) */
	uint32_t src;
	uint64_t ordinal, line;
	uint64_t src_bytes;      /* bytes read from this source (plain files) */

	char *buf;
	size_t cap, start, end;
	int eof;
	char *doc;
	size_t doccap;
	/* lmt_corpus_read_batch's batch while it reads one: the JSONL reader decodes a
	 * text straight into it, at its end, instead of into doc (one copy of every
	 * text less, a twentieth of dedup-minhash's time) */
	struct lmt_docbatch *into;
	int hashed;              /* the reader filled lmt_doc.raw_hash itself */
};

static const char *const archive_sfx[] = {
	".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst", ".tar.xz", ".txz", ".tar.bz2",
	".tbz2", ".zip", ".tar.lz4",
};
static const char *const compress_sfx[] = { ".gz", ".zst", ".xz", ".bz2", ".lz4" };
static const char *const jsonl_sfx[] = { ".jsonl", ".ndjson", ".json" };
/* a UTF-8 byte order mark: JSONL is read past one at a source's start */
#define UTF8_BOM "\xef\xbb\xbf"

static int ends_with(const char *s, const char *sfx)
{
	size_t a = strlen(s), b = strlen(sfx);
	return a >= b && !strcasecmp(s + a - b, sfx);
}

static int any_sfx(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ends_with(s, list[i]))
			return (int)strlen(list[i]);
	return 0;
}

static int classify(const char *path)
{
	if (!strcmp(path, "-"))
		return LEAF_STDIN;
	if (any_sfx(path, archive_sfx, LMT_ARRAY_SIZE(archive_sfx)))
		return LEAF_ARCHIVE;
	if (any_sfx(path, compress_sfx, LMT_ARRAY_SIZE(compress_sfx)))
		return LEAF_COMPRESSED;
	return LEAF_PLAIN;
}

/* Format of a name (with any compression suffix already ignored). */
static int format_of(const struct lmt_corpus *c, const char *name)
{
	if (c->o.format != LMT_CORPUS_AUTO)
		return c->o.format;
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s", name);
	int k = any_sfx(tmp, compress_sfx, LMT_ARRAY_SIZE(compress_sfx));
	if (k)
		tmp[strlen(tmp) - k] = 0;
	return any_sfx(tmp, jsonl_sfx, LMT_ARRAY_SIZE(jsonl_sfx)) ? LMT_CORPUS_JSONL : LMT_CORPUS_TEXT;
}

static int add_leaf(struct lmt_corpus *c, const char *path, int found, struct lmt_err *err)
{
	if (LMT_GROW(c->leaves, c->leafcap, c->nleaves + 1))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	if (!(c->leaves[c->nleaves].path = strdup(path)))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	c->leaves[c->nleaves++].found = found;
	return 0;
}

void lmt_corpus_skips_release(struct lmt_corpus_skips *s)
{
	for (size_t i = 0; i < s->nnames; i++) {
		free(s->first[i].name);
		free(s->first[i].why);
	}
	memset(s, 0, sizeof *s);
}

/* Passes over a found input, or with strict refuses it: the message is the one a
 * named input gets, "'name': why". */
static int skip(struct lmt_corpus *c, const char *name, const char *why, struct lmt_err *err)
{
	if (c->o.strict)
		return lmt_err_set(err, LMT_EFORMAT, "'%s': %s", name, why);
	struct lmt_corpus_skips *s = c->skips;
	if (s->nnames < LMT_CORPUS_SKIP_NAMES) {
		struct lmt_corpus_skip *k = &s->first[s->nnames];
		k->name = strdup(name);
		k->why = strdup(why);
		if (!k->name || !k->why) {
			free(k->name);
			free(k->why);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
		s->nnames++;
	}
	s->n++;
	return 0;
}

const char *lmt_corpus_binary(const void *data, size_t n)
{
	const unsigned char *p = data;
	if (memchr(p, 0, LMT_MIN(n, (size_t)LMT_CORPUS_SNIFF_NUL)))
		return "binary file (a NUL byte in the first 8 KiB)";
	n = LMT_MIN(n, (size_t)LMT_CORPUS_SNIFF_UTF8);
	size_t bad = 0;
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t k = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		if (k && i + k > n)
			break; /* cut off by the sample's end: not the file's fault */
		size_t j = 1;
		while (k && j < k && (p[i + j] & 0xc0) == 0x80)
			j++;
		int ok = k && j == k && !((c == 0xe0 && p[i + 1] < 0xa0) || (c == 0xed && p[i + 1] > 0x9f) ||
					  (c == 0xf0 && p[i + 1] < 0x90) || (c == 0xf4 && p[i + 1] > 0x8f));
		if (ok) {
			i += k;
		} else {
			bad++;
			i++;
		}
	}
	return bad * 10 > n ? "binary file (over 10% invalid UTF-8 in the first 64 KiB)" : NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the directories a walk is inside, innermost first */
struct walk_dir {
	dev_t dev;
	ino_t ino;
	const char *path;
	const struct walk_dir *up;
};

static int expand(struct lmt_corpus *c, const char *path, int depth, const struct walk_dir *up,
		  struct lmt_err *err)
{
	struct stat st;
	int found = depth > 0;
	if (!strcmp(path, "-"))
		return add_leaf(c, path, 0, err);
	if (stat(path, &st) != 0) {
		if (!found)
			return lmt_err_errno(err, "'%s'", path);
		int e = errno;
		struct stat lst;
		return skip(c, path, e == ENOENT && !lstat(path, &lst) && S_ISLNK(lst.st_mode) ?
			    "dangling symlink" : strerror(e), err);
	}
	if (!S_ISDIR(st.st_mode)) {
		/* a named FIFO is read (tok-encode <(zcat ...)); a found one would block */
		if (found && !S_ISREG(st.st_mode))
			return skip(c, path, "not a regular file", err);
		if (access(path, R_OK) != 0)
			return found ? skip(c, path, strerror(errno), err) : lmt_err_errno(err, "'%s'", path);
		c->total_bytes += (uint64_t)st.st_size;
		return add_leaf(c, path, found, err);
	}
	/* a symlink to a directory the walk is inside would be walked again and again
	 * (two such links a level: without end); find -L reports them the same way */
	for (const struct walk_dir *a = up; a; a = a->up)
		if (a->dev == st.st_dev && a->ino == st.st_ino) {
			char *why = malloc(strlen(a->path) + 64);
			if (!why)
				return lmt_err_set(err, LMT_ENOMEM, "out of memory");
			sprintf(why, "a loop back to the directory '%s'", a->path);
			int rc = skip(c, path, why, err);
			free(why);
			return rc;
		}
	if (depth > 64)
		return lmt_err_set(err, LMT_EINVAL, "'%s': directories nested too deep", path);
	const struct walk_dir here = { st.st_dev, st.st_ino, path, up };
	DIR *d = opendir(path);
	if (!d)
		return found ? skip(c, path, strerror(errno), err) : lmt_err_errno(err, "'%s'", path);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (LMT_GROW(names, cap, n + 1) || !(names[n] = strdup(e->d_name))) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			break;
		}
		n++;
	}
	closedir(d);
	/* byte order, not the locale's collation, so every machine sees the same order */
	if (n) /* qsort(NULL, 0, ...) is undefined behaviour */
		qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n && !rc; i++) {
		size_t len = strlen(path) + strlen(names[i]) + 2;
		char *sub = malloc(len);
		if (!sub) {
			rc = lmt_err_set(err, LMT_ENOMEM, "out of memory");
			break;
		}
		snprintf(sub, len, "%s%s%s", path, ends_with(path, "/") ? "" : "/", names[i]);
		rc = expand(c, sub, depth + 1, &here, err);
		free(sub);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int lmt_corpus_open(struct lmt_corpus **out, const char *const *paths, int npaths,
		    const struct lmt_corpus_opts *opts, struct lmt_err *err)
{
	*out = NULL;
	struct lmt_corpus *c = calloc(1, sizeof *c);
	if (!c)
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	if (opts)
		c->o = *opts;
	c->field = c->o.text_field ? c->o.text_field : "text";
	c->fd = -1;
	c->skips = c->o.skips ? c->o.skips : &c->own_skips;
	lmt_corpus_skips_release(c->skips);
	/* the read buffer exists from the start, so that no reader ever computes an
	 * offset from a NULL buffer (undefined behaviour, even for an offset of 0) */
	c->cap = 1 << 20;
	if (!(c->buf = malloc(c->cap))) {
		free(c);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	if (c->o.doc_sep && !*c->o.doc_sep) {
		free(c->buf);
		free(c);
		return lmt_err_set(err, LMT_EINVAL, "document separator is empty");
	}
	int nstdin = 0;
	for (int i = 0; i < npaths; i++) {
		nstdin += !strcmp(paths[i], "-");
		int rc = expand(c, paths[i], 0, NULL, err);
		if (rc) {
			lmt_corpus_close(c);
			return rc;
		}
	}
	if (nstdin > 1) {
		lmt_corpus_close(c);
		return lmt_err_set(err, LMT_EINVAL, "stdin ('-') given more than once");
	}
	*out = c;
	return 0;
}

static int add_source(struct lmt_corpus *c, const char *name, const char *label,
		      struct lmt_err *err)
{
	if (c->nnames >= UINT32_MAX - 1)
		return lmt_err_set(err, LMT_ERANGE, "more than 2^32 sources");
	if (LMT_GROW(c->srcs, c->namecap, c->nnames + 1))
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	struct source *s = &c->srcs[c->nnames];
	s->name = strdup(name);
	s->label = strdup(label);
	if (!s->name || !s->label) {
		free(s->name);
		free(s->label);
		return lmt_err_set(err, LMT_ENOMEM, "out of memory");
	}
	c->src = (uint32_t)c->nnames++;
	return 0;
}

static const char *label(const struct lmt_corpus *c)
{
	return c->srcs[c->src].label;
}

static void close_source(struct lmt_corpus *c)
{
	if (c->fd >= 0) {
		if (c->fd != STDIN_FILENO)
			close(c->fd);
		c->done_bytes += c->src_bytes;
	}
	c->fd = -1;
	if (c->nested) {
		archive_read_free(c->nested);
		c->nested = NULL;
	}
	free(c->nested_mem);
	c->nested_mem = NULL;
	if (c->ar && c->ar != c->arch) {
		c->done_bytes += (uint64_t)archive_filter_bytes(c->ar, -1);
		archive_read_free(c->ar);
	}
	c->ar = NULL;
	c->open = 0;
	c->start = c->end = 0;
	c->eof = 0;
}

/*
 * What went wrong in a, in words a user can act on. libarchive gives no message for
 * a gzip stream cut before its trailer, and liblzma's for a cut xz stream is "No
 * progress is possible"; both name the filter here. buf: room for the result.
 */
static const char *la_why(struct archive *a, char buf[160])
{
	const char *s = archive_error_string(a);
	const char *f = archive_filter_count(a) > 0 ? archive_filter_name(a, 0) : NULL;
	int packed = f && archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE;
	if ((!s || !*s) && packed)
		snprintf(buf, 160, "the %s data ends early or is damaged (a truncated file?)", f);
	else if (s && strstr(s, "No progress is possible")) /* liblzma's: xz, lzma or lzip */
		snprintf(buf, 160, "truncated %s input (the compressed data ends early)", packed ? f : "xz (or lzma)");
	else
		return s && *s ? s : "read error";
	return buf;
}

static ssize_t src_read(struct lmt_corpus *c, char *dst, size_t n, struct lmt_err *err)
{
	if (c->fd >= 0) {
		for (;;) {
			ssize_t r = read(c->fd, dst, n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return lmt_err_errno(err, "%s: read", label(c));
			c->src_bytes += (uint64_t)r;
			return r;
		}
	}
	struct archive *a = c->nested ? c->nested : c->ar;
	la_ssize_t r = archive_read_data(a, dst, n);
	char why[160];
	if (r < 0)
		return lmt_err_set(err, LMT_EFORMAT, "%s: %s", label(c), la_why(a, why));
	return r;
}

/* Read more input into buf[end..]; moves unread data to the front first. */
static int fill(struct lmt_corpus *c, struct lmt_err *err)
{
	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->cap - c->end < 65536 &&
	    LMT_GROW(c->buf, c->cap, c->cap < (1 << 20) ? (1 << 20) : c->cap * 2))
		return lmt_err_set(err, LMT_ENOMEM, "%s: out of memory", label(c));
	ssize_t r = src_read(c, c->buf + c->end, c->cap - c->end, err);
	if (r < 0)
		return (int)r;
	if (r == 0)
		c->eof = 1;
	c->end += (size_t)r;
	return 0;
}

static struct archive *new_raw_reader(void)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	archive_read_support_format_empty(a);
	return a;
}

static int open_archive_err(struct lmt_corpus *c, struct archive *a, const char *what,
			    struct lmt_err *err)
{
	(void)c;
	char why[160];
	int rc = lmt_err_set(err, LMT_EFORMAT, "'%s': %s", what, la_why(a, why));
	archive_read_free(a);
	return rc;
}

/* Open the next source. Returns 1 if one is open, 0 at the end of input, < 0 on error. */
static int open_next(struct lmt_corpus *c, struct lmt_err *err)
{
	for (;;) {
		if (c->arch) {
			struct archive_entry *e;
			int r = archive_read_next_header(c->arch, &e);
			if (r == ARCHIVE_EOF) {
				c->done_bytes += (uint64_t)archive_filter_bytes(c->arch, -1);
				archive_read_free(c->arch);
				c->arch = NULL;
				continue;
			}
			if (r < ARCHIVE_WARN) {
				/* name the member just read: the damage is after it */
				const char *prev = c->nnames ? c->srcs[c->nnames - 1].name : NULL;
				size_t pl = strlen(c->arch_path);
				char why[160];
				if (prev && !strncmp(prev, c->arch_path, pl) && prev[pl] == ':')
					return lmt_err_set(err, LMT_EFORMAT, "'%s': after member '%s': %s",
							   c->arch_path, prev + pl + 1, la_why(c->arch, why));
				return lmt_err_set(err, LMT_EFORMAT, "'%s': %s", c->arch_path, la_why(c->arch, why));
			}
			if (archive_entry_filetype(e) != AE_IFREG)
				continue;
			const char *mname = archive_entry_pathname(e);
			if (!mname)
				mname = "?";
			size_t nl = strlen(c->arch_path) + strlen(mname) + 2;
			char *name = malloc(nl), *lab = malloc(2 * nl + 16);
			if (!name || !lab) {
				free(name);
				free(lab);
				return lmt_err_set(err, LMT_ENOMEM, "out of memory");
			}
			snprintf(name, nl, "%s:%s", c->arch_path, mname);
			snprintf(lab, 2 * nl + 16, "'%s' member '%s'", c->arch_path, mname);
			int rc = add_source(c, name, lab, err);
			free(name);
			free(lab);
			if (rc)
				return rc;
			c->found = 1;
			c->fmt = format_of(c, mname);
			c->ar = c->arch;
			if (any_sfx(mname, compress_sfx, LMT_ARRAY_SIZE(compress_sfx))) {
				/* a compressed member: decompress it from memory */
				size_t cap = 0, len = 0;
				char *m = NULL;
				for (;;) {
					if (LMT_GROW(m, cap, len + 65536)) {
						free(m);
						return lmt_err_set(err, LMT_ENOMEM, "%s: out of memory", label(c));
					}
					la_ssize_t k = archive_read_data(c->arch, m + len, cap - len);
					if (k < 0) {
						char why[160];
						free(m);
						return lmt_err_set(err, LMT_EFORMAT, "%s: %s", label(c), la_why(c->arch, why));
					}
					if (k == 0)
						break;
					len += (size_t)k;
				}
				c->nested_mem = m;
				c->nested = new_raw_reader();
				struct archive_entry *ne;
				char why[160];
				if (!c->nested || archive_read_open_memory(c->nested, m, len) != ARCHIVE_OK ||
				    archive_read_next_header(c->nested, &ne) < ARCHIVE_WARN)
					return lmt_err_set(err, LMT_EFORMAT, "%s: %s", label(c),
							   c->nested ? la_why(c->nested, why) : "out of memory");
			}
			c->open = 1;
			return 1;
		}
		if (c->ileaf >= c->nleaves)
			return 0;
		const char *path = c->leaves[c->ileaf].path;
		c->found = c->leaves[c->ileaf++].found;
		int kind = classify(path);
		if (kind == LEAF_PLAIN) {
			/* a found file that vanished or changed since the walk is passed over */
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				if (!c->found)
					return lmt_err_errno(err, "'%s'", path);
				int rc = skip(c, path, strerror(errno), err);
				if (rc)
					return rc;
				continue;
			}
			char *lab = malloc(strlen(path) + 3);
			if (!lab) {
				close(fd);
				return lmt_err_set(err, LMT_ENOMEM, "out of memory");
			}
			sprintf(lab, "'%s'", path);
			int rc = add_source(c, path, lab, err);
			free(lab);
			if (rc) {
				close(fd);
				return rc;
			}
			c->fd = fd;
			c->src_bytes = 0;
			c->fmt = format_of(c, path);
			c->open = 1;
			return 1;
		}
		if (kind == LEAF_ARCHIVE) {
			struct archive *a = archive_read_new();
			if (!a)
				return lmt_err_set(err, LMT_ENOMEM, "out of memory");
			archive_read_support_filter_all(a);
			archive_read_support_format_all(a);
			if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK)
				return open_archive_err(c, a, path, err);
			c->arch = a;
			c->arch_path = path;
			continue;
		}
		/* compressed file or stdin: one stream through libarchive */
		struct archive *a = new_raw_reader();
		if (!a)
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		const char *name = kind == LEAF_STDIN ? "<stdin>" : path;
		if (kind == LEAF_STDIN) {
			archive_read_support_format_tar(a);
			archive_read_support_format_zip(a);
		}
		int r = kind == LEAF_STDIN ? archive_read_open_fd(a, STDIN_FILENO, 1 << 16)
					   : archive_read_open_filename(a, path, 1 << 16);
		if (r != ARCHIVE_OK)
			return open_archive_err(c, a, name, err);
		struct archive_entry *e;
		r = archive_read_next_header(a, &e);
		if (r == ARCHIVE_EOF) { /* empty input */
			/* an archive's end with no member before it: a tar stream of only
			 * NUL bytes reads so, whether an empty archive was meant or not */
			int fmt = archive_format(a) & ARCHIVE_FORMAT_BASE_MASK;
			archive_read_free(a);
			if (kind == LEAF_STDIN && fmt && fmt != ARCHIVE_FORMAT_RAW && fmt != ARCHIVE_FORMAT_EMPTY &&
			    (r = skip(c, "<stdin>", "an archive with no members (a tar stream of only NUL bytes reads so)", err)))
				return r;
			continue;
		}
		if (r < ARCHIVE_WARN)
			return open_archive_err(c, a, name, err);
		if (kind == LEAF_STDIN && archive_format(a) != ARCHIVE_FORMAT_RAW) {
			/* an archive arrived on stdin: walk it like a named one */
			c->arch = a;
			c->arch_path = "<stdin>";
			/* the first member's header is already read: rewind by hand */
			if (archive_entry_filetype(e) != AE_IFREG)
				continue;
			const char *mname = archive_entry_pathname(e);
			char nm[4200], lab[4300];
			snprintf(nm, sizeof nm, "<stdin>:%s", mname ? mname : "?");
			snprintf(lab, sizeof lab, "'<stdin>' member '%s'", mname ? mname : "?");
			int rc = add_source(c, nm, lab, err);
			if (rc)
				return rc;
			c->found = 1;
			c->fmt = format_of(c, mname ? mname : "");
			c->ar = a;
			c->open = 1;
			return 1;
		}
		char *lab = malloc(strlen(name) + 3);
		if (!lab) {
			archive_read_free(a);
			return lmt_err_set(err, LMT_ENOMEM, "out of memory");
		}
		sprintf(lab, "'%s'", name);
		int rc = add_source(c, name, lab, err);
		free(lab);
		if (rc) {
			archive_read_free(a);
			return rc;
		}
		c->ar = a;
		c->fmt = kind == LEAF_STDIN ? c->o.format : format_of(c, path);
		if (c->fmt == LMT_CORPUS_AUTO) {
			/* sniff stdin: JSONL if the first non-blank byte is '{' */
			c->open = 1;
			while (!c->eof && c->end - c->start < 4096) {
				if ((rc = fill(c, err)))
					return rc;
			}
			size_t i = c->start;
			if (c->end - i >= 3 && !memcmp(c->buf + i, UTF8_BOM, 3))
				i += 3;
			while (i < c->end && (c->buf[i] == ' ' || c->buf[i] == '\n' ||
					      c->buf[i] == '\r' || c->buf[i] == '\t'))
				i++;
			c->fmt = i < c->end && c->buf[i] == '{' ? LMT_CORPUS_JSONL : LMT_CORPUS_TEXT;
		}
		c->open = 1;
		return 1;
	}
}

static uint64_t max_doc(const struct lmt_corpus *c)
{
	return c->o.max_doc ? c->o.max_doc : LMT_CORPUS_MAX_DOC;
}

/* The error for a document past max_doc: at line `line` (0: not line by line),
 * or the source's document `nth` (0: the whole source is one) */
static int too_long(struct lmt_corpus *c, uint64_t line, uint64_t nth, struct lmt_err *err)
{
	char where[48] = "";
	if (line)
		snprintf(where, sizeof where, " line %llu:", (unsigned long long)line);
	else if (nth)
		snprintf(where, sizeof where, " document %llu:", (unsigned long long)nth);
	return lmt_err_set(err, LMT_EFORMAT, "%s:%s longer than %llu bytes, the most a document may hold "
			   "(--max-doc-bytes)%s", label(c), where, (unsigned long long)max_doc(c),
			   line || nth ? "" : "; with --txt-docs file, the default for text, a whole file is one document "
			   "(--txt-docs line or blank splits it)");
}

/* Next line without its '\n'. 1: line; 0: end of source; < 0: error, also for a
 * line longer than max_doc (found before more than that is read). */
static int next_line(struct lmt_corpus *c, char **p, size_t *n, struct lmt_err *err)
{
	size_t scan = 0; /* bytes past start already searched */
	for (;;) {
		char *b = c->buf + c->start;
		char *nl = c->end > c->start + scan ? memchr(b + scan, '\n', c->end - c->start - scan) : NULL;
		if (nl || (c->eof && c->end > c->start)) {
			*p = b;
			*n = nl ? (size_t)(nl - b) : c->end - c->start;
			if (*n > max_doc(c))
				return too_long(c, c->line + 1, 0, err);
			c->start += *n + (nl != NULL);
			c->line++;
			return 1;
		}
		if (c->eof)
			return 0;
		scan = c->end - c->start;
		if (scan > max_doc(c))
			return too_long(c, c->line + 1, 0, err);
		int rc = fill(c, err);
		if (rc)
			return rc;
	}
}

/*
 * lmt_doc.raw_hash: four lanes of 8 bytes, each one multiply a lane deep, mixed
 * at the end, then lmt_hash_bytes of the tail. It tells two reads of one input
 * apart, nothing more; lmt_hash_bytes over the whole text was one multiply chain,
 * 4 cycles for every 8 bytes, a twentieth of dedup-minhash's time.
 */
static uint64_t raw_hash(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t h0 = n, h1 = ~n, h2 = n * 0x9e3779b97f4a7c15ULL, h3 = 0x243f6a8885a308d3ULL;
	const uint64_t k = 0xd6e8feb86659fd93ULL;
	for (; n >= 32; p += 32, n -= 32) {
		h0 = (h0 ^ lmt_load_u64(p)) * k;
		h1 = (h1 ^ lmt_load_u64(p + 8)) * k;
		h2 = (h2 ^ lmt_load_u64(p + 16)) * k;
		h3 = (h3 ^ lmt_load_u64(p + 24)) * k;
		/* a lane's high bits down, so that every byte reaches all 64 */
		h0 ^= h0 >> 29;
		h1 ^= h1 >> 29;
		h2 ^= h2 >> 29;
		h3 ^= h3 >> 29;
	}
	uint64_t h = lmt_mix64(h0) + 3 * lmt_mix64(h1) + 5 * lmt_mix64(h2) + 7 * lmt_mix64(h3);
	return lmt_hash_bytes(p, n, h);
}

static int doc_reserve(struct lmt_corpus *c, size_t n, struct lmt_err *err)
{
	if (LMT_GROW(c->doc, c->doccap, n + 1))
		return lmt_err_set(err, LMT_ENOMEM, "%s: document of %zu bytes: out of memory", label(c), n);
	return 0;
}

/* ---- a fast path for JSONL ----
 *
 * Most JSONL corpora are flat objects, and building a jansson tree for every line
 * costs more than everything else the readers do. This scanner validates the line
 * as strict JSON (RFC 8259: grammar, escapes, UTF-8, surrogate pairs), records
 * where the text field's string is and decodes it as it goes; it gives up (returns
 * 0) on anything it does not handle plainly, and jansson then reads the line as
 * before, with its messages for bad input. Like jansson, the last of duplicate keys
 * wins. It gives up on no valid line that jansson takes (escaped keys are decoded,
 * and it nests as deep as jansson does), so a line's verdict does not depend on
 * which of the two reads it. Two things jansson refuses that RFC 8259 allows the
 * scan takes, as Python's json module does, since the reader keeps only the text: a
 * number beyond 64-bit integers or doubles ("too big integer", "real number
 * overflow"; a document's metadata may hold a 64-bit unsigned hash), and a NUL
 * (\u0000) in an object's key ("NUL byte in object key not supported"). */

/* the depth of a value jansson reads at most (JSON_PARSER_MAX_DEPTH in 2.14; the top
 * object is at depth 1, a value in it at 2, a string or a number counts as an
 * object does): the scan gives up beyond, and jansson says why */
#define JSCAN_MAX_DEPTH 2048

struct jscan {
	const unsigned char *p, *end;
	int depth;
	const char *field;
	size_t flen;
	const unsigned char *val;  /* the text field's string, quotes excluded */
	size_t vlen;
	unsigned char *out;        /* NULL, or where to decode the text field's string */
	size_t olen;
	int escaped_out;           /* decode it to lmt_json_escape's form */
};

static void jws(struct jscan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* a byte's value as a hex digit, -1 if it is none */
static const signed char hexval[256] = {
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, -1, -1, -1, -1, -1, -1,
	-1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

/* The value of 4 hex digits, or -1 if one is not: four loads and one test, where
 * the scan checks every \u escape (one every few bytes in JSONL written with
 * them for every character beyond ASCII) */
static inline __attribute__((always_inline)) long hex4_checked(const unsigned char *p)
{
	int a = hexval[p[0]], b = hexval[p[1]], c = hexval[p[2]], d = hexval[p[3]];
	if ((a | b | c | d) < 0)
		return -1;
	return (long)a << 12 | b << 8 | c << 4 | d;
}

/* the len bytes at src to out, which has 16 bytes of room past them: short runs
 * (between the escapes of text written with \u for every character beyond
 * ASCII) as one 16-byte copy where src has 16 bytes before end */
static inline void copy_run(unsigned char *out, const unsigned char *src, size_t len, const unsigned char *end)
{
#if defined(__SSE2__)
	if (len <= 16 && end - src >= 16) {
		_mm_storeu_si128((__m128i *)out, _mm_loadu_si128((const __m128i *)src));
		return;
	}
#endif
	memcpy(out, src, len);
}

/* A string at s->p ('"'): 1 and its content span, or 0; *escaped (if not NULL)
 * whether it holds an escape. With out (room for
 * the span's length plus 16 bytes), its decoded text too, written as it is
 * checked, in *olen bytes: one pass instead of a check and a decoding; with
 * s->escaped_out, the text in lmt_json_escape's form instead (the escapes it
 * writes kept, \/ and \u of any other character decoded), for a writer to copy
 * as it is. */
static int jstring(struct jscan *s, const unsigned char **start, size_t *len, int *escaped, unsigned char *out,
		   size_t *olen)
{
	/* the character of each simple escape, 0 for a letter that makes none */
	static const unsigned char simple[128] = {
		['"'] = '"', ['\\'] = '\\', ['/'] = '/', ['b'] = '\b', ['f'] = '\f', ['n'] = '\n', ['r'] = '\r',
		['t'] = '\t',
	};
	const int form = s->escaped_out;
	const unsigned char *p = s->p + 1, *end = s->end, *from = p;
	struct lmt_jsonstops j = { NULL, 0 };
	size_t k = 0;
	int esc = 0;
	*start = p;
	for (;;) {
		p = lmt_json_next_stop(&j, p, end);
		if (p >= end || *p < 0x20)
			return 0;
		if (*p == '"')
			break;
		if (*p == '\\') {
			if (p + 1 >= end)
				return 0;
			if (out) {
				copy_run(out + k, from, (size_t)(p - from), end);
				k += (size_t)(p - from);
			}
			unsigned char e = p[1];
			if (e != 'u') {
				unsigned char c = e < 128 ? simple[e] : 0;
				if (!c)
					return 0;
				esc = 1;
				if (out && form && e != '/') {
					out[k++] = '\\';
					out[k++] = e;
				} else if (out) {
					out[k++] = c;
				}
				p += 2;
				from = p;
				continue;
			}
			esc = 1;
			/* \u escapes, one after another while they come (text in another
			 * script written with them is nothing else) */
			do {
				long hv = end - p < 6 ? -1 : hex4_checked(p + 2);
				if (hv < 0)
					return 0;
				unsigned v = (unsigned)hv;
				if (v >= 0xdc00 && v <= 0xdfff)
					return 0; /* a lone low surrogate: jansson's message */
				if (v >= 0xd800 && v <= 0xdbff) {
					long lo = end - p < 12 || p[6] != '\\' || p[7] != 'u' ? -1 : hex4_checked(p + 8);
					if (lo < 0xdc00 || lo > 0xdfff)
						return 0;
					v = 0x10000 + ((v - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
					p += 12;
				} else {
					p += 6;
				}
				if (out && form && (v < 0x20 || v == '"' || v == '\\'))
					k += (size_t)lmt_json_escape_ascii(v, (char *)out + k);
				else if (out)
					k += (size_t)lmt_utf8_encode(v, (char *)out + k);
			} while (end - p >= 2 && p[0] == '\\' && p[1] == 'u');
			from = p;
			continue;
		}
		/* one UTF-8 sequence, no overlongs, no surrogates, at most U+10FFFF */
		uint32_t cp;
		int n = lmt_utf8_decode_fast(p, (size_t)(end - p), &cp);
		if (cp >= LMT_UTF8_BAD)
			return 0;
		p += n;
	}
	if (out) {
		copy_run(out + k, from, (size_t)(p - from), end);
		*olen = k + (size_t)(p - from);
	}
	if (escaped)
		*escaped = esc;
	*len = (size_t)(p - *start);
	s->p = p + 1;
	return 1;
}

static int jvalue(struct jscan *s);

/*
 * Whether the escaped key whose opening quote is at q (checked, kl bytes between
 * its quotes) decodes to the text field's name: 1 or 0; -1 where the name is too
 * long to check here (jansson then reads the line).
 */
static int key_is_field(const struct jscan *s, const unsigned char *q, size_t kl)
{
	unsigned char buf[6 * 64 + 16];
	if (kl > 6 * s->flen)
		return 0; /* each byte decoded comes from 6 bytes at most (\u0041) */
	if (s->flen > 64)
		return -1;
	struct jscan k = *s;
	k.p = q;
	k.escaped_out = 0;
	const unsigned char *start;
	size_t len, olen;
	if (!jstring(&k, &start, &len, NULL, buf, &olen))
		return -1;
	return olen == s->flen && !memcmp(buf, s->field, olen);
}

static int jobject(struct jscan *s, int top)
{
	s->p++;
	jws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return 1;
	}
	for (;;) {
		const unsigned char *k, *q = s->p;
		size_t kl;
		int kesc;
		if (s->p >= s->end || *s->p != '"' || !jstring(s, &k, &kl, &kesc, NULL, NULL))
			return 0;
		int is_field = 0;
		if (top && !kesc)
			is_field = kl == s->flen && !memcmp(k, s->field, kl);
		else if (top && (is_field = key_is_field(s, q, kl)) < 0)
			return 0;
		jws(s);
		if (s->p >= s->end || *s->p != ':')
			return 0;
		s->p++;
		jws(s);
		if (is_field) {
			if (s->p >= s->end || *s->p != '"')
				return 0; /* not a string: jansson says so */
			if (!jstring(s, &s->val, &s->vlen, NULL, s->out, &s->olen))
				return 0;
		} else if (!jvalue(s)) {
			return 0;
		}
		jws(s);
		if (s->p >= s->end)
			return 0;
		if (*s->p == '}') {
			s->p++;
			return 1;
		}
		if (*s->p != ',')
			return 0;
		s->p++;
		jws(s);
	}
}

static int jvalue(struct jscan *s)
{
	if (s->p >= s->end || ++s->depth > JSCAN_MAX_DEPTH)
		return 0;
	int ok = 0;
	const unsigned char *start;
	size_t len;
	switch (*s->p) {
	case '{':
		ok = jobject(s, 0);
		break;
	case '[':
		s->p++;
		jws(s);
		if (s->p < s->end && *s->p == ']') {
			s->p++;
			ok = 1;
			break;
		}
		for (;;) {
			if (!jvalue(s))
				break;
			jws(s);
			if (s->p < s->end && *s->p == ']') {
				s->p++;
				ok = 1;
				break;
			}
			if (s->p >= s->end || *s->p != ',')
				break;
			s->p++;
			jws(s);
		}
		break;
	case '"':
		ok = jstring(s, &start, &len, NULL, NULL, NULL);
		break;
	case 't':
		ok = s->end - s->p >= 4 && !memcmp(s->p, "true", 4);
		s->p += ok ? 4 : 0;
		break;
	case 'f':
		ok = s->end - s->p >= 5 && !memcmp(s->p, "false", 5);
		s->p += ok ? 5 : 0;
		break;
	case 'n':
		ok = s->end - s->p >= 4 && !memcmp(s->p, "null", 4);
		s->p += ok ? 4 : 0;
		break;
	default: {
		const unsigned char *p = s->p, *e = s->end;
		if (p < e && *p == '-')
			p++;
		if (p < e && *p == '0')
			p++;
		else if (p < e && *p >= '1' && *p <= '9')
			while (p < e && *p >= '0' && *p <= '9')
				p++;
		else
			break;
		if (p < e && *p == '.') {
			p++;
			if (p >= e || *p < '0' || *p > '9')
				break;
			while (p < e && *p >= '0' && *p <= '9')
				p++;
		}
		if (p < e && (*p == 'e' || *p == 'E')) {
			p++;
			if (p < e && (*p == '+' || *p == '-'))
				p++;
			if (p >= e || *p < '0' || *p > '9')
				break;
			while (p < e && *p >= '0' && *p <= '9')
				p++;
		}
		s->p = p;
		ok = 1;
	}
	}
	s->depth--;
	return ok;
}

/* 1: *start and *len give the text field's string (escaped or not), decoded into
 * out (room for n + 16 bytes), or with escaped_out put in lmt_json_escape's
 * form, in *olen bytes; 0: ask jansson. */
static int fast_jsonl(const char *line, size_t n, const char *field, unsigned char *out, int escaped_out,
		      const unsigned char **start, size_t *len, size_t *olen)
{
	struct jscan s = { (const unsigned char *)line, (const unsigned char *)line + n, 1, field, strlen(field), NULL,
			   0, out, 0, escaped_out };
	jws(&s);
	if (s.p >= s.end || *s.p != '{' || !jobject(&s, 1))
		return 0;
	jws(&s);
	if (s.p != s.end || !s.val)
		return 0;
	*start = s.val;
	*len = s.vlen;
	*olen = s.olen;
	return 1;
}

static int read_jsonl(struct lmt_corpus *c, struct lmt_doc *d, struct lmt_err *err)
{
	char *p;
	size_t n;
	int rc;
	while ((rc = next_line(c, &p, &n, err)) == 1) {
		if (c->line == 1 && n >= 3 && !memcmp(p, UTF8_BOM, 3)) {
			p += 3; /* a byte order mark before the first line: not JSON, skipped as jq does */
			n -= 3;
		}
		size_t i = 0;
		while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
			i++;
		if (i == n)
			continue; /* blank line */
		const unsigned char *fs;
		size_t fl, len;
		d->escaped = 0; /* of a line before, skipped as empty */
		c->hashed = 0;
		/* room for the decoded text before the scan, which writes it: the line's
		 * length (decoding never lengthens a string) and 16 bytes */
		struct lmt_docbatch *b = c->into;
		char *dst;
		if (b) {
			if (LMT_GROW(b->text, b->cap, b->len + n + 17))
				return lmt_err_set(err, LMT_ENOMEM, "%s: document of %zu bytes: out of memory",
						   label(c), n);
			dst = b->text + b->len;
		} else {
			if ((rc = doc_reserve(c, n + 16, err)))
				return rc;
			dst = c->doc;
		}
		if (fast_jsonl(p, n, c->field, (unsigned char *)dst, c->o.keep_escaped, &fs, &fl, &len)) {
			if (c->o.raw_hash) {
				d->raw_hash = raw_hash(fs, fl);
				c->hashed = 1;
			}
			d->escaped = c->o.keep_escaped;
			if (len == 0 && !c->o.keep_empty)
				continue;
			dst[len] = 0;
			d->text = dst;
			d->len = len;
			d->line = c->line;
			return 1;
		}
		json_error_t je;
		json_t *root = json_loadb(p, n, JSON_ALLOW_NUL, &je);
		if (!root && n >= 3 && !memcmp(p, UTF8_BOM, 3))
			return lmt_err_set(err, LMT_EFORMAT, "%s: line %llu: a byte order mark (EF BB BF) starts the line; "
					   "only a file's first line may have one", label(c), (unsigned long long)c->line);
		if (!root)
			return lmt_err_set(err, LMT_EFORMAT, "%s: line %llu: invalid JSON: %s (column %d)",
					   label(c), (unsigned long long)c->line, je.text, je.column);
		if (!json_is_object(root)) {
			json_decref(root);
			return lmt_err_set(err, LMT_EFORMAT, "%s: line %llu: expected a JSON object",
					   label(c), (unsigned long long)c->line);
		}
		json_t *t = json_object_get(root, c->field);
		if (!t || !json_is_string(t)) {
			json_decref(root);
			return lmt_err_set(err, LMT_EFORMAT, "%s: line %llu: %s '%s'", label(c),
					   (unsigned long long)c->line,
					   t ? "expected a string in field" : "no field", c->field);
		}
		len = json_string_length(t);
		if (len == 0 && !c->o.keep_empty) {
			json_decref(root);
			continue;
		}
		if ((rc = doc_reserve(c, len, err))) {
			json_decref(root);
			return rc;
		}
		memcpy(c->doc, json_string_value(t), len);
		c->doc[len] = 0;
		json_decref(root);
		d->text = c->doc;
		d->len = len;
		d->line = c->line;
		return 1;
	}
	return rc;
}

static int read_text(struct lmt_corpus *c, struct lmt_doc *d, struct lmt_err *err)
{
	int rc;
	if (c->o.doc_sep) {
		const char *sep = c->o.doc_sep;
		size_t sl = strlen(sep), scan = 0;
		for (;;) {
			char *b = c->buf + c->start;
			size_t avail = c->end - c->start;
			char *hit = avail > scan ? memmem(b + scan, avail - scan, sep, sl) : NULL;
			if (hit || (c->eof && avail)) {
				size_t n = hit ? (size_t)(hit - b) : avail;
				if (n > max_doc(c))
					return too_long(c, 0, c->ordinal + 1, err);
				c->start += hit ? n + sl : n;
				if (n == 0 && !c->o.keep_empty) {
					scan = 0;
					continue;
				}
				d->text = b;
				d->len = n;
				return 1;
			}
			if (c->eof)
				return 0;
			if (avail > max_doc(c) + sl)
				return too_long(c, 0, c->ordinal + 1, err);
			scan = avail >= sl ? avail - sl + 1 : 0;
			if ((rc = fill(c, err)))
				return rc;
		}
	}
	if (c->o.txt_docs == LMT_TXT_FILE) {
		if (c->eof && c->start == c->end)
			return 0;
		while (!c->eof) {
			if (c->end - c->start > max_doc(c))
				return too_long(c, 0, 0, err);
			if ((rc = fill(c, err)))
				return rc;
		}
		if (c->end - c->start > max_doc(c))
			return too_long(c, 0, 0, err);
		d->text = c->buf + c->start;
		d->len = c->end - c->start;
		c->start = c->end;
		return d->len || c->o.keep_empty ? 1 : 0;
	}
	char *p;
	size_t n;
	if (c->o.txt_docs == LMT_TXT_LINE) {
		while ((rc = next_line(c, &p, &n, err)) == 1) {
			if (n && p[n - 1] == '\r')
				n--;
			if (n == 0 && !c->o.keep_empty)
				continue;
			d->text = p;
			d->len = n;
			d->line = c->line;
			return 1;
		}
		return rc;
	}
	/* LMT_TXT_BLANK: paragraphs; the document keeps its inner line breaks */
	size_t len = 0;
	uint64_t first = 0;
	while ((rc = next_line(c, &p, &n, err)) == 1) {
		int blank = n == 0 || (n == 1 && p[0] == '\r');
		if (blank) {
			if (len)
				break;
			continue;
		}
		if (!len)
			first = c->line;
		if (len + !!len + n > max_doc(c))
			return too_long(c, first, 0, err); /* the paragraph's first line */
		if ((rc = doc_reserve(c, len + n + 1, err)))
			return rc;
		if (len)
			c->doc[len++] = '\n';
		memcpy(c->doc + len, p, n);
		len += n;
	}
	if (rc < 0)
		return rc;
	if (!len)
		return 0;
	c->doc[len] = 0;
	d->text = c->doc;
	d->len = len;
	d->line = first;
	return 1;
}

/* Reads the start of the open source and checks it is text: 1 if so (or named); 0 if it was
 * a found binary file, now closed and its source id given back; < 0 on error. */
static int sniff(struct lmt_corpus *c, struct lmt_err *err)
{
	int rc;
	while (!c->eof && c->end - c->start < LMT_CORPUS_SNIFF_UTF8)
		if ((rc = fill(c, err)))
			return rc;
	const char *why = lmt_corpus_binary(c->buf + c->start, c->end - c->start);
	if (!why)
		return 1;
	/* a named file is read as given (byte-level tokenizers round-trip any bytes),
	 * unless strict */
	if (!c->found)
		return c->o.strict ? lmt_err_set(err, LMT_EFORMAT, "%s: %s", label(c), why) : 1;
	struct source *s = &c->srcs[c->src];
	rc = skip(c, s->name, why, err);
	if (rc)
		return rc;
	/* the source is the newest: give its id back, so the rest keep theirs */
	free(s->name);
	free(s->label);
	c->nnames--;
	close_source(c);
	return 0;
}

int lmt_corpus_next(struct lmt_corpus *c, struct lmt_doc *d, struct lmt_err *err)
{
	for (;;) {
		if (!c->open) {
			int rc = open_next(c, err);
			if (rc <= 0)
				return rc;
			c->ordinal = 0;
			c->line = 0;
			if ((rc = sniff(c, err)) < 0)
				return rc;
			if (rc == 0)
				continue;
		}
		memset(d, 0, sizeof *d);
		c->hashed = 0;
		int rc = c->fmt == LMT_CORPUS_JSONL ? read_jsonl(c, d, err) : read_text(c, d, err);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			if (c->o.raw_hash && !c->hashed)
				d->raw_hash = raw_hash(d->text, d->len);
			d->source = c->src;
			d->ordinal = c->ordinal++;
			return 1;
		}
		close_source(c);
	}
}

void lmt_corpus_close(struct lmt_corpus *c)
{
	if (!c)
		return;
	close_source(c);
	if (c->arch)
		archive_read_free(c->arch);
	for (size_t i = 0; i < c->nleaves; i++)
		free(c->leaves[i].path);
	lmt_corpus_skips_release(&c->own_skips);
	for (size_t i = 0; i < c->nnames; i++) {
		free(c->srcs[i].name);
		free(c->srcs[i].label);
	}
	free(c->leaves);
	free(c->srcs);
	free(c->buf);
	free(c->doc);
	free(c);
}

uint32_t lmt_corpus_nsources(const struct lmt_corpus *c)
{
	return (uint32_t)c->nnames;
}

const char *lmt_corpus_source_name(const struct lmt_corpus *c, uint32_t id)
{
	return id < c->nnames ? c->srcs[id].name : NULL;
}

void lmt_corpus_progress(const struct lmt_corpus *c, uint64_t *done, uint64_t *total)
{
	uint64_t d = c->done_bytes;
	if (c->fd >= 0)
		d += c->src_bytes;
	else if (c->arch)
		d += (uint64_t)archive_filter_bytes(c->arch, -1);
	else if (c->ar)
		d += (uint64_t)archive_filter_bytes(c->ar, -1);
	*done = d;
	*total = c->total_bytes;
}

int lmt_corpus_read_batch(struct lmt_corpus *c, struct lmt_docbatch *b, size_t max_bytes,
			  size_t max_docs, int (*keep)(void *ctx, const struct lmt_doc *d),
			  void *ctx, struct lmt_err *err)
{
	b->len = 0;
	b->n = 0;
	if (b->stopped)
		return 0;
	while (b->len < max_bytes && b->n < max_docs) {
		struct lmt_doc d;
		c->into = b;
		int rc = lmt_corpus_next(c, &d, err);
		c->into = NULL;
		/* before anything can move b->text */
		int inplace = rc == 1 && b->text && d.text == b->text + b->len;
		if (rc < 0)
			return rc;
		if (rc == 1 && !inplace && b->len == 0 && d.text == c->buf && c->start == c->end && d.len < c->cap &&
		    (b->text || !LMT_GROW(b->text, b->cap, 65536))) {
			/* the batch's first document is all the reader's buffer holds (a
			 * whole text file, say): the buffers change places, so it is not
			 * copied (64 MB took 30 ms, faulting in the batch's pages, while
			 * the threads waited for it); the reader gets the batch's, which
			 * it grows as it needs */
			char *t = b->text;
			size_t cap = b->cap;
			b->text = c->buf;
			b->cap = c->cap;
			c->buf = t;
			c->cap = cap;
			c->start = c->end = 0;
			b->text[d.len] = 0;
			inplace = 1;
		}
		if (rc == 0) {
			b->stopped = 1;
			break;
		}
		if (keep) {
			int k = keep(ctx, &d);
			if (k < 0) {
				b->stopped = 1;
				break;
			}
			if (k == 0)
				continue;
		}
		if (LMT_GROW(b->text, b->cap, b->len + d.len + 1) || LMT_GROW(b->docs, b->capdocs, b->n + 1))
			return lmt_err_set(err, LMT_ENOMEM, "out of memory batching documents");
		if (!inplace) {
			memcpy(b->text + b->len, d.text, d.len);
			b->text[b->len + d.len] = 0;
		}
		d.text = (const char *)(uintptr_t)b->len; /* an offset until the batch is full */
		b->docs[b->n++] = d;
		b->len += d.len + 1;
	}
	for (size_t i = 0; i < b->n; i++)
		b->docs[i].text = b->text + (uintptr_t)b->docs[i].text;
	return (int)LMT_MIN(b->n, (size_t)INT32_MAX);
}

void lmt_docbatch_release(struct lmt_docbatch *b)
{
	free(b->text);
	free(b->docs);
	memset(b, 0, sizeof *b);
}

/* ---- read-ahead queue: two batches, one being filled while the other is used ---- */

struct lmt_batchq {
	struct lmt_corpus *c;
	size_t max_bytes, max_docs;
	int (*keep)(void *ctx, const struct lmt_doc *d);
	void *ctx;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lmt_docbatch slot[2];
	int full[2];             /* 1: filled, not yet taken */
	int busy[2];             /* 1: handed to the caller */
	int count[2];            /* documents in the slot */
	int fill, take;          /* next slot to fill / to take */
	int done, stop, rc;
	int ahead;               /* 0: no thread (lmt_batchq_get or lmt_batchq_fill reads) */
	unsigned nread;          /* batches read so far */
	struct lmt_err err;
};

/* The first batches are smaller (an eighth of max_bytes, then a quarter, a half),
 * so that the caller starts on the first one soon instead of waiting for the whole
 * of it; the batches are the same with or without the thread. A batch that ends
 * the input or keep's documents (its stopped flag) is the last: the other slot's
 * flag is clear, and reading into it went on past keep's stop (tok-train -j2
 * --max-bytes took a short document after the one that did not fit). */
static int batchq_read(struct lmt_batchq *q, struct lmt_docbatch *b, struct lmt_err *err)
{
	unsigned k = q->nread < 3 ? 3 - q->nread : 0;
	size_t max_bytes = LMT_MAX(q->max_bytes >> k, 1);
	q->nread++;
	return lmt_corpus_read_batch(q->c, b, max_bytes, q->max_docs, q->keep, q->ctx, err);
}

/* What reading into slot i gave: n documents (the slot full, and the queue done if
 * the batch stopped), or n <= 0 and the reader's error (the queue done). */
static void batchq_took(struct lmt_batchq *q, int i, int n, const struct lmt_err *err)
{
	if (n > 0) {
		q->count[i] = n;
		q->full[i] = 1;
		q->done = q->slot[i].stopped;
	} else {
		q->done = 1;
		q->rc = n;
		q->err = *err;
	}
}

static void *batchq_main(void *arg)
{
	struct lmt_batchq *q = arg;
	for (;;) {
		pthread_mutex_lock(&q->mu);
		while (!q->stop && (q->full[q->fill] || q->busy[q->fill]))
			pthread_cond_wait(&q->cv, &q->mu);
		int i = q->fill;
		int stop = q->stop;
		pthread_mutex_unlock(&q->mu);
		if (stop)
			break;
		struct lmt_err err = { 0 };
		int n = batchq_read(q, &q->slot[i], &err);
		pthread_mutex_lock(&q->mu);
		batchq_took(q, i, n, &err);
		if (n > 0)
			q->fill = 1 - i;
		int done = q->done;
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mu);
		if (done)
			break;
	}
	return NULL;
}

struct lmt_batchq *lmt_batchq_start(struct lmt_corpus *c, size_t max_bytes, size_t max_docs,
				    int (*keep)(void *ctx, const struct lmt_doc *d), void *ctx, int ahead)
{
	struct lmt_batchq *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->c = c;
	q->max_bytes = max_bytes;
	q->max_docs = max_docs;
	q->keep = keep;
	q->ctx = ctx;
	q->ahead = ahead;
	if (!ahead)
		return q;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	if (pthread_create(&q->th, NULL, batchq_main, q)) {
		pthread_mutex_destroy(&q->mu);
		pthread_cond_destroy(&q->cv);
		free(q);
		return NULL;
	}
	return q;
}

int lmt_batchq_get(struct lmt_batchq *q, struct lmt_docbatch **b, struct lmt_err *err)
{
	if (!q->ahead) {
		if (!q->full[q->take] && !q->done) {
			/* nothing read ahead: into the slot the caller had last (done with
			 * it, as it asks for the next), so that without lmt_batchq_fill
			 * one slot is all the memory used */
			q->take = 1 - q->take;
			lmt_batchq_fill(q);
		}
		if (q->full[q->take]) {
			q->full[q->take] = 0;
			*b = &q->slot[q->take];
			q->take = 1 - q->take;
			return 1;
		}
		if (q->rc < 0 && err)
			*err = q->err;
		*b = NULL;
		return q->rc;
	}
	pthread_mutex_lock(&q->mu);
	while (!q->full[q->take] && !q->done)
		pthread_cond_wait(&q->cv, &q->mu);
	int rc;
	if (q->full[q->take]) {
		int i = q->take;
		q->full[i] = 0;
		q->busy[i] = 1;
		q->take = 1 - i;
		*b = &q->slot[i];
		rc = 1;
	} else {
		rc = q->rc;
		if (rc < 0 && err)
			*err = q->err;
		*b = NULL;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

void lmt_batchq_fill(struct lmt_batchq *q)
{
	if (q->ahead || q->done || q->full[q->take])
		return;
	struct lmt_err err = { 0 };
	batchq_took(q, q->take, batchq_read(q, &q->slot[q->take], &err), &err);
}

void lmt_batchq_put(struct lmt_batchq *q, struct lmt_docbatch *b)
{
	if (!q->ahead)
		return;
	pthread_mutex_lock(&q->mu);
	q->busy[b == &q->slot[1]] = 0;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void lmt_batchq_stop(struct lmt_batchq *q)
{
	if (!q)
		return;
	if (q->ahead) {
		lmt_threads_stop(&q->th, 1, &q->mu, &q->cv, &q->stop);
	}
	lmt_docbatch_release(&q->slot[0]);
	lmt_docbatch_release(&q->slot[1]);
	free(q);
}
