#!/usr/bin/env python3
"""The benchmarks' two corpora: how the real one is built, how either is described.

    scripts/bench/corpus.py real OUT.jsonl [SIZE_MB]   (scripts/bench/make-corpus --real)
    scripts/bench/corpus.py stats FILE...              documents, mean size, non-ASCII share

synthetic: scripts/bench/make-corpus's text, one line of some file per line, empty and
non-UTF-8 lines dropped; each benchmark cuts its own documents from those lines (a line,
12 lines, about 4 kB), so its documents are mostly ASCII and all alike in shape.

real: one JSONL document ({"text", "source"}) per file that a Debian machine ships:
Python sources (/usr/lib/python3*), manual pages (/usr/share/man, every language),
copyright files, changelogs, NEWS and READMEs (/usr/share/doc), and the translations
of gettext catalogues (/usr/share/locale/*/LC_MESSAGES/*.mo: their msgstr strings, one
per line, the header entry left out), so documents range from a line to 200 kB and
many are in other scripts than Latin. Compressed files are read decompressed; a file
that is not valid UTF-8, is empty or is over 200 kB is skipped. The four groups are
each sorted by path (bytes) and interleaved one file at a time, so any cut holds all
four kinds; the output depends only on the machine's files and SIZE_MB (the text
bytes, default 64 MB, stopping after the document that reaches it).

Only the standard library: tests/cli/bench.sh runs this without the peers.
"""
import glob
import gzip
import json
import os
import struct
import sys

MAX_DOC = 200_000


def mo_text(b):
    """The msgstr strings of a GNU .mo catalogue, one per line (plural forms too)."""
    magic = struct.unpack('<I', b[:4])[0]
    e = '<' if magic == 0x950412de else '>'
    n, orig, trans = struct.unpack(e + '3I', b[8:20])
    parts = []
    for i in range(n):
        ol, _ = struct.unpack(e + '2I', b[orig + 8 * i:orig + 8 * i + 8])
        if ol == 0:
            continue          # the header entry (msgid ""): metadata, not text
        l, o = struct.unpack(e + '2I', b[trans + 8 * i:trans + 8 * i + 8])
        parts.append(b[o:o + l].replace(b'\0', b'\n'))
    return b'\n'.join(parts)


def _files(patterns, keep=lambda p: True):
    seen = set()
    for pat in patterns:
        for p in glob.glob(pat, recursive=True):
            if p not in seen and os.path.isfile(p) and keep(p):
                seen.add(p)
    return sorted(seen, key=os.fsencode)


def _doc_file(p):
    b = os.path.basename(p)
    return b == 'copyright' or b.startswith(('changelog', 'NEWS', 'README'))


def real_groups():
    return [
        _files(['/usr/lib/python3/**/*.py', '/usr/lib/python3.*/**/*.py']),
        _files(['/usr/share/man/**/*.gz']),
        _files(['/usr/share/doc/**/*'], _doc_file),
        _files(['/usr/share/locale/*/LC_MESSAGES/*.mo']),
    ]


def read_doc(p):
    """The text of file p, or None where it is not one of the corpus's documents."""
    try:
        with open(p, 'rb') as f:
            b = f.read(8 * MAX_DOC + 1)
        if p.endswith('.gz'):
            b = gzip.decompress(b)
        if p.endswith('.mo'):
            b = mo_text(b)
        t = b.decode('utf-8')
    except (OSError, EOFError, ValueError, struct.error, gzip.BadGzipFile):
        return None
    if not t.strip() or len(b) > MAX_DOC:
        return None
    return t


def build_real(out, mb=64):
    limit = int(float(mb) * 1e6)
    n = docs = 0
    tmp = out + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        its = [iter(g) for g in real_groups()]
        while its and n < limit:
            for it in list(its):
                p = next(it, None)
                if p is None:
                    its.remove(it)
                    continue
                t = read_doc(p)
                if t is None:
                    continue
                f.write(json.dumps({'text': t, 'source': p}, ensure_ascii=False) + '\n')
                n += len(t.encode())
                docs += 1
                if n >= limit:
                    break
    os.replace(tmp, out)
    return docs, n


def read_jsonl(path, limit=None):
    """The texts of a JSONL corpus; with limit, up to the document that reaches limit bytes."""
    texts, n = [], 0
    with open(path, encoding='utf-8') as f:
        for line in f:
            t = json.loads(line)['text']
            texts.append(t)
            n += len(t.encode())
            if limit is not None and n >= limit:
                break
    return texts


def write_jsonl(path, texts):
    with open(path, 'w', encoding='utf-8') as f:
        for t in texts:
            f.write(json.dumps({'text': t}, ensure_ascii=False) + '\n')


def stats(texts):
    """Document count, bytes, mean document bytes, share of non-ASCII bytes (UTF-8)."""
    high = bytes(range(128, 256))
    total = non_ascii = 0
    for t in texts:
        b = t.encode() if isinstance(t, str) else t
        total += len(b)
        non_ascii += len(b) - len(b.translate(None, high))
    n = len(texts)
    return dict(docs=n, bytes=total, mean_bytes=total / n if n else 0.0,
                non_ascii=non_ascii / total if total else 0.0)


def describe(st):
    return (f'{st["docs"]} documents, {st["bytes"] / 1e6:.1f} MB, mean {st["mean_bytes"] / 1e3:.2f} kB '
            f'a document, {st["non_ascii"]:.1%} of bytes non-ASCII')


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == 'real':
        docs, n = build_real(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else 64)
        print(f'{sys.argv[2]}: {docs} documents, {n} bytes of text', file=sys.stderr)
    elif len(sys.argv) >= 3 and sys.argv[1] == 'stats':
        for p in sys.argv[2:]:
            if p.endswith('.jsonl'):
                texts = read_jsonl(p)
            else:
                texts = [l for l in open(p, encoding='utf-8').read().split('\n') if l]
            st = stats(texts)
            print(json.dumps(dict(file=p, **st)))
            print(f'# {p}: {describe(st)}', file=sys.stderr)
    else:
        sys.exit('usage: corpus.py real OUT.jsonl [SIZE_MB] | corpus.py stats FILE...')


if __name__ == '__main__':
    main()
