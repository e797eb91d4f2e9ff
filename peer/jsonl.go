package peer

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"time"

	"github.com/tare-dev/tare"
)

// jsonlRecord is one line of the jsonl form (see the package doc).
type jsonlRecord struct {
	Timestamp json.RawMessage `json:"timestamp"`
	LatencyMS *float64        `json:"latency_ms"`
	Status    *int            `json:"status"`
	Error     string          `json:"error"`
}

type jsonl struct {
	lines lineReader
}

func newJSONL(r io.Reader, _ Options) decoder { return &jsonl{lines: newLineReader(r)} }

func (j *jsonl) next(res *tare.Result) error {
	line, where, err := j.lines.next()
	if err != nil {
		return err
	}
	var rec jsonlRecord
	if err := json.Unmarshal(line, &rec); err != nil {
		return parseErr(where, line, err, "not a JSON object")
	}
	switch {
	case len(rec.Timestamp) == 0:
		return parseErr(where, line, nil, "no timestamp (an RFC 3339 string or seconds since the Unix epoch)")
	case rec.LatencyMS == nil:
		return parseErr(where, line, nil, "no latency_ms")
	case rec.Status == nil:
		return parseErr(where, line, nil, "no status (0 when there was none)")
	case *rec.LatencyMS < 0 || *rec.LatencyMS > 1e9:
		return parseErr(where, line, nil, "latency_ms %v is not a latency in milliseconds", *rec.LatencyMS)
	case *rec.Status < 0 || *rec.Status > 999:
		return parseErr(where, line, nil, "status %d is not an HTTP status (or 0)", *rec.Status)
	}
	ts, ok := parseTimestamp(rec.Timestamp)
	if !ok {
		return parseErr(where, line, nil, "timestamp %s is neither an RFC 3339 string nor seconds since the Unix epoch", rec.Timestamp)
	}
	res.Scheduled, res.Sent = ts, ts
	res.Done = ts.Add(time.Duration(math.Round(*rec.LatencyMS * float64(time.Millisecond))))
	res.Status = *rec.Status
	res.Err = errKind(res.Status, rec.Error)
	return nil
}

// parseTimestamp reads an RFC 3339 string or a number of seconds since the
// Unix epoch, within years 1970–2200.
func parseTimestamp(raw json.RawMessage) (time.Time, bool) {
	raw = bytes.TrimSpace(raw)
	var t time.Time
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return t, false
		}
		p, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return t, false
		}
		t = p
	} else {
		var secs float64
		if json.Unmarshal(raw, &secs) != nil || math.IsNaN(secs) {
			return t, false
		}
		whole, frac := math.Modf(secs)
		t = time.Unix(int64(whole), int64(math.Round(frac*1e9)))
	}
	if t.Year() < 1970 || t.Year() > 2200 {
		return time.Time{}, false
	}
	return t, true
}
