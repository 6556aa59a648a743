#!/usr/bin/env bats
# Documentation and the dispatcher: the man pages lint cleanly, every
# program in bin/ has a man page whose OPTIONS are exactly its --help's
# options and whose EXIT STATUS names its --help's exit codes, the
# `trellara` dispatcher finds and runs its subcommands from the source tree,
# from PATH and when installed.  No database needed.

bats_require_minimum_version 1.5.0

load helpers/nodb

# A restricted PATH: the dispatcher must find its programs next to itself,
# not through the PATH helpers/nodb sets up.
SYSTEM_PATH=/usr/local/bin:/usr/bin:/bin

need_stream_binary() {
	[ -x "$REPO/bin/trellara-stream" ] || {
		echo "bin/trellara-stream is missing: run \"make\" first" >&2
		return 1
	}
}

# The programs built into bin/: trellara-capture, trellara-stream, ...
# (names only, one per line).
programs() {
	local bin
	for bin in "$REPO"/bin/trellara-*; do
		[ -f "$bin" ] && [ -x "$bin" ] && printf '%s\n' "${bin##*/}"
	done
	return 0
}

# The programs that have both a binary in bin/ and a page in man/man1/.
documented_programs() {
	local prog
	for prog in $(programs); do
		[ -f "$REPO/man/man1/$prog.1" ] && printf '%s\n' "$prog"
	done
	return 0
}

# The name of an option's argument, in both parsers below: upper case,
# "_" and "." ("FILE", "SCHEMA.TABLE").
OPTION_ARG_RE='[A-Z][A-Z_.]*'

# Long options of `PROGRAM --help` (default trellara-stream), one per line,
# normalised to "[-s ]--name[ ARG]" ("-c --config FILE", "--follow").
help_options() {
	"$REPO/bin/${1:-trellara-stream}" --help | awk -v arg="$OPTION_ARG_RE" '
		/^options:/ { inside = 1; next }
		inside && /^$/ { exit }
		inside && match($0, "^ +(-[A-Za-z], +)?--[a-z][a-z0-9-]*( " arg ")?") {
			s = substr($0, RSTART, RLENGTH)
			sub(/^ +/, "", s)
			sub(/, +/, " ", s)
			print s
		}'
}

# The tag line after each .TP in the OPTIONS section of a man page, which
# by convention is written  \fB\-c\fR, \fB\-\-config\fR \fIFILE\fR ,
# normalised the same way; a tag not of that form (its argument named by
# OPTION_ARG_RE) is printed as "malformed tag: ..." so that it shows in
# the comparison.
man_options() {
	awk -v arg="$OPTION_ARG_RE" '
		/^\.SH/ { inside = ($0 ~ /^\.SH +"?OPTIONS"? *$/); tag = 0; next }
		inside && /^\.TP/ { tag = 1; next }
		inside && tag {
			tag = 0
			s = $0
			gsub(/\\f[BIRP]/, "", s)
			gsub(/\\-/, "-", s)
			sub(/, +/, " ", s)
			gsub(/ +/, " ", s)
			sub(/ $/, "", s)
			if (s !~ ("^(-[A-Za-z] )?--[a-z][a-z0-9-]*( " arg ")?$"))
				s = "malformed tag: " s
			print s
		}' "$1"
}

