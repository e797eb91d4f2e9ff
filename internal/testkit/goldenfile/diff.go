package goldenfile

import (
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines diff shows around a change.
const contextLines = 2

// maxCells bounds the longest-common-subsequence table (lines of a × lines
// of b, once their common head and tail are set aside): past it, diff
// shows the changed middle as all removed, then all added.
const maxCells = 1 << 22

// diff is a line diff of a against b: "-" before a line only in a, "+"
// before one only in b, two unchanged lines around each change, and an
// "@@ line N @@" header (N in a) over each run of changes; "" when a and b
// are equal.
func diff(a, b []byte) string {
	x, y := lines(a), lines(b)
	// A golden file's change is usually a few lines: the common head and
	// tail are set aside first, and the table is over the rest.
	head := 0
	for head < len(x) && head < len(y) && x[head] == y[head] {
		head++
	}
	tail := 0
	for tail < len(x)-head && tail < len(y)-head && x[len(x)-1-tail] == y[len(y)-1-tail] {
		tail++
	}
	if head == len(x) && head == len(y) {
		return ""
	}
	var ops []edit
	for _, l := range x[:head] {
		ops = append(ops, edit{' ', l})
	}
	ops = append(ops, middle(x[head:len(x)-tail], y[head:len(y)-tail])...)
	for _, l := range x[len(x)-tail:] {
		ops = append(ops, edit{' ', l})
	}
	return render(ops)
}

// edit is one line of a diff: ' ' in both, '-' only in a, '+' only in b.
type edit struct {
	op   byte
	line string
}

// lines splits text into lines; a last line without its newline is
// marked, so that a lost final newline shows.
func lines(text []byte) []string {
	if len(text) == 0 {
		return nil
	}
	s := string(text)
	if strings.HasSuffix(s, "\n") {
		s = s[:len(s)-1]
	} else {
		s += " (no newline at the end)"
	}
	return strings.Split(s, "\n")
}

// middle is the edits that turn x into y, by their longest common
// subsequence.
func middle(x, y []string) []edit {
	var ops []edit
	if len(x)*len(y) > maxCells {
		for _, l := range x {
			ops = append(ops, edit{'-', l})
		}
		for _, l := range y {
			ops = append(ops, edit{'+', l})
		}
		return ops
	}
	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, edit{' ', x[i]})
			i, j = i+1, j+1
		case j == len(y) || i < len(x) && lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, edit{'-', x[i]})
			i++
		default:
			ops = append(ops, edit{'+', y[j]})
			j++
		}
	}
	return ops
}

// render prints the changes of ops with their contextLines.
func render(ops []edit) string {
	show := make([]bool, len(ops))
	for k, e := range ops {
		if e.op != ' ' {
			for c := max(k-contextLines, 0); c <= min(k+contextLines, len(ops)-1); c++ {
				show[c] = true
			}
		}
	}
	var out strings.Builder
	lineA := 0 // lines of a so far
	for k, e := range ops {
		if show[k] && (k == 0 || !show[k-1]) {
			fmt.Fprintf(&out, "@@ line %d @@\n", lineA+1)
		}
		if show[k] {
			fmt.Fprintf(&out, "%c %s\n", e.op, e.line)
		}
		if e.op != '+' {
			lineA++
		}
	}
	return out.String()
}
