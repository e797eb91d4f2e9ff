// Package atomicfile writes a file whole or not at all.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tare-dev/tare"
)

// Write writes through fn to the file at path, or to stdout for "-", and
// returns the bytes written; flag names the path in messages. The file
// appears whole or not at all: it is written beside its final name and
// renamed into place.
func Write(path string, stdout io.Writer, flag string, fn func(io.Writer) error) (int64, error) {
	if path == "-" {
		cw := &countWriter{w: stdout}
		err := fn(cw)
		return cw.n, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, tare.Errorf(tare.EINVALID, "%s %s: %w", flag, path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, nothing is there
	cw := &countWriter{w: bufio.NewWriterSize(tmp, 256<<10)}
	err = fn(cw)
	if err == nil {
		err = cw.w.(*bufio.Writer).Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil && tare.ErrorCode(err) == tare.EINTERNAL {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