@test "every man page passes groff -ww (and mandoc -T lint when installed) without a warning" {
	local page first n=0 failed=0
	local -a pre
	for page in "$REPO"/man/man*/*.[1-9]; do
		[ -f "$page" ] || continue
		n=$((n + 1))
		# '\" t on the first line asks for tbl, as man(1) honours it
		pre=()
		IFS= read -r first <"$page" || true
		if [[ $first =~ ^\'\\\"\ +[a-z]*t ]]; then pre=(-t); fi
		run --separate-stderr groff -ww "${pre[@]}" -man -z "$page"
		if [ "$status" -ne 0 ] || [ -n "$stderr" ] || [ -n "$output" ]; then
			printf 'groff -ww on %s (status %s):\n%s%s\n' "${page#"$REPO"/}" "$status" "$stderr" "$output" >&2
			failed=1
		fi
		if command -v mandoc >/dev/null; then
			run --separate-stderr mandoc -T lint -W warning "$page"
			if [ "$status" -ne 0 ] || [ -n "$output" ] || [ -n "$stderr" ]; then
				printf 'mandoc -T lint on %s (status %s):\n%s%s\n' "${page#"$REPO"/}" "$status" "$output" "$stderr" >&2
				failed=1
			fi
		fi
	done
	[ "$n" -ge 2 ] || { echo "only $n man pages under man/" >&2; false; }
	[ "$failed" -eq 0 ]
}

@test "every trellara-* program in bin/ has a man page in man/man1" {
	need_stream_binary
	local prog missing=0 n=0
	for prog in $(programs); do
		n=$((n + 1))
		[ -f "$REPO/man/man1/$prog.1" ] || {
			echo "bin/$prog has no man page: write man/man1/$prog.1" >&2
			missing=1
		}
	done
	[ "$n" -ge 1 ]
	[ "$missing" -eq 0 ]
}

@test "each man1 page's OPTIONS lists exactly the options of its program's --help" {
	need_stream_binary
	local prog page from_help from_man n=0 failed=0
	for prog in $(documented_programs); do
		n=$((n + 1))
		page="$REPO/man/man1/$prog.1"
		from_help=$(help_options "$prog" | LC_ALL=C sort)
		from_man=$(man_options "$page" | LC_ALL=C sort)
		# a parser that finds nothing must not pass: every program has
		# --help and --version (DESIGN section 13)
		if [ "$(grep -c . <<<"$from_help")" -lt 3 ] || ! grep -qE -- '(^| )--help$' <<<"$from_help" ||
			! grep -qE -- '(^| )--version$' <<<"$from_help"; then
			printf '%s --help: parsed too few options:\n%s\n' "$prog" "$from_help" >&2
			failed=1
			continue
		fi
		if [[ $from_help != "$from_man" ]]; then
			echo "$prog: options differ: < $prog --help   > man/man1/$prog.1 OPTIONS" >&2
			diff <(printf '%s\n' "$from_help") <(printf '%s\n' "$from_man") >&2
			failed=1
		fi
	done
	# a loop that compared nothing must not pass: trellara-stream has both
	grep -qx trellara-stream <<<"$(documented_programs)"
	[ "$n" -ge 1 ]
	[ "$failed" -eq 0 ]
}

@test "each man1 page's EXIT STATUS names every exit code of its program's --help" {
	need_stream_binary
	local prog page code codes n=0 failed=0
	for prog in $(documented_programs); do
		page="$REPO/man/man1/$prog.1"
		# the "exit codes:" paragraph, when the program's --help has one
		codes=$("$REPO/bin/$prog" --help | sed -n '/^exit codes:/,/^$/p' | grep -oE '\b[0-9]{1,3}\b' || true)
		[ -n "$codes" ] || continue
		n=$((n + 1))
		for code in $codes; do
			sed -n '/^\.SH "*EXIT STATUS/,/^\.SH/p' "$page" | grep -qxF ".B $code" || {
				echo "$prog: exit status $code missing from EXIT STATUS of man/man1/$prog.1" >&2
				failed=1
			}
		done
	done
	# trellara-stream's --help lists its exit codes
	[ "$n" -ge 1 ]
	[ "$failed" -eq 0 ]
}

@test "trellara stream --help runs trellara-stream --help, found next to the dispatcher" {
	need_stream_binary
	local expected
	expected=$("$REPO/bin/trellara-stream" --help)
	run -0 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" stream --help
	[ "$output" = "$expected" ]
	run -0 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" help stream
	[ "$output" = "$expected" ]
	# arguments pass through untouched, exit status too
	run -64 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" stream read
	[[ $output == *"give exactly one of --config FILE and --dir DIR"* ]]
}

@test "trellara help lists the installed subcommands, stream among them" {
	need_stream_binary
	local out
	for out in "" help --help -h; do
		run -0 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" $out
		[[ $output == "usage: trellara COMMAND"* ]]
		grep -qE '^  stream +[a-z]' <<<"$output"
	done
}

@test "a sibling program wins over PATH; a subcommand only on PATH is found and listed" {
	need_stream_binary
	local fake=$BATS_TEST_TMPDIR/fake
	mkdir -p "$fake"
	printf '#!/bin/sh\necho "fake stream"\n' >"$fake/trellara-stream"
	printf '#!/bin/sh\necho "hello $*"\n' >"$fake/trellara-hello"
	chmod +x "$fake/trellara-stream" "$fake/trellara-hello"
	run -0 env PATH="$fake:$SYSTEM_PATH" "$REPO/scripts/trellara" stream --version
	[[ $output == "trellara-stream "* ]]
	run -0 env PATH="$fake:$SYSTEM_PATH" "$REPO/scripts/trellara" hello a "b c"
	[ "$output" = "hello a b c" ]
	run -0 env PATH="$fake:$SYSTEM_PATH" "$REPO/scripts/trellara" help
	grep -qE '^  hello *$' <<<"$output"
	[ "$(grep -cE '^  stream ' <<<"$output")" -eq 1 ]
}

@test "an unknown subcommand or option is a usage error (64) with a hint" {
	run -64 --separate-stderr env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" nonsense
	[ -z "$output" ]
	[[ $stderr == *'trellara: "nonsense" is not a trellara command'* ]]
	[[ $stderr == *'trellara help'* ]]
	run -64 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" ../bin/trellara-stream
	[[ $output == *"is not a trellara command"* ]]
	run -64 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" help nonsense
	run -64 env PATH="$SYSTEM_PATH" "$REPO/scripts/trellara" --bogus
}

@test "trellara --version is TRELLARA_VERSION of defaults.h" {
	local version
	version=$(sed -n 's/^#define TRELLARA_VERSION "\(.*\)"$/\1/p' "$REPO/include/trellara/defaults.h")
	[ -n "$version" ]
	run -0 "$REPO/scripts/trellara" --version
	[ "$output" = "trellara $version" ]
	run -0 "$REPO/scripts/trellara" -V
	[ "$output" = "trellara $version" ]
}

@test "make install PREFIX=... installs trellara, trellara-stream and the man pages, and they work" {
	local prefix=$BATS_TEST_TMPDIR/inst
	cd "$REPO"
	run -0 make install PREFIX="$prefix"
	[ -x "$prefix/bin/trellara" ]
	[ -x "$prefix/bin/trellara-stream" ]
	[ -f "$prefix/share/man/man1/trellara-stream.1" ]
	[ -f "$prefix/share/man/man5/trellara-stream.5" ]
	run -0 env PATH="$SYSTEM_PATH" "$prefix/bin/trellara" stream --help
	[[ $output == "usage: trellara-stream COMMAND"* ]]
	run -0 env PATH="$SYSTEM_PATH" "$prefix/bin/trellara" help
	grep -qE '^  stream +[a-z]' <<<"$output"
	# and through PATH, as an operator runs it
	run -0 env PATH="$prefix/bin:$SYSTEM_PATH" trellara stream --version
	[[ $output == "trellara-stream "* ]]
}

# ---- docs/DESIGN.md and the README's layout ----

# The design is cited as "DESIGN §N" (also §N.M, "§N step M", a list
# "DESIGN §N, §M"), in man pages as "DESIGN \(scN", and in prose as
# "DESIGN section N" or "DESIGN.md (sections N, M, ...)".
DESIGN_CITE_RE='DESIGN(\.md)?[ (]*(§|\\\(sc|sections? )[0-9]+(\.[0-9]+| step [0-9]+)?((, *(and )?| and )(§|\\\(sc)?[0-9]+(\.[0-9]+)?)*'

# Citation texts on stdin -> the sections they cite, one per line, sorted
# and unique: "6" for a section, "6.5" for step 5 of section 6.
design_citations() {
	grep -oE "$DESIGN_CITE_RE" | sed -E 's/^DESIGN(\.md)?[ (]*//; s/ step /./' |
		grep -oE '[0-9]+(\.[0-9]+)?' | LC_ALL=C sort -u
	return 0
}

