#!/usr/bin/env bash
# doc-links.sh — check the documentation's references: every relative link in README.md and
# docs/**/*.md resolves to a file (and its #anchor to a heading, by GitHub's rule), and every
# repository path written in backquotes in docs/architecture.md (`storage/live.go`,
# `storage/segment/filter_amd64.s`, `internal/crashfs`) exists. Exit 1 on any miss.
#
#   docs/tools/doc-links.sh [ROOT]     ROOT: the repository (default: the one holding this script)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"
find README.md docs -name '*.md' | sort | perl -CSD -Mutf8 -e '
use strict; use warnings;
my %anchors;   # file -> {slug}
sub slugs {
	my ($f) = @_;
	return $anchors{$f} if $anchors{$f};
	my %s; my %seen; my $fence = 0;
	open my $fh, "<:encoding(UTF-8)", $f or return {};
	while (<$fh>) {
		$fence = !$fence if /^\s*```/;
		next if $fence || !/^#{1,6}\s+(.*?)\s*#*\s*$/;
		my $t = lc $1;
		$t =~ s/`//g; $t =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;
		$t =~ s/[^\p{L}\p{N}\s_-]//g; $t =~ s/ /-/g;
		my $n = $seen{$t}++;
		$s{$n ? "$t-$n" : $t} = 1;
	}
	return $anchors{$f} = \%s;
}
my $bad = 0;
while (my $f = <STDIN>) {
	chomp $f;
	open my $fh, "<:encoding(UTF-8)", $f or die "$f: $!";
	(my $dir = $f) =~ s{[^/]*$}{};
	my $fence = 0; my $n = 0;
	while (my $line = <$fh>) {
		$n++;
		if ($line =~ /^\s*```/) { $fence = !$fence; next }
		next if $fence;
		(my $text = $line) =~ s/`[^`]*`//g;   # code spans are not links
		while ($text =~ /\]\(([^)\s]+)\)/g) {
			my $t = $1;
			next if $t =~ m{^(?:https?|mailto):};
			my ($path, $anchor) = split /#/, $t, 2;
			my $target = $path eq "" ? $f : "$dir$path";
			1 while $target =~ s{[^/]+/\.\./}{};
			if (!-e $target) { print "$f:$n: link to $t: no file $target\n"; $bad++; next }
			if (defined $anchor && $target =~ /\.md$/ && !slugs($target)->{$anchor}) {
				print "$f:$n: link to $t: $target has no heading #$anchor\n"; $bad++;
			}
		}
		if ($f eq "docs/architecture.md") {
			while ($line =~ /`((?:[\w.-]+\/)+[\w.-]*)`/g) {
				my $p = $1; $p =~ s{/$}{};
				next if $p =~ m{^(?:docs/FILE|DIR)} ;
				if (!-e $p) { print "$f:$n: path $p does not exist\n"; $bad++ }
			}
		}
	}
}
if ($bad) { print "$bad broken reference(s)\n"; exit 1 }
print "doc-links: every link and path resolves\n";
'
