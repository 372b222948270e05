#!/bin/sh
# tests/cli/man.sh: the manual pages are clean mdoc and document every option.
#
#   (a) every man/*.[1-8] page passes `mandoc -Tlint -W warning` without a message;
#   (b) every tool (tools/*.c) has man/TOOL.1, and each long
#       option of its longopts[] table appears as --name in the rendered page;
#   (c) each tool's --help mentions every long option too.
# The options come from the source, so an option added to a tool without a word in
# its page or its usage() fails here. Before trusting (a) and (b) the test checks
# that they can fail: a page with a known defect must draw a lint message, and a
# copy of a page with one option renamed away must be caught.
#
# Run from the repository root; prints TAP (tests/cli/lib.sh). LMT_BIN holds the
# binaries (default build/bin), LMT_MAN the pages (default man; point it at a copy
# of man/ to try a change).
. tests/cli/lib.sh
mandir=${LMT_MAN:-man}
diag() { sed 's/^/#   /'; }

# Lint at level WARNING (which includes ERROR and UNSUPP), not at STYLE: mandoc's
# STYLE messages include two that depend on the machine rather than on the page,
# "referenced manual not found" for every .Xr to a page outside the installed
# manpath (tok-encode(1) and lmt-formats(5) until they are installed, jq(1) where
# jq is absent) and "outdated mandoc.db lacks ...", so a clean page would fail on
# one machine and pass on another. Everything that renders wrongly or ambiguously
# ("new sentence, new line", "skipping no-space macro", bad macro arguments,
# unbalanced blocks) is a WARNING or worse. A clean page prints nothing.
lint() {
	mandoc -Tlint -W warning "$1" > "$T/lint.out" 2>&1
	rc=$?
	[ "$rc" = 0 ] && [ ! -s "$T/lint.out" ]
}

# Rendered text without overstrike (bold and underline are "X\bX" and "_\bX").
if command -v col > /dev/null 2>&1; then
	strip() { col -b; }
else
	bs=$(printf '\b')
	strip() { sed "s/.$bs//g"; }
fi
render() { mandoc -Tascii "$1" 2> /dev/null | strip; }

# Long option names of a tool, from its table:
#	static const struct option longopts[] = {
#		{ "vocab-size", required_argument, NULL, 'v' },
longopts() {
	awk '/static const struct option longopts[[][]][[:space:]]*=[[:space:]]*[{]/ { on = 1; next }
	     on && /^[[:space:]]*[}][[:space:]]*;/ { exit }
	     on' "$1" | sed -n 's/^[[:space:]]*{[[:space:]]*"\([^"]*\)".*/\1/p'
}

# Does the text in file $2 mention --$1 as a whole option name? (mandoc never
# breaks a line inside an .Fl argument, so the name is on one line.)
mentions() {
	grep -Eq -- "(^|[^[:alnum:]-])--$1([^[:alnum:]-]|\$)" "$2"
}

if ! command -v mandoc > /dev/null 2>&1; then
	notok "mandoc is installed (scripts/install-deps installs it)"
	finish
	exit 1
fi

# ---- the checks can fail ----

cat > "$T/defect.1" << 'EOF'
.Dd November 29, 2026
.Dt DEFECT 1
.Os
.Sh NAME
.Nm defect
.Nd a page with a warning
.Sh DESCRIPTION
One sentence.  Another on the same line.
EOF
if lint "$T/defect.1"; then
	notok "lint reports a known defect (new sentence, new line)"
else
	ok "lint reports a known defect (new sentence, new line)"
fi

# ---- (a) every page lints clean ----

pages=$(ls "$mandir"/*.[1-8] 2> /dev/null)
if [ -z "$pages" ]; then
	notok "$mandir/ has manual pages"
fi
for page in $pages; do
	if lint "$page"; then
		ok "$page: mandoc -Tlint -W warning is silent"
	else
		notok "$page: mandoc -Tlint -W warning is silent (exit status $rc)"
		diag < "$T/lint.out"
	fi
done

# ---- (b) and (c) every long option is in the page and in --help ----

selftest_done=0
for src in tools/*.c; do
	tool=$(basename "$src" .c)
	[ "$tool" = tool ] && continue
	opts=$(longopts "$src")
	if [ -z "$opts" ]; then
		notok "$src: a longopts[] table is found"
		continue
	fi
	page=$mandir/$tool.1
	if [ -f "$page" ]; then
		ok "$page exists"
	else
		notok "$page exists"
	fi
	render "$page" > "$T/page.txt"

	# The option check can fail: rename the last option away in a copy of the page.
	if [ "$selftest_done" = 0 ] && [ -s "$T/page.txt" ]; then
		selftest_done=1
		victim=$(echo "$opts" | tail -n 1)
		sed "s/$victim/zz-removed-zz/g" "$page" > "$T/$tool.1"
		render "$T/$tool.1" > "$T/broken.txt"
		if mentions "$victim" "$T/broken.txt"; then
			notok "the check misses --$victim removed from a copy of $page"
		else
			ok "the check catches --$victim removed from a copy of $page"
		fi
	fi

	missing=
	for o in $opts; do
		if mentions "$o" "$T/page.txt"; then
			ok "$page documents --$o"
		else
			notok "$page documents --$o"
			missing="$missing --$o"
		fi
	done
	[ -n "$missing" ] && echo "# $src has options that $page lacks:$missing"

	exe=$BIN/$tool
	if [ ! -x "$exe" ]; then
		notok "$exe exists (run make)"
		continue
	fi
	"$exe" --help > "$T/help.txt" 2>&1
	rc=$?
	if [ "$rc" = 0 ]; then
		ok "$tool --help exits 0"
	else
		notok "$tool --help exits 0 (exit status $rc)"
		diag < "$T/help.txt"
	fi
	for o in $opts; do
		if mentions "$o" "$T/help.txt"; then
			ok "$tool --help mentions --$o"
		else
			notok "$tool --help mentions --$o"
		fi
	done
done

finish
