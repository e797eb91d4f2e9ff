package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeProcTree writes a fixture procRoot with n processes, pids 1000 up,
// each a stat line of realistic length (and a few entries /proc also has
// that are not processes), and returns its root.
func writeProcTree(tb testing.TB, dir string, n int) string {
	tb.Helper()
	for _, name := range []string{"self", "net", "sys"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for _, name := range []string{"stat", "uptime", "loadavg"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range n {
		pid := 1000 + i
		writeStat(tb, dir, procStat{PID: pid, Comm: fmt.Sprintf("worker-%d", i), PPID: 1, Ticks: uint64(17 * i), Start: uint64(4000 + i)})
	}
	return dir
}

// writeStat writes the stat file of s under root, replacing its content in
// place (same inode) when it exists.
func writeStat(tb testing.TB, root string, s procStat) {
	tb.Helper()
	p := filepath.Join(root, strconv.Itoa(s.PID), "stat")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(formatStat(s)), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// benchmarkProcTable measures one steady-state reading (every file already
// held open), and states it as the share of one core it costs at 1 s ticks:
// ns per reading / 1e9 s * 100 %.
func benchmarkProcTable(b *testing.B, root string) {
	pt := newProcTable(root)
	defer pt.close()
	dst := map[int]procStat{}
	if err := pt.read(dst, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := pt.read(dst, nil); err != nil {
			b.Fatal(err)
		}
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(float64(len(dst)), "procs")
	b.ReportMetric(ns/1e9*100, "%core@1s")
	b.Logf("%d processes: %.0f µs per reading = %.4f %% of one core at 1 s ticks", len(dst), ns/1e3, ns/1e9*100)
}

// BenchmarkProcTableFixture500 is a steady reading of a 500-process host,
// on a fixture tree so that the figure does not depend on the machine's
// process count. Goal: well under 2 ms, 0.2 % of a core at 1 s ticks.
func BenchmarkProcTableFixture500(b *testing.B) {
	benchmarkProcTable(b, writeProcTree(b, b.TempDir(), 500))
}

// BenchmarkProcTableLive is a steady reading of the real /proc, where the
// kernel formats each stat line (do_task_stat): dearer per process than a
// fixture's plain file.
func BenchmarkProcTableLive(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skipf("no /proc: %v", err)
	}
	benchmarkProcTable(b, "/proc")
}

// BenchmarkProcTableFixture500Cold is the first reading of a table, which
// opens every file: what a reading costs while processes churn.
func BenchmarkProcTableFixture500Cold(b *testing.B) {
	root := writeProcTree(b, b.TempDir(), 500)
	dst := map[int]procStat{}
	b.ReportAllocs()
	for b.Loop() {
		pt := newProcTable(root)
		if err := pt.read(dst, nil); err != nil {
			b.Fatal(err)
		}
		pt.close()
	}
}

// BenchmarkListProc compares ways of listing /proc's entries each reading:
// getdents64 on a held, rewound descriptor (what procTable does) against
// Readdirnames on a held, rewound *os.File and on a freshly opened one.
func BenchmarkListProc(b *testing.B) {
	roots := map[string]string{"live": "/proc", "fixture500": writeProcTree(b, b.TempDir(), 500)}
	for _, which := range []string{"live", "fixture500"} {
		root := roots[which]
		b.Run(which+"/getdents", func(b *testing.B) {
			pt := newProcTable(root)
			defer pt.close()
			b.ReportAllocs()
			for b.Loop() {
				if err := pt.list(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(pt.pids)), "pids")
		})
		b.Run(which+"/readdirnames-held", func(b *testing.B) {
			f, err := os.Open(root)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var pids []int
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Seek(0, 0); err != nil {
					b.Fatal(err)
				}
				names, err := f.Readdirnames(-1)
				if err != nil {
					b.Fatal(err)
				}
				pids = pidNames(pids[:0], names)
			}
			b.ReportMetric(float64(len(pids)), "pids")
		})
		b.Run(which+"/readdirnames-open", func(b *testing.B) {
			var pids []int
			b.ReportAllocs()
			for b.Loop() {
				f, err := os.Open(root)
				if err != nil {
					b.Fatal(err)
				}
				names, err := f.Readdirnames(-1)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				pids = pidNames(pids[:0], names)
			}
			b.ReportMetric(float64(len(pids)), "pids")
		})
	}
}

// pidNames appends the names that are pids, as list does.
func pidNames(pids []int, names []string) []int {
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}
