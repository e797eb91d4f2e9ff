package prompts

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tare-dev/tare"
)

// Request is one request of a trace: when it came, relative to the
// trace's first, and its input and output lengths in tokens. Blocks are
// the hashes of its prompt's blocks of BlockTokens tokens (Mooncake's
// hash_ids): two requests with the same leading hashes share that prefix.
type Request struct {
	At     time.Duration
	Input  int
	Output int
	Blocks []uint64
}

// BlockTokens is the tokens of one Mooncake prefix block.
const BlockTokens = 512

// The accepted trace forms, for messages.
const traceForm = `an Azure LLM inference trace CSV (a header with TIMESTAMP, ContextTokens and GeneratedTokens) or Mooncake JSON lines like {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]} (timestamp in ms)`

// ReadTrace reads a trace file, in either form, its requests sorted by
// time. A bad file is a *tare.Error with code EINVALID (ENOTFOUND when it
// does not exist) naming the file, the line and the accepted forms.
func ReadTrace(path string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, tare.Errorf(tare.ENOTFOUND, "trace file %q does not exist", path)
		}
		return nil, tare.Errorf(tare.EINVALID, "cannot read trace file %q: %w", path, err)
	}
	defer f.Close()
	return ParseTrace(f, path)
}

// ParseTrace reads a trace from r; file names it in messages.
func ParseTrace(r io.Reader, file string) ([]Request, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "cannot read trace file %q: %w", file, err)
	}
	if len(data) > MaxFileSize {
		return nil, tare.Errorf(tare.EINVALID, "trace file %q is larger than %d MiB", file, MaxFileSize>>20)
	}
	var reqs []Request
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		reqs, err = parseMooncake(t)
	} else {
		reqs, err = parseAzure(t)
	}
	if err == nil && len(reqs) == 0 {
		err = errors.New("no request in it")
	}
	if err != nil {
		return nil, tare.Errorf(tare.EINVALID, "trace file %q: %s; the file must be %s", file, err, traceForm)
	}
	// Sorted, then relative to the first: a trace cut from a longer one
	// starts at once.
	slices.SortStableFunc(reqs, func(a, b Request) int { return int(a.At - b.At) })
	first := reqs[0].At
	for i := range reqs {
		reqs[i].At -= first
	}
	return reqs, nil
}

// maxTraceTokens bounds a length read from a trace, so a bogus one cannot
// make a prompt of gigabytes.
const maxTraceTokens = 1 << 20

func checkLengths(in, out int) error {
	if in < 1 || in > maxTraceTokens || out < 0 || out > maxTraceTokens {
		return fmt.Errorf("input length %d and output length %d: want 1 to %d input tokens and 0 to %d output", in, out, maxTraceTokens, maxTraceTokens)
	}
	return nil
}

// mooncakeLine is one line of a Mooncake trace.
type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []uint64 `json:"hash_ids"`
}

func parseMooncake(data []byte) ([]Request, error) {
	var out []Request
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxFileSize)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l mooncakeLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("line %d: %s", n, jsonMessage(err))
		}
		if l.Timestamp == nil || l.InputLength == nil || l.OutputLength == nil {
			return nil, fmt.Errorf("line %d: timestamp, input_length and output_length are all needed", n)
		}
		if err := checkTimestamp(*l.Timestamp); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if err := checkLengths(*l.InputLength, *l.OutputLength); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(l.HashIDs) > *l.InputLength/BlockTokens+1 {
			return nil, fmt.Errorf("line %d: %d hash_ids for %d input tokens: at most one per %d tokens", n, len(l.HashIDs), *l.InputLength, BlockTokens)
		}
		out = append(out, Request{At: time.Duration(*l.Timestamp * float64(time.Millisecond)),
			Input: *l.InputLength, Output: *l.OutputLength, Blocks: l.HashIDs})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// maxTraceSpan bounds a trace's times (a year), so they fit a Duration.
const maxTraceSpan = 365 * 24 * time.Hour

func checkTimestamp(ms float64) error {
	if !(ms >= 0 && ms <= float64(maxTraceSpan/time.Millisecond)) {
		return fmt.Errorf("timestamp %v ms: want 0 to a year's worth", ms)
	}
	return nil
}

// azureTime is the Azure traces' TIMESTAMP: "2023-11-16 18:15:46.6805900"
// (up to 7 fractional digits, UTC).
const azureTime = "2006-01-02 15:04:05.999999999"

func parseAzure(data []byte) ([]Request, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("no CSV header: %v", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	ts, okT := col["TIMESTAMP"]
	in, okI := col["ContextTokens"]
	out, okO := col["GeneratedTokens"]
	if !okT || !okI || !okO {
		return nil, fmt.Errorf("header %q lacks TIMESTAMP, ContextTokens or GeneratedTokens", strings.Join(head, ","))
	}
	var reqs []Request
	var first time.Time
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err // a *csv.ParseError names its line
		}
		line, _ := r.FieldPos(0) // a record read has a field 0
		if len(rec) <= max(ts, in, out) {
			return nil, fmt.Errorf("line %d: %d fields, want %d", line, len(rec), len(head))
		}
		at, err := time.Parse(azureTime, strings.TrimSpace(rec[ts]))
		if err != nil {
			return nil, fmt.Errorf("line %d: TIMESTAMP %q: want like 2023-11-16 18:15:46.6805900", line, rec[ts])
		}
		if first.IsZero() {
			first = at
		}
		d := at.Sub(first)
		if d < -maxTraceSpan || d > maxTraceSpan {
			return nil, fmt.Errorf("line %d: TIMESTAMP %q is over a year from the first", line, rec[ts])
		}
		ni, err1 := strconv.Atoi(strings.TrimSpace(rec[in]))
		no, err2 := strconv.Atoi(strings.TrimSpace(rec[out]))
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: ContextTokens %q and GeneratedTokens %q must be whole numbers", line, rec[in], rec[out])
		}
		if err := checkLengths(ni, no); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		reqs = append(reqs, Request{At: d, Input: ni, Output: no})
	}
	return reqs, nil
}

// Traced gives arrival seq the prompt of trace request seq (round and
// round): Input words, the block of each of its Blocks hashes the same
// words in every request that has it (a shared prefix), the rest drawn
// for the arrival alone; a budget of Output tokens (at least 1).
func Traced(reqs []Request, seed uint64) tare.Prompts {
	return func(seq uint64) tare.Prompt {
		r := reqs[seq%uint64(len(reqs))]
		var b strings.Builder
		b.Grow(r.Input * 6)
		for i := range r.Input {
			if i > 0 {
				b.WriteByte(' ')
			}
			var w uint64
			if blk := i / BlockTokens; blk < len(r.Blocks) {
				w = mix64(seed ^ mix64(r.Blocks[blk]^streamBlocks) ^ mix64(uint64(i)))
			} else {
				w = mix64(seed ^ mix64(seq) ^ mix64(uint64(i)+streamWords))
			}
			b.WriteString(words[w%uint64(len(words))])
		}
		return tare.Prompt{Messages: []tare.Message{{Role: "user", Content: b.String()}}, MaxTokens: max(r.Output, 1)}
	}
}
