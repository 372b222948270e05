#!/bin/sh
# tests/cli/install.sh: make install and uninstall, and the lmt front end.
#
# Installs the tools already built in $B (make -o all: nothing is rebuilt, other
# tests run beside this one) into a DESTDIR, checks that exactly the expected
# files are there (tools in libexec/lmt, only lmt in bin, the pages in
# share/man/man1 and man5), runs tools through the installed lmt (by its own
# location, after the tree is moved, and through LMT_EXEC_PATH), and checks that
# make uninstall removes every file again.
. tests/cli/lib.sh
B=${B:-build}
root=$T/root
prefix=/usr/local
inst() { make -s --no-print-directory -o all "$1" B="$B" DESTDIR="$root" PREFIX="$prefix" > "$T/make.out" 2>&1; }

tools=$(for s in tools/*.c; do basename "$s" .c; done | grep -vx lmt)
{
	echo "./usr/local/bin/lmt"
	for t in $tools; do echo "./usr/local/libexec/lmt/$t"; done
	for p in man/*.1; do echo "./usr/local/share/man/man1/${p#man/}"; done
	for p in man/*.5; do echo "./usr/local/share/man/man5/${p#man/}"; done
} | LC_ALL=C sort > "$T/want"

if inst install; then ok "make install DESTDIR PREFIX=$prefix"
else notok "make install DESTDIR PREFIX=$prefix" "$(head -c 600 "$T/make.out")"; fi
(cd "$root" && find . -type f -o -type l) | LC_ALL=C sort > "$T/got"
if cmp -s "$T/want" "$T/got"; then ok "install writes exactly the tools, lmt and the pages"
else notok "install writes exactly the tools, lmt and the pages" "$(diff "$T/want" "$T/got" | head -20)"; fi
ls "$root$prefix/bin" > "$T/bin.ls"
if [ "$(cat "$T/bin.ls")" = lmt ]; then ok "only lmt is in PREFIX/bin"
else notok "only lmt is in PREFIX/bin" "$(cat "$T/bin.ls")"; fi

lmt=$root$prefix/bin/lmt
check "lmt train --help runs the installed train" "$lmt" train --help
grep -q -- '--config' "$T/.out" && ok "lmt train --help prints train's help" || notok "lmt train --help prints train's help"
case $("$lmt" --exec-path) in
"$root$prefix/libexec/lmt") ok "lmt --exec-path is PREFIX/libexec/lmt beside it" ;;
*) notok "lmt --exec-path is PREFIX/libexec/lmt beside it" "$("$lmt" --exec-path)" ;;
esac

"$BIN/gen-corpus" --docs 3 --seed 7 --format text > "$T/direct.txt" 2> /dev/null
"$lmt" gen-corpus --docs 3 --seed 7 --format text > "$T/front.txt" 2> /dev/null
same "lmt passes the arguments through (gen-corpus output identical)" "$T/direct.txt" "$T/front.txt"
check_fail "lmt passes the tool's usage error through (exit 2)" 2 "train" "$lmt" train --no-such-option
echo '{"text":"nonsense words","id":0,"logprob":-1}' > "$T/bad.jsonl"
check_fail "lmt passes the tool's error through (exit 1)" 1 "" "$lmt" gen-corpus --check "$T/bad.jsonl"

check "lmt --list exits 0" "$lmt" --list
missing=
for t in $tools; do grep -q "^  $t  *[a-z]" "$T/.out" || missing="$missing $t"; done
[ -z "$missing" ] && ok "lmt --list names every tool with its description" \
	|| notok "lmt --list names every tool with its description" "missing:$missing"
grep -q '^  lmt ' "$T/.out" && notok "lmt --list leaves lmt out" || ok "lmt --list leaves lmt out"

MANPAGER=cat MANPATH= "$lmt" help train > "$T/help.txt" 2> "$T/help.err"
rc=$?
if [ "$rc" = 0 ] && grep -q 'train' "$T/help.txt" && grep -q 'shard-pack dataset' "$T/help.txt"; then
	ok "lmt help train shows the installed page (non-standard PREFIX)"
else
	notok "lmt help train shows the installed page (non-standard PREFIX)" "exit $rc" "$(head -c 400 "$T/help.err")"
fi
check_fail "lmt nope: a usage error with the list" 2 "gen-corpus" "$lmt" nope
check_fail "lmt help nope: a usage error" 2 "'nope' is not an lmt tool" "$lmt" help nope
check_fail "lmt --list with an argument: a usage error (it was ignored)" 2 "unexpected argument 'extra'" "$lmt" --list extra
check_fail "lmt -V -l: a usage error (-l was ignored)" 2 "exclude each other" "$lmt" -V -l
check_fail "lmt ../bin/lmt: not a tool" 2 "is not an lmt tool" "$lmt" ../bin/lmt
check_fail "lmt with no tool: usage (exit 2)" 2 "usage: lmt" "$lmt"

# the installed tree moved elsewhere still finds its tools
mv "$root$prefix" "$T/moved"
check "a moved tree: lmt train --help still runs" "$T/moved/bin/lmt" train --help
mv "$T/moved" "$root$prefix"

# a copy of lmt elsewhere finds the tools only through LMT_EXEC_PATH
mkdir -p "$T/other" && cp "$lmt" "$T/other/lmt"
check_fail "a lone lmt has no tools: exit 1 (the installation, not the name; it was a usage error)" 1 \
	"set LMT_EXEC_PATH" "$T/other/lmt" train --help
mkdir -p "$T/noexec" && printf '#!/bin/sh\n' > "$T/noexec/train" && chmod 644 "$T/noexec/train"
check_fail "a tool that is there but cannot be run: exit 1, naming it" 1 "'$T/noexec/train' cannot be run" \
	env LMT_EXEC_PATH="$T/noexec" "$T/other/lmt" train --help
check "LMT_EXEC_PATH: lmt train --help" env LMT_EXEC_PATH="$root$prefix/libexec/lmt" "$T/other/lmt" train --help

# the build tree: lmt in $B/bin runs the tools beside it
check "build tree: lmt gen-corpus --help" "$BIN/lmt" gen-corpus --help

if inst uninstall; then ok "make uninstall"
else notok "make uninstall" "$(head -c 600 "$T/make.out")"; fi
left=$(cd "$root" && find . -type f -o -type l)
[ -z "$left" ] && ok "uninstall leaves no file" || notok "uninstall leaves no file" "$left"
[ ! -e "$root$prefix/libexec/lmt" ] && ok "uninstall removes libexec/lmt" || notok "uninstall removes libexec/lmt"

finish
