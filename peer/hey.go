package peer

import (
	"bytes"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/tare-dev/tare"
)

// heyHeader is the first line of hey -o csv (hey v0.1.x, requester/print.go).
const heyHeader = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset"

// heyCSV reads hey's -o csv: seconds with four decimals (0.1 ms resolution),
// the offset counting from hey's own start.
type heyCSV struct {
	lines  lineReader
	start  time.Time
	header bool
}

func newHeyCSV(r io.Reader, opt Options) decoder {
	return &heyCSV{lines: newLineReader(r), start: opt.Start}
}

func (h *heyCSV) next(res *tare.Result) error {
	line, where, err := h.lines.next()
	if err != nil {
		if err == io.EOF && !h.header {
			return parseErr("line 1", nil, nil, "no header %q: not hey -o csv output", heyHeader)
		}
		return err
	}
	if !h.header {
		if string(line) != heyHeader {
			return parseErr(where, line, nil, "not hey -o csv's header %q", heyHeader)
		}
		h.header = true
		if line, where, err = h.lines.next(); err != nil {
			return err
		}
	}
	f := bytes.Split(line, []byte(","))
	if len(f) != 8 {
		return parseErr(where, line, nil, "%d fields, hey -o csv has 8", len(f))
	}
	secs := func(i int, name string) (time.Duration, error) {
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(f[i])), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 1e6 {
			return 0, parseErr(where, line, nil, "%s %q is not a number of seconds", name, f[i])
		}
		return time.Duration(math.Round(v * float64(time.Second))), nil
	}
	lat, err := secs(0, "response-time")
	if err != nil {
		return err
	}
	read, err := secs(5, "Response-read")
	if err != nil {
		return err
	}
	off, err := secs(7, "offset")
	if err != nil {
		return err
	}
	status, err := strconv.Atoi(string(bytes.TrimSpace(f[6])))
	if err != nil || status < 0 || status > 999 {
		return parseErr(where, line, nil, "status-code %q is not an HTTP status", f[6])
	}
	res.Scheduled = h.start.Add(off)
	res.Sent = res.Scheduled
	res.Done = res.Sent.Add(lat)
	if read <= lat {
		res.FirstByte = res.Done.Add(-read)
	}
	res.Status = status
	res.Err = errKind(status, "")
	return nil
}
