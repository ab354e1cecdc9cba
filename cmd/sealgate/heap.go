package main

// heapFloor is memory the garbage collector counts as live and the
// process never touches (a ballast): it sets the heap's floor. The Go
// collector starts a cycle when the heap has grown by GOGC percent of
// what was live; a gateway's live heap is a few MiB, so without a floor
// it collects every few MiB of garbage, about every two hundred requests,
// and spent a sixth of sealgate's CPU under load doing it. With a floor
// of 32 MiB it collects about sixteen times less often. The pages are
// never written, so they are not resident: what the floor costs in RSS
// is the garbage it lets wait, at most 32 MiB more than without it,
// whatever the load (docs/GATEWAY.md, "Bounds").
const heapFloor = 32 << 20

// ballast returns the floor, or nothing if the operator set GOGC (or
// GOMEMLIMIT with GOGC=off): then the collector is theirs to tune.
func ballast(getenv func(string) string) []byte {
	if getenv("GOGC") != "" {
		return nil
	}
	return make([]byte, heapFloor)
}
