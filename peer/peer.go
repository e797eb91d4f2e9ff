package peer

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// ErrParse is wrapped by every error about the content of a results file.
var ErrParse = errors.New("peer: bad results")

// Timing is what the timestamps of a format are.
type Timing int

const (
	// TimingUnknown: the tool wrote them and did not say (jsonl).
	TimingUnknown Timing = iota
	// TimingOpenLoopSend: the actual send of an open loop (vegeta). It is the
	// schedule only while the tool's workers kept up.
	TimingOpenLoopSend
	// TimingClosedLoopSend: the actual send of a closed loop (hey): each
	// worker waits for an answer before it sends again (coordinated
	// omission by construction).
	TimingClosedLoopSend
)

// String names the timing in words.
func (t Timing) String() string {
	switch t {
	case TimingOpenLoopSend:
		return "actual send of an open loop"
	case TimingClosedLoopSend:
		return "actual send of a closed loop"
	}
	return "as the tool wrote them"
}

// Format is one tool's results format.
type Format struct {
	Name   string // as --results names it: "vegeta", "vegeta-json", "hey-csv", "jsonl"
	Tool   string // the tool that writes it ("vegeta", "hey"), "" for jsonl
	Timing Timing // what its timestamps are

	// Relative is true when the timestamps count from the tool's own start
	// (hey's offsets): Options.Start places them.
	Relative bool

	newDecoder func(io.Reader, Options) decoder
}

// decoder reads the next record into res, returning io.EOF at the end.
type decoder interface {
	next(res *tare.Result) error
}

var formats = []Format{
	{Name: "vegeta", Tool: "vegeta", Timing: TimingOpenLoopSend, newDecoder: newVegetaGob},
	{Name: "vegeta-json", Tool: "vegeta", Timing: TimingOpenLoopSend, newDecoder: newVegetaJSON},
	{Name: "hey-csv", Tool: "hey", Timing: TimingClosedLoopSend, Relative: true, newDecoder: newHeyCSV},
	{Name: "jsonl", Timing: TimingUnknown, newDecoder: newJSONL},
}

// Formats lists the formats Lookup knows.
func Formats() []Format { return append([]Format(nil), formats...) }

// FormatNames is the list of format names, for messages.
func FormatNames() string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// Lookup returns the format called name, or a *tare.Error (EINVALID) naming
// the formats there are.
func Lookup(name string) (Format, error) {
	for _, f := range formats {
		if f.Name == name {
			return f, nil
		}
	}
	return Format{}, tare.Errorf(tare.EINVALID, "results format %q is not known: use one of %s", name, FormatNames())
}

// Spec is a parsed FORMAT:PATH.
type Spec struct {
	Format Format
	Path   string
}

// Arrival describes the results' arrivals for a run: whose results, and
// what their timestamps are.
func (s Spec) Arrival() string {
	return fmt.Sprintf("%s results (%s)", cmp.Or(s.Format.Tool, s.Format.Name), s.Format.Timing)
}

// ParseSpec parses FORMAT:PATH ("vegeta:results.bin"), or returns a
// *tare.Error (EINVALID) saying what is accepted.
func ParseSpec(s string) (Spec, error) {
	name, path, ok := strings.Cut(s, ":")
	if !ok || path == "" {
		return Spec{}, tare.Errorf(tare.EINVALID, "results %q is not FORMAT:PATH: use one of %s, a colon and the file, e.g. vegeta:results.bin", s, FormatNames())
	}
	f, err := Lookup(name)
	if err != nil {
		return Spec{}, err
	}
	return Spec{Format: f, Path: path}, nil
}

// Options sets up a Reader. The zero value suits formats with absolute
// timestamps.
type Options struct {
	// Start is the instant a relative timestamp of 0 stands for (hey's
	// offsets count from its own start: give the instant the tool was
	// started). Required for a Relative format.
	Start time.Time
}

// Reader reads the results of one file, one at a time.
type Reader struct {
	f     Format
	dec   decoder
	n     int // results read
	stall stallFinder
	err   error
}

