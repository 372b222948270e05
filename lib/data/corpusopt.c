/*
 * corpusopt.c: the names of the corpus options' values, apart from the reader
 * (corpus.c) so that a tool whose common option code parses them but reads no
 * corpus (shard-pack) does not link libarchive and, through it, ICU and libxml2.
 */
#include "data/corpus.h"

#include <string.h>

int lmt_txt_docs_parse(const char *s)
{
	if (!strcmp(s, "file")) return LMT_TXT_FILE;
	if (!strcmp(s, "line")) return LMT_TXT_LINE;
	if (!strcmp(s, "blank")) return LMT_TXT_BLANK;
	return -1;
}

int lmt_corpus_format_parse(const char *s)
{
	if (!strcmp(s, "auto")) return LMT_CORPUS_AUTO;
	if (!strcmp(s, "text")) return LMT_CORPUS_TEXT;
	if (!strcmp(s, "jsonl")) return LMT_CORPUS_JSONL;
	return -1;
}
