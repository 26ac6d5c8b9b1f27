package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CaseFile is a golden case file: a free-text header followed by cases.
//
// Format (line based):
//
//	any header lines (comments)
//	=== case name
//	input line…
//	---
//	expected output line…
//
// A case runs from its "=== " line to the next one or the end of the file.
// Its input ends at a line that is exactly "---"; everything after that,
// up to the next case, is the expected output. Input lines are kept
// verbatim (including comment lines, which the consumer interprets).
type CaseFile struct {
	Header string
	Cases  []Case
}

// Case is one golden case of a CaseFile.
type Case struct {
	Name     string
	Line     int      // 1-based line of the "=== " line, for error messages
	Input    []string // lines between the name and "---"
	Expected string   // text after "---", trailing blank lines removed, each line "\n"-terminated
}

// ParseCases parses a case file. Errors name the line: a case without a
// "---" line, or an empty case name.
func ParseCases(text string) (*CaseFile, error) {
	lines := strings.Split(text, "\n")
	cf := &CaseFile{}
	var header strings.Builder
	i := 0
	for ; i < len(lines) && !strings.HasPrefix(lines[i], "=== "); i++ {
		if i == len(lines)-1 && lines[i] == "" {
			break
		}
		header.WriteString(lines[i] + "\n")
	}
	cf.Header = header.String()
	for i < len(lines) && strings.HasPrefix(lines[i], "=== ") {
		c := Case{Name: strings.TrimSpace(lines[i][4:]), Line: i + 1}
		if c.Name == "" {
			return nil, fmt.Errorf("testutil: case file line %d: empty case name", i+1)
		}
		i++
		for ; i < len(lines) && lines[i] != "---"; i++ {
			if strings.HasPrefix(lines[i], "=== ") {
				return nil, fmt.Errorf("testutil: case file line %d: case %q has no --- line", c.Line, c.Name)
			}
			c.Input = append(c.Input, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("testutil: case file line %d: case %q has no --- line", c.Line, c.Name)
		}
		i++
		var exp strings.Builder
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "=== "); i++ {
			exp.WriteString(lines[i] + "\n")
		}
		c.Expected = strings.TrimRight(exp.String(), "\n")
		if c.Expected != "" {
			c.Expected += "\n"
		}
		cf.Cases = append(cf.Cases, c)
	}
	return cf, nil
}

// Format renders cf in the format ParseCases reads, with one blank line
// after each case's expected output.
func (cf *CaseFile) Format() string {
	var b strings.Builder
	b.WriteString(cf.Header)
	for _, c := range cf.Cases {
		fmt.Fprintf(&b, "=== %s\n", c.Name)
		for _, l := range c.Input {
			b.WriteString(l + "\n")
		}
		b.WriteString("---\n")
		b.WriteString(c.Expected)
		b.WriteString("\n")
	}
	return b.String()
}

// ReadCaseFile reads and parses the case file at path.
func ReadCaseFile(path string) (*CaseFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("testutil: read case file: %w", err)
	}
	cf, err := ParseCases(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cf, nil
}

// WriteCaseFile writes cf to path (for -rewrite flags).
func WriteCaseFile(path string, cf *CaseFile) error {
	if err := os.WriteFile(path, []byte(cf.Format()), 0o644); err != nil {
		return fmt.Errorf("testutil: write case file: %w", err)
	}
	return nil
}

// RunCaseFiles runs every case of the case files matching pattern as a
// subtest "FILE/NAME": run computes the case's output from its input lines
// (and fails the subtest itself on an error or a cross-check; where is
// "file:line" for messages). The output must equal the case's expected
// text, unless rewrite is set: then the expected texts are replaced by the
// outputs and the files rewritten, for review like code. It fails when no
// file matches.
func RunCaseFiles(t *testing.T, pattern string, rewrite bool, run func(t *testing.T, where string, input []string) string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files match %s: %v", pattern, err)
	}
	for _, path := range files {
		cf, err := ReadCaseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range cf.Cases {
			c := &cf.Cases[i]
			t.Run(filepath.Base(path)+"/"+c.Name, func(t *testing.T) {
				got := run(t, fmt.Sprintf("%s:%d", path, c.Line), c.Input)
				if rewrite {
					c.Expected = got
					return
				}
				if got != c.Expected {
					t.Errorf("%s:%d: output differs (run with -rewrite after review)\n got:\n%s\nwant:\n%s", path, c.Line, got, c.Expected)
				}
			})
		}
		if rewrite {
			if err := WriteCaseFile(path, cf); err != nil {
				t.Fatal(err)
			}
		}
	}
}
