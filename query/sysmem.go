package query

// DefaultMemoryTotal returns the default process-wide bound of the query
// memory budgets (docs/storage.md §5: half the machine's memory), bytes: half
// of SystemMemory, or 4 × DefaultMemoryBudget (8 GiB) where the machine's
// memory is unknown.
func DefaultMemoryTotal() int64 {
	if n, ok := SystemMemory(); ok {
		return n / 2
	}
	return 4 * DefaultMemoryBudget
}
