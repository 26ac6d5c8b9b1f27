#!/usr/bin/env bash
# spec-refs.sh — section references (§N) from code to the contracts in docs/.
#
# Comments cite the project's contracts by section: `docs/analytics.md §4`,
# `docs/ingest.md §2`, `docs/storage.md §3`, `docs/architecture.md §3`. This
# script keeps those citations pointing at files and sections that exist.
#
#   docs/tools/spec-refs.sh check   [ROOT]   fail (exit 1) on a citation of a file outside docs/,
#                                            of a section a docs file does not have, or a bare §N
#                                            in a Go comment that names no document before it
#   docs/tools/spec-refs.sh rewrite [ROOT]   rewrite the old forms in place (see below), print
#                                            each file changed and the number of references
#   docs/tools/spec-refs.sh list    [ROOT]   print every reference found: file:line doc §N
#
# ROOT is the repository (default: the one holding this script). Files read: *.go (comments,
# by a small Go lexer that knows strings, runes, raw strings and /* */; and in string literals
# — help texts, messages — named references only), and, with named references only, *.js,
# *.py and *.md outside docs/ (a bare §N there is not checked).
# docs/ itself is not rewritten: its own cross-references are written by hand.
#
# Old forms rewritten (from the time the contracts lived outside the repository):
#   spec §N, Spec §N, analytics.md §N, spec/analytics.md §N   → docs/analytics.md §N
#   ingest.md §N, storage.md §N (with any spec/ or shared/spec/ prefix) → docs/ingest.md §N, docs/storage.md §N
#   ARCHITECTURE §N, ARCHITECTURE.md §N                       → docs/architecture.md §N
# A name at the end of one comment line and §N at the start of the next is one reference.
# In a Go comment block (consecutive // lines, or one trailing comment) a bare §N refers to the
# document of the nearest reference before it; the first bare §N of a block with none before it
# is made explicit as docs/analytics.md §N. identity.md means docs/identity.md; cluster.md describes features not
# built: citations of them are left alone and fail the check.
set -euo pipefail
mode=${1:-}
case $mode in check|rewrite|list) ;; *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;; esac
root=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
{
	git ls-files -co --exclude-standard -- '*.go' '*.js' '*.py' '*.md' 2>/dev/null ||
		find . -type f \( -name '*.go' -o -name '*.js' -o -name '*.py' -o -name '*.md' \) | sed 's|^\./||'
} | grep -v -e '^docs/' -e '/node_modules/' -e '^vendor/' | sort -u |
	MODE=$mode perl -e '
