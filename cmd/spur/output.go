package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spurdb/spur/query"
	"golang.org/x/term"
)

// Output forms of `spur query` (--output; --table is short for table).
const (
	outputJSON  = "json"
	outputTable = "table"
	outputCSV   = "csv"
)

// resolveOutput returns the output form from --output and --table.
func resolveOutput(output string, table bool) (string, error) {
	switch output {
	case outputJSON, outputTable, outputCSV:
	default:
		return "", fmt.Errorf("--output %q: want json, table or csv", output)
	}
	if table {
		if output != outputJSON && output != outputTable {
			return "", fmt.Errorf("--table and --output %s contradict each other", output)
		}
		return outputTable, nil
	}
	return output, nil
}

// writeResult prints a result in the given output form.
func writeResult(out io.Writer, res query.Result, form string) error {
	switch form {
	case outputTable:
		return query.WriteTable(out, res)
	case outputCSV:
		return query.WriteCSV(out, res)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// readQueryInput reads a query from in ("-"): on a terminal it first
// prints how to end the input on stderr, so that `spur query -` does not
// wait silently.
func readQueryInput(in io.Reader, stderr io.Writer) ([]byte, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintln(stderr, "spur query: reading a JSON query from the terminal; end it with Ctrl-D (Ctrl-Z then Enter on Windows), or pass a file: spur query QUERY.json")
	}
	return io.ReadAll(in)
}