// NewReader returns a Reader of f's results from r. It reads r as it goes:
// a large file is never held whole.
func NewReader(r io.Reader, f Format, opt Options) (*Reader, error) {
	if f.newDecoder == nil {
		return nil, tare.Errorf(tare.EINVALID, "results format %q is not known: use one of %s", f.Name, FormatNames())
	}
	if f.Relative && opt.Start.IsZero() {
		return nil, tare.Errorf(tare.EINVALID, "results format %q counts from the tool's start: give Options.Start", f.Name)
	}
	return &Reader{f: f, dec: f.newDecoder(r, opt)}, nil
}

// Read reads the next result into res: Seq (the record's number, from 0),
// Scheduled and Sent (both the tool's timestamp: see Timing), Done, Status,
// Err (a tare error kind), and what else the format has. It returns io.EOF
// after the last, and an error wrapping ErrParse for a bad record; after an
// error every call returns it again.
func (r *Reader) Read(res *tare.Result) error {
	if r.err != nil {
		return r.err
	}
	*res = tare.Result{}
	if err := r.dec.next(res); err != nil {
		r.err = err
		return err
	}
	res.Seq = uint64(r.n)
	r.n++
	r.stall.add(res.Sent, res.Done)
	return nil
}

// Count is the number of results read so far.
func (r *Reader) Count() int { return r.n }

// Format is the format being read.
func (r *Reader) Format() Format { return r.f }

// Stall is the longest stretch in which the tool sent nothing while
// requests were in flight, from the results read so far.
func (r *Reader) Stall() Stall { return r.stall.longest() }

// Warnings says, for the summary, where the latencies read are not from a
// scheduled time: a property of the format, made firmer by the stalls found
// in the results read so far.
func (r *Reader) Warnings() []string {
	tool := r.f.Tool
	if tool == "" {
		tool = "the tool"
	}
	st := r.Stall()
	var ws []string
	switch r.f.Timing {
	case TimingClosedLoopSend:
		w := fmt.Sprintf("coordinated omission: %s is a closed loop (each worker sends only when its last request has answered), so its latencies start at the actual send, never at a schedule: a slow server gets fewer requests, not longer latencies", tool)
		if st.Significant {
			w += "; " + st.describe(tool)
		}
		ws = append(ws, w)
	case TimingOpenLoopSend:
		if st.Significant {
			ws = append(ws, fmt.Sprintf("coordinated omission: %s; %s's latencies start at its actual send, so they hide the queueing of that stall", st.describe(tool), tool))
		} else {
			ws = append(ws, fmt.Sprintf("%s's latencies start at its actual send, not a schedule tare can see: they hide queueing wherever its workers ran out (no stall of its sends found)", tool))
		}
	default:
		w := fmt.Sprintf("the timestamps of %s results are as %s wrote them: tare cannot tell whether they are scheduled times or actual sends", r.f.Name, tool)
		if st.Significant {
			w = "coordinated omission: " + st.describe(tool) + "; " + w
		}
		ws = append(ws, w)
	}
	if r.f.Name == "hey-csv" {
		ws = append(ws, "hey's CSV leaves out the requests that got no response (connection errors, timeouts): only hey's own summary counts them")
	}
	return ws
}

// parseErr wraps ErrParse, and cause when there is one, for one record or
// line, quoting its input when there is text to quote.
func parseErr(where string, input []byte, cause error, format string, args ...any) error {
	const max = 120
	msg := fmt.Sprintf(format, args...)
	if input != nil {
		q, cut := input, ""
		if len(q) > max {
			q, cut = q[:max], "…"
		}
		where = fmt.Sprintf("%s %q%s", where, q, cut)
	}
	if cause != nil {
		return fmt.Errorf("%w: %s: %s: %w", ErrParse, where, msg, cause)
	}
	return fmt.Errorf("%w: %s: %s", ErrParse, where, msg)
}
