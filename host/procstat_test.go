package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Stat lines captured on the 2-vCPU development VM (kernel 6.18, USER_HZ
// 100) with cat /proc/<pid>/stat; the comm "a) b)" was set by a python
// process with prctl(PR_SET_NAME), the zombie is a forked python child its
// parent had not reaped.
const (
	statBash       = "1092 (bash) S 1091 1092 1092 0 -1 4194560 10798 4696533 0 159 3 10 17763 3469 20 0 1 0 4964 5259264 978 18446744073709551615 94124250476544 94124251265949 140729726126928 0 0 0 0 4 1132560123 1 0 0 17 0 0 0 0 0 0 94124251499248 94124251547492 94124378284032 140729726135132 140729726135147 140729726135147 140729726136298 0\n"
	statGoTest     = "11685 (report.test) R 9853 9850 6438 0 -1 4194304 73304 53926 0 109 497 58 312 84 20 0 7 0 40609 2169630720 6617 18446744073709551615 4194304 10899008 140731496657920 0 0 0 0 0 2143420159 0 0 0 17 0 0 0 0 0 0 17608704 23102336 452141056 140731496659463 140731496659600 140731496659600 140731496660944 0\n"
	statKthreadd   = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 31 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	statKworker    = "12 (kworker/u8:0-events_unbound) I 2 0 0 0 -1 69238880 0 0 0 0 0 39 0 0 20 0 1 0 31 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	statInit       = "1 (process_api) S 0 0 0 0 -1 4194560 19769 2233670 0 894 37 264 4702 2450 10 -10 13 0 31 41574400 2814 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	statParenComm  = "13259 (a) b) R 13215 13215 6403 0 -1 4194304 2889 6486 1 0 6 1 3 3 20 0 1 0 42533 17149952 3416 18446744073709551615 93847754846208 93847754846549 140737261238704 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0 93847754857904 93847754858520 93848366587904 140737261246533 140737261246728 140737261246728 140737261248463 0\n"
	statZombie     = "13258 (python3) Z 13217 13215 6403 0 -1 4227148 235 0 0 0 9 0 0 0 20 0 1 0 42481 0 0 18446744073709551615 0 0 0 0 0 0 0 16781312 2 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	statUpToStart  = "7 (short) S 1 7 7 0 -1 4194304 0 0 0 0 5 6 0 0 20 0 1 0 99"
	statTruncated  = "1092 (bash) S 1091 1092 1092 0 -1 4194560 10798 4696533 0 159 3 10 17763 3469 20 0 1 0\n"
	statBadUtime   = "1092 (bash) S 1091 1092 1092 0 -1 4194560 10798 4696533 0 159 x3 10 17763 3469 20 0 1 0 4964 5259264\n"
	statBadStart   = "1092 (bash) S 1091 1092 1092 0 -1 4194560 10798 4696533 0 159 3 10 17763 3469 20 0 1 0 -4964 5259264\n"
	statBadFlags   = "1092 (bash) S 1091 1092 1092 0 -1 0x400140 10798 4696533 0 159 3 10 17763 3469 20 0 1 0 4964 5259264\n"
	statBadPPID    = "1092 (bash) S -1 1092 1092 0 -1 4194560 10798 4696533 0 159 3 10 17763 3469 20 0 1 0 4964 5259264\n"
	statTicksOverf = "9 (x) S 1 9 9 0 -1 0 0 0 0 0 18446744073709551615 1 0 0 20 0 1 0 4964\n"
)

// TestParseProcStat parses captured lines and the ways a line can be bad;
// each error must wrap ErrParse, name the field and quote the line.
func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    procStat
		wantErr string // a piece of the error message, naming the bad field
	}{
		{name: "bash", in: statBash, want: procStat{PID: 1092, Comm: "bash", PPID: 1091, Ticks: 13, Reaped: 21232, Start: 4964}},
		{name: "go test binary", in: statGoTest, want: procStat{PID: 11685, Comm: "report.test", PPID: 9853, Ticks: 555, Reaped: 396, Start: 40609}},
		{name: "init", in: statInit, want: procStat{PID: 1, Comm: "process_api", PPID: 0, Ticks: 301, Reaped: 7152, Start: 31}},
		{name: "kernel thread", in: statKthreadd, want: procStat{PID: 2, Comm: "kthreadd", KThread: true, Start: 31}},
		// a workqueue worker's name is longer than TASK_COMM_LEN: the
		// kernel appends the workqueue it is serving
		{name: "kworker", in: statKworker, want: procStat{PID: 12, Comm: "kworker/u8:0-events_unbound", PPID: 2, KThread: true, Ticks: 39, Start: 31}},
		{name: "paren and space in comm", in: statParenComm, want: procStat{PID: 13259, Comm: "a) b", PPID: 13215, Ticks: 7, Reaped: 6, Start: 42533}},
		{name: "zombie", in: statZombie, want: procStat{PID: 13258, Comm: "python3", PPID: 13217, Ticks: 9, Start: 42481}},
		{name: "ends at starttime", in: statUpToStart, want: procStat{PID: 7, Comm: "short", PPID: 1, Ticks: 11, Start: 99}},
		{name: "empty comm", in: "5 () S 1 5 5 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 8\n", want: procStat{PID: 5, PPID: 1, Ticks: 2, Start: 8}},
		{name: "truncated", in: statTruncated, wantErr: "21 fields, want at least 22"},
		{name: "cut in the comm", in: "1092 (ba", wantErr: "no command name"},
		{name: "empty", in: "", wantErr: "no command name"},
		{name: "no parentheses", in: "1 init S 0 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 8", wantErr: "no command name"},
		{name: "reversed parentheses", in: "1 )init( S 0", wantErr: "no command name"},
		{name: "bad utime", in: statBadUtime, wantErr: `bad utime "x3"`},
		{name: "negative starttime", in: statBadStart, wantErr: `bad starttime "-4964"`},
		{name: "hex flags", in: statBadFlags, wantErr: `bad flags "0x400140"`},
		{name: "negative ppid", in: statBadPPID, wantErr: `bad ppid "-1"`},
		{name: "bad pid", in: "x1092 (bash) S 1091", wantErr: `bad pid "x1092 "`},
		{name: "pid zero", in: "0 (idle) S 0", wantErr: `bad pid`},
		{name: "pid too large", in: "99999999999 (bash) S 1", wantErr: `bad pid`},
		{name: "no space after comm", in: "5 (x)S 1 5 5 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 8", wantErr: "no space after"},
		{name: "ticks overflow", in: statTicksOverf, wantErr: "overflows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tt.in))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one wrapping ErrParse and saying %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
					t.Errorf("error %v does not quote the line", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

// TestParseStatAllocs holds parseStat to its promise: procTable parses
// every process on the machine every tick.
func TestParseStatAllocs(t *testing.T) {
	b := []byte(statGoTest)
	var s procStat
	if n := testing.AllocsPerRun(100, func() { _, _ = parseStat(b, statStartTime, &s) }); n != 0 {
		t.Errorf("parseStat allocates %v times per line, want 0", n)
	}
}

// formatStat writes s back as a stat line, with utime holding all of Ticks
// and the fields parseProcStat skips set to what a sleeping process shows.
func formatStat(s procStat) string {
	var flags uint64 = 0x400000 // PF_RANDOMIZE, set on most user processes
	if s.KThread {
		flags |= pfKThread
	}
	return fmt.Sprintf("%d (%s) S %d %d %d 0 -1 %d 0 0 0 0 %d 0 %d 0 20 0 1 0 %d 5259264 978\n",
		s.PID, s.Comm, s.PPID, s.PID, s.PID, flags, s.Ticks, s.Reaped, s.Start)
}

// FuzzParseProcStat: parseProcStat never panics, fails only with ErrParse,
// and what it accepts is sane and survives being written back and parsed
// again.
func FuzzParseProcStat(f *testing.F) {
	for _, s := range []string{statBash, statKthreadd, statKworker, statParenComm, statZombie, statUpToStart, statTruncated, statBadUtime, statTicksOverf, "", "1 (", "1 ()"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseProcStat(b)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error %v does not wrap ErrParse", err)
			}
			return
		}
		if s.PID <= 0 || s.PID > maxPID || s.PPID < 0 || s.PPID > maxPID {
			t.Fatalf("pid %d, ppid %d accepted from %q", s.PID, s.PPID, b)
		}
		if open, closing := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')'); s.Comm != string(b[open+1:closing]) {
			t.Fatalf("comm %q, want what lies between the first '(' and the last ')' of %q", s.Comm, b)
		}
		line := formatStat(s)
		again, err := parseProcStat([]byte(line))
		if err != nil || again != s {
			t.Fatalf("%q parsed as %+v; written back as %q it parses as %+v, %v", b, s, line, again, err)
		}
	})
}

// BenchmarkParseProcStat is the parsing share of a procTable reading, per
// process.
func BenchmarkParseProcStat(b *testing.B) {
	line := []byte(statGoTest)
	var s procStat
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseStat(line, statStartTime, &s); err != nil {
			b.Fatal(err)
		}
	}
}
