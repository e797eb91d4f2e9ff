package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeGraphTree writes a fixture procRoot of 500 processes whose first
// ten are the system under test (each with 40 descriptors, 20 of them
// sockets), and a TCP table of 2,000 connections among which the system
// under test's, and returns its root and process table.
func writeGraphTree(b *testing.B) (string, map[int]procStat) {
	root := writeProcTree(b, b.TempDir(), 500)
	var tcp strings.Builder
	tcp.WriteString("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
	row := func(i int, local, remote string, st string, inode int) {
		fmt.Fprintf(&tcp, "%4d: %s %s %s 00000000:00000000 00:00000000 00000000     0        0 %d 1 0000000000000000 20 4 30 10 -1\n", i, local, remote, st, inode)
	}
	row(0, "0100007F:1F40", "00000000:0000", "0A", 90000) // the app server listening on 127.0.0.1:8000
	for i := 1; i < 2000; i++ {
		row(i, fmt.Sprintf("0100007F:%04X", 30000+i), "0100007F:1F40", "01", 100000+i)
	}
	if err := os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(tcp.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for p := range 10 {
		dir := filepath.Join(root, strconv.Itoa(1000+p), "fd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for fd := range 40 {
			target := "/dev/null"
			if fd%2 == 0 {
				target = fmt.Sprintf("socket:[%d]", 100000+p*20+fd/2+1)
			}
			if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(fd))); err != nil {
				b.Fatal(err)
			}
		}
	}
	pt := newProcTable(root)
	defer pt.close()
	procs := map[int]procStat{}
	if err := pt.read(procs, nil); err != nil {
		b.Fatal(err)
	}
	return root, procs
}

// BenchmarkGraphLook is one look of the system under test's graph on a
// 500-process host with 2,000 connections, stated as the share of one
// core it costs at 1 s ticks. steady: the same sockets as at the last
// look (a service on keep-alive connections), so only its descriptors are
// listed; churn: a new connection at every look (short-lived ones), so
// the socket table is read as well.
func BenchmarkGraphLook(b *testing.B) {
	for _, churn := range []bool{false, true} {
		name := map[bool]string{false: "steady", true: "churn"}[churn]
		b.Run(name, func(b *testing.B) {
			root, procs := writeGraphTree(b)
			roots := make([]int, 10)
			for i := range roots {
				roots[i] = 1000 + i
			}
			g := newGraph(root, []Part{{PIDs: roots, How: "--pid"}})
			g.unixAll = func() ([]unixSocket, error) { return nil, nil }
			m := newMembers()
			m.find(procs, g.roots(), nil, nil)
			g.look(procs, m)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if churn {
					clear(g.held)
				}
				g.look(procs, m)
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/1e9*100, "%core@1s")
		})
	}
}