# Every citation in the repository's text files (build output left out),
# as "SECTION<tab>FILE" lines.
cited_sections() {
	local line file s
	grep -rIoE --exclude-dir=.git --exclude-dir=build --exclude-dir=bin --exclude-dir=target \
		"$DESIGN_CITE_RE" "$REPO" | while IFS= read -r line; do
		file=${line%%:*}
		for s in $(design_citations <<<"${line#*:}"); do
			printf '%s\t%s\n' "$s" "${file#"$REPO"/}"
		done
	done
}

# The section numbers docs/DESIGN.md has as "## N. Title" headings.
design_sections() {
	sed -nE 's/^## ([0-9]+)\. .*/\1/p' "$REPO/docs/DESIGN.md"
}

# design_has_step N M: section N of docs/DESIGN.md has a numbered item "M. ".
design_has_step() {
	awk -v n="$1" -v m="$2" '
		/^## / { inside = ($0 ~ ("^## " n "\\. ")); next }
		inside && $0 ~ ("^" m "\\. ") { found = 1 }
		END { exit !found }' "$REPO/docs/DESIGN.md"
}

# The paths the README's "## Layout" block names, one per line: the first
# column of each entry (up to two spaces), split at ", "; an entry
# indented by two spaces is inside the entry above it; lines indented
# further continue a description.
layout_paths() {
	awk '
		/^## Layout$/ { section = 1; next }
		section && /^```/ { if (inside) exit; inside = 1; next }
		inside {
			if ($0 ~ /^[^ ]/) { line = $0; child = 0 }
			else if ($0 ~ /^  [^ ]/) { line = substr($0, 3); child = 1 }
			else next
			sub(/  .*/, "", line)
			n = split(line, parts, /, +/)
			for (i = 1; i <= n; i++) {
				if (child) print parent parts[i]
				else { parent = parts[i]; print parts[i] }
			}
		}' "$REPO/README.md"
}

# layout_path_exists GLOB: the repository has GLOB ("<...>" written as
# "*"); a GLOB ending in "/" must be a directory.
layout_path_exists() {
	local glob=$1 want_dir=false m
	local -a matches
	if [[ $glob == */ ]]; then
		want_dir=true
		glob=${glob%/}
	fi
	shopt -s nullglob
	# shellcheck disable=SC2206 # the glob is meant to expand
	matches=("$REPO"/$glob)
	shopt -u nullglob
	for m in "${matches[@]}"; do
		if $want_dir; then
			[ -d "$m" ] && return 0
		else
			[ -e "$m" ] && return 0
		fi
	done
	return 1
}

@test "every DESIGN section cited in code, scripts and man pages is a section of docs/DESIGN.md" {
	local d=DES citations cited have n s failed=0
	# the parser itself, on every form in use (built here so that this
	# file does not cite them)
	run design_citations <<<"x ${d}IGN §7, §13 y
${d}IGN §6.5: stream
(${d}IGN \\(sc4), which
${d}IGN.md (sections 1, 5, 10)
${d}IGN §6 step 3
${d}IGN section 9
${d}IGN §2 alone; not ${d}IGN notes 4"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf '%s\n' 1 10 13 2 4 5 6.3 6.5 7 9)" ]

	[ -f "$REPO/docs/DESIGN.md" ]
	citations=$(cited_sections)
	cited=$(cut -f1 <<<"$citations" | LC_ALL=C sort -u)
	have=$(design_sections)
	# a scan that found (almost) nothing must not pass
	n=$(grep -c . <<<"$cited")
	[ "$n" -ge 10 ] || { printf 'only %s cited sections found:\n%s\n' "$n" "$cited" >&2; false; }
	[ "$(grep -c . <<<"$have")" -ge 10 ]
	for s in $cited; do
		if ! grep -qxF "${s%%.*}" <<<"$have"; then
			echo "DESIGN §$s is cited, but docs/DESIGN.md has no heading \"## ${s%%.*}. ...\"; cited in:" >&2
			awk -F '\t' -v s="$s" '$1 == s { print "  " $2 }' <<<"$citations" | LC_ALL=C sort -u >&2
			failed=1
		elif [[ $s == *.* ]] && ! design_has_step "${s%%.*}" "${s#*.}"; then
			echo "DESIGN §$s is cited, but section ${s%%.*} of docs/DESIGN.md has no item \"${s#*.}. \"; cited in:" >&2
			awk -F '\t' -v s="$s" '$1 == s { print "  " $2 }' <<<"$citations" | LC_ALL=C sort -u >&2
			failed=1
		fi
	done
	[ "$failed" -eq 0 ]
}

@test "the README and trellara(7) point to docs/DESIGN.md" {
	[ -f "$REPO/docs/DESIGN.md" ]
	grep -qF 'docs/DESIGN.md' "$REPO/README.md"
	grep -qF 'docs/DESIGN.md' "$REPO/man/man7/trellara.7"
	run grep -nE 'beside (this repository|the source tree)' "$REPO/README.md" "$REPO/man/man7/trellara.7"
	[ "$status" -eq 1 ]
}

@test "the README's Layout names only paths that exist, and every top-level directory" {
	local paths p glob dir ignored n=0 failed=0
	paths=$(layout_paths)
	# a parser that found (almost) nothing must not pass; the nested
	# entries must come out with their parent
	[ "$(grep -c . <<<"$paths")" -ge 10 ]
	grep -qxF 'common/stream/' <<<"$paths"
	grep -qxF 'man/man5' <<<"$paths"
	while IFS= read -r p; do
		n=$((n + 1))
		glob=$(sed -E 's/<[^>]*>/*/g' <<<"$p")
		layout_path_exists "$glob" || {
			echo "README Layout names \"$p\", which does not exist" >&2
			failed=1
		}
	done <<<"$paths"
	# every top-level directory but build output (the .gitignore'd
	# directories) and .git is named
	ignored=$(sed -nE 's|^/?([A-Za-z0-9._-]+)/$|\1|p' "$REPO/.gitignore")
	for dir in "$REPO"/*/ "$REPO"/.[!.]*/; do
		[ -d "$dir" ] || continue
		dir=${dir%/}
		dir=${dir##*/}
		[ "$dir" != .git ] || continue
		! grep -qxF "$dir" <<<"$ignored" || continue
		grep -qE "^${dir//./\\.}(/|$)" <<<"$paths" || {
			echo "README Layout does not name the top-level directory \"$dir/\"" >&2
			failed=1
		}
	done
	[ "$n" -ge 10 ]
	[ "$failed" -eq 0 ]
}
