package peer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxLine bounds one line of a line-based format: a longer one is an error,
// never a reason to hold the file in memory.
const maxLine = 1 << 20

// lineReader yields the non-blank lines of a file with their numbers.
type lineReader struct {
	r  *bufio.Reader
	no int
}

func newLineReader(r io.Reader) lineReader {
	return lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next non-blank line without its end, and "line N" for
// messages; io.EOF at the end.
func (l *lineReader) next() (line []byte, where string, err error) {
	for {
		l.no++
		where = fmt.Sprintf("line %d", l.no)
		var buf []byte
		for {
			chunk, err := l.r.ReadSlice('\n')
			buf = append(buf, chunk...)
			if len(buf) > maxLine {
				return nil, where, parseErr(where, buf[:80], nil, "longer than %d bytes", maxLine)
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, where, fmt.Errorf("read %s: %w", where, err)
			}
			if err != nil && len(buf) == 0 {
				return nil, where, io.EOF
			}
			break
		}
		buf = bytes.TrimSpace(buf)
		if len(buf) > 0 {
			return buf, where, nil
		}
	}
}
