package host

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// psiTotals are the cumulative stall times of one /proc/pressure file, in
// µs (https://docs.kernel.org/accounting/psi.html). The avg10/avg60/avg300
// figures are the kernel's own running averages over other windows, so only
// total is used: its delta is exact for the tick.
type psiTotals struct {
	Some, Full       uint64
	HasSome, HasFull bool // kernels before 5.13 have no "full" line for cpu
}

// The pressure files the sampler reads: tasks waiting for a CPU, and for
// I/O (a task in D state on a block device or a page-cache read, not on a
// socket or a pipe).
const (
	psiCPU = "cpu"
	psiIO  = "io"
)

// readPSI reads /proc/pressure/<resource> (psiCPU, psiIO). ok is false,
// with a nil error, when the kernel has no PSI: the file is missing
// (CONFIG_PSI off, or an old kernel) or reading it fails with EOPNOTSUPP
// (booted with psi=0).
func readPSI(pfs procfs.FS, resource string) (t psiTotals, ok bool, err error) {
	st, err := pfs.PSIStatsForResource(resource)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EOPNOTSUPP):
		return psiTotals{}, false, nil
	case errors.Is(err, procfs.ErrFileRead):
		return psiTotals{}, false, fmt.Errorf("read /proc/pressure/%s: %w", resource, err)
	case err != nil:
		// procfs returns its line parser's error as is.
		return psiTotals{}, false, fmt.Errorf("%w: /proc/pressure/%s: %w", ErrParse, resource, err)
	}
	if st.Some != nil {
		t.Some, t.HasSome = st.Some.Total, true
	}
	if st.Full != nil {
		t.Full, t.HasFull = st.Full.Total, true
	}
	return t, t.HasSome || t.HasFull, nil
}

// psiShares is the share of the tick some (all non-idle) tasks stalled on
// the resource: Δtotal µs / tick µs × 100, in [0, 100]. The reading and the clock
// are a few µs apart, so a share just over 100 is clamped.
func psiShares(prev, cur psiTotals, tick time.Duration) (some, full *float64) {
	if tick <= 0 {
		return nil, nil
	}
	us := float64(tick) / float64(time.Microsecond)
	if prev.HasSome && cur.HasSome {
		some = ptr(clamp100(float64(sub(cur.Some, prev.Some)) * 100 / us))
	}
	if prev.HasFull && cur.HasFull {
		full = ptr(clamp100(float64(sub(cur.Full, prev.Full)) * 100 / us))
	}
	return some, full
}

func clamp100(v float64) float64 { return min(max(v, 0), 100) }

func ptr(v float64) *float64 { return &v }