use strict; use warnings; use utf8;
binmode STDOUT, ":encoding(UTF-8)";
my $mode = $ENV{MODE};
# Sections of each docs file: headings "## 4. Trends", "### 5.2 …".
my %sections;
for my $f (glob "docs/*.md") {
	open my $fh, "<:encoding(UTF-8)", $f or die "$f: $!";
	while (<$fh>) { $sections{$f}{$1} = 1 if /^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s/ }
}
my $NAME = qr{(?:(?:[\w.-]+/)*(?:[Ss]pec|analytics\.md|ingest\.md|storage\.md|identity\.md|cluster\.md|api\.md|roadmap\.md|architecture\.md|ARCHITECTURE(?:\.md)?))};
my $NUM = qr{\d+(?:\.\d+)*(?<!\.)};
sub target {   # the docs file a name means, or "" when it has none there
	my ($n) = @_;
	return "docs/$1" if $n =~ m{^docs/(\w+\.md)$};
	(my $b = $n) =~ s{.*/}{};
	return "docs/analytics.md" if $b =~ /^(?:[Ss]pec|analytics\.md)$/;
	return "docs/architecture.md" if $b =~ /^(?:ARCHITECTURE(?:\.md)?|architecture\.md)$/;
	return "docs/$b" if $b =~ /^(?:ingest|storage|identity)\.md$/;
	return "" ;
}
my ($nfiles, $nrefs, $bad) = (0, 0, 0);
sub problem { my ($where, $msg) = @_; print "$where: $msg\n"; $bad++ }
sub verify {   # a resolved reference: docs file and section must exist
	my ($where, $doc, $num, $orig) = @_;
	print "$where: $doc §$num\n" if $mode eq "list";
	return if $mode ne "check";
	if ($doc !~ m{^docs/}) { problem($where, "cites $orig §$num: no such document in docs/"); return }
	if ($orig ne $doc) { problem($where, "cites $orig §$num: write $doc §$num (docs/tools/spec-refs.sh rewrite does)"); return }
	if (!-f $doc) { problem($where, "cites $doc §$num: no such file"); return }
	problem($where, "cites $doc §$num: $doc has no section $num") unless $sections{$doc}{$num};
}
# Comment segments of a Go file: per line, a list of [start, end) offsets.
sub go_comments {
	my ($lines) = @_;
	my ($inblock, $inraw) = (0, 0);
	my @segs;
	for my $i (0 .. $#$lines) {
		my $s = $lines->[$i]; my $p = 0; my $n = length $s; my @l;
		while ($p < $n) {
			if ($inblock) {
				my $e = index($s, "*/", $p);
				if ($e < 0) { push @l, [$p, $n, "block"]; $p = $n } else { push @l, [$p, $e, "block"]; $p = $e + 2; $inblock = 0 }
			} elsif ($inraw) {
				my $e = index($s, "`", $p);
				if ($e < 0) { push @l, [$p, $n, "string"]; $p = $n } else { push @l, [$p, $e, "string"]; $p = $e + 1; $inraw = 0 }
			} else {
				pos($s) = $p;
				if ($s =~ m{\G//}gc) { push @l, [$p + 2, $n, substr($s, 0, $p) =~ /^\s*$/ ? "line" : "trail"]; $p = $n }
				elsif ($s =~ m{\G/\*}gc) { $inblock = 1; $p = pos($s) }
				elsif ($s =~ m{\G"(?:[^"\\]|\\.)*"?}gc) { push @l, [$p, pos($s), "string"]; $p = pos($s) }
				elsif ($s =~ m{\G\x27(?:[^\x27\\]|\\.)*\x27?}gc) { $p = pos($s) }
				elsif ($s =~ m{\G`}gc) { $inraw = 1; $p = pos($s) }
				elsif ($s =~ m{\G[^/"\x27`]+}gc) { $p = pos($s) }
				else { $p++ }
			}
		}
		$segs[$i] = \@l;
	}
	return \@segs;
}
sub do_go {
	my ($f, $lines) = @_;
	my $segs = go_comments($lines);
	my @edits;   # [line, offset, length, replacement]
	my $cur;     # the document of the last reference of the current block
	my $prev;    # the previous line of the block: [line, seg] when it was a whole-line comment
	for my $i (0 .. $#$lines) {
		my @l = @{$segs->[$i]};
		my @c = grep { $_->[2] ne "string" } @l;
		my $whole = @c == 1 && $c[0][2] eq "line" && !grep { $_->[2] eq "string" } @l;
		if (!$whole) { $cur = undef; $prev = undef }   # a block ends at any other line
		for my $sg (@l) {
			my ($a, $b, $kind) = @$sg;
			if ($kind eq "string") {   # named references only
				my $text = substr($lines->[$i], $a, $b - $a);
				while ($text =~ m{(?<![\w/.\[-])($NAME)\s?§\s?($NUM)}g) {
					my ($name, $num, $off) = ($1, $2, $a + $-[1]);
					my $t = target($name);
					if ($t ne "" && $t ne $name) { push @edits, [$i, $off, length $name, $t] if $mode eq "rewrite"; $nrefs++ }
					verify("$f:" . ($i + 1), $t ne "" ? $t : $name, $num, $name);
				}
				next;
			}
			$cur = undef if $kind eq "trail";
			my $text = substr($lines->[$i], $a, $b - $a);
			while ($text =~ m{§\s?($NUM)}g) {
				my ($num, $at) = ($1, $-[0]);
				my $before = substr($text, 0, $at);
				my $where = "$f:" . ($i + 1);
				my ($name, $nline, $noff);
				if ($before =~ m{(?<![\w/.-])($NAME)\s*$}) {
					($name, $nline, $noff) = ($1, $i, $a + $-[1]);
				} elsif ($before =~ /^\s*$/ && $prev) {
					my ($pi, $pa, $pb) = @$prev;
					my $pt = substr($lines->[$pi], $pa, $pb - $pa);
					($name, $nline, $noff) = ($1, $pi, $pa + $-[1]) if $pt =~ m{(?<![\w/.-])($NAME)\s*$};
				}
				if (defined $name) {
					my $t = target($name);
					if ($t ne "" && $t ne $name) { push @edits, [$nline, $noff, length $name, $t] if $mode eq "rewrite"; $nrefs++ }
					$cur = $t ne "" ? $t : $name;
					verify($where, $cur, $num, $name);
				} elsif (defined $cur) {
					verify($where, $cur, $num, $cur);
				} else {
					if ($mode eq "rewrite") { push @edits, [$i, $a + $at, 0, "docs/analytics.md "]; $nrefs++ }
					problem($where, "bare §$num names no document: write docs/FILE.md §$num") if $mode eq "check";
					$cur = "docs/analytics.md";
					verify($where, $cur, $num, $cur) if $mode eq "list";
				}
			}
			$cur = undef if $kind eq "trail";
		}
		$prev = $whole ? [$i, $c[0][0], $c[0][1]] : undef;
	}
	return \@edits;
}
sub do_text {   # named references only, anywhere in the text
	my ($f, $lines) = @_;
	my @edits;
	for my $i (0 .. $#$lines) {
		while ($lines->[$i] =~ m{(?<![\w/.\[-])($NAME)\s?§\s?($NUM)}g) {
			my ($name, $num, $off) = ($1, $2, $-[1]);
			my $t = target($name);
			if ($t ne "" && $t ne $name) { push @edits, [$i, $off, length $name, $t] if $mode eq "rewrite"; $nrefs++ }
			verify("$f:" . ($i + 1), $t ne "" ? $t : $name, $num, $name);
		}
	}
	return \@edits;
}
while (my $f = <STDIN>) {
	chomp $f;
	next unless -f $f;
	open my $fh, "<:encoding(UTF-8)", $f or die "$f: $!";
	my @lines = <$fh>; close $fh;
	next unless grep { /§/ } @lines;
	chomp(my @bare = @lines);
	my $edits = $f =~ /\.go$/ ? do_go($f, \@bare) : do_text($f, \@bare);
	next unless @$edits;
	for my $e (sort { $b->[0] <=> $a->[0] || $b->[1] <=> $a->[1] } @$edits) {
		substr($lines[$e->[0]], $e->[1], $e->[2]) = $e->[3];
	}
	open my $out, ">:encoding(UTF-8)", $f or die "$f: $!";
	print $out @lines; close $out;
	$nfiles++;
	print "$f: ", scalar(@$edits), " reference(s)\n";
}
if ($mode eq "rewrite") { print "rewrote $nrefs reference(s) in $nfiles file(s)\n" }
if ($mode eq "check") {
	if ($bad) { print "$bad problem(s)\n"; exit 1 }
	print "spec-refs: every reference resolves\n";
}
'
