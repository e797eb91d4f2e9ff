package host

// TEMPORARY until branch h merges.
type procStat struct {
	PID     int
	Comm    string
	PPID    int
	KThread bool
	Ticks   uint64
	Start   uint64
}
type procTable struct{}

func newProcTable(string) *procTable                 { return &procTable{} }
func (t *procTable) read(dst map[int]procStat) error { clear(dst); return nil }
func (t *procTable) close()                          {}

func ListenerPIDs(procRoot string, port int) ([]int, error) { return nil, nil }
