package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tare-dev/tare"
)

// ErrDecode is wrapped by every error about a stored value that cannot be
// read back (a JSON column written by something other than this package).
var ErrDecode = errors.New("decode stored value")

// The column lists below are shared by both back ends; the values bound to
// them come from tickArgs in the same order. resultColumns are those of the
// per-record table of stores made before schema version 3, still read.
const (
	resultColumns = "seq, scheduled_ns, sent_ns, first_byte_ns, done_ns, dropped, status, err, " +
		"bytes_in, bytes_out, started_ns, worker, deliveries, output_tokens, token_source"
	tickColumns = "idx, start_ns, end_ns, arrivals, completions, errors, dropped, in_flight, " +
		"p50_ns, p95_ns, p99_ns, queue_depth, host_start_ns, host_end_ns, steal, busy, " +
		"max_cpu_steal, psi_some, psi_full, throttled, run_delay, cpu, per_cpu, " +
		"sut_run_delay, tare_run_delay, cpu_by, blame, psi_io_some, io_by, fixed_work_us"
	runColumns = "id, label, window_name, target, arrival, protocol, version, config, " +
		"status, started_at, ended_at, heartbeat_at, owner"
)

// nsOf is t in nanoseconds since the Unix epoch, or nil (NULL) for the zero
// time, which has no such representation.
func nsOf(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// timeOf undoes nsOf.
func timeOf(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

func nullFloat(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func floatOf(n sql.NullFloat64) *float64 {
	if !n.Valid {
		return nil
	}
	v := n.Float64
	return &v
}

// resultScan holds the scan destinations of one results row.
type resultScan struct {
	seq                                int64
	scheduled, sent, firstByte, done   sql.NullInt64
	dropped                            bool
	status, bytesIn, bytesOut, started sql.NullInt64
	deliveries, outputTokens           sql.NullInt64
	err, worker, tokenSource           sql.NullString
	dest                               []any
}

func newResultScan() *resultScan {
	s := &resultScan{}
	s.dest = []any{&s.seq, &s.scheduled, &s.sent, &s.firstByte, &s.done, &s.dropped,
		&s.status, &s.err, &s.bytesIn, &s.bytesOut, &s.started, &s.worker,
		&s.deliveries, &s.outputTokens, &s.tokenSource}
	return s
}

func (s *resultScan) result() *tare.Result {
	return &tare.Result{
		Seq:          uint64(s.seq),
		Scheduled:    timeOf(s.scheduled),
		Sent:         timeOf(s.sent),
		FirstByte:    timeOf(s.firstByte),
		Done:         timeOf(s.done),
		Dropped:      s.dropped,
		Status:       int(s.status.Int64),
		Err:          s.err.String,
		BytesIn:      s.bytesIn.Int64,
		BytesOut:     s.bytesOut.Int64,
		Started:      timeOf(s.started),
		Worker:       s.worker.String,
		Deliveries:   int(s.deliveries.Int64),
		OutputTokens: int(s.outputTokens.Int64),
		TokenSource:  s.tokenSource.String,
	}
}

// sharesJSON is the stored form of tare.CPUShares, with names of its own so
// a change to the root type cannot silently change what is on disk.
type sharesJSON struct {
	CPU     int     `json:"cpu"`
	User    float64 `json:"user"`
	Nice    float64 `json:"nice"`
	System  float64 `json:"system"`
	IOWait  float64 `json:"iowait"`
	IRQ     float64 `json:"irq"`
	SoftIRQ float64 `json:"softirq"`
	Steal   float64 `json:"steal"`
	Idle    float64 `json:"idle"`
}

func toSharesJSON(c tare.CPUShares) sharesJSON {
	return sharesJSON(c)
}

func (s sharesJSON) shares() tare.CPUShares {
	return tare.CPUShares(s)
}

// tickArgs appends the values of t, in tickColumns order after the run key,
// to dst.
func tickArgs(dst []any, run int64, idx int, t *tare.Tick) ([]any, error) {
	if t.Start.IsZero() || t.End.IsZero() {
		return dst, fmt.Errorf("tick %d has no start or end time", idx)
	}
	dst = append(dst,
		run, idx,
		t.Start.UnixNano(), t.End.UnixNano(),
		t.Arrivals, t.Completions, t.Errors, t.Dropped, t.InFlight,
		int64(t.P50), int64(t.P95), int64(t.P99),
		nullFloat(t.QueueDepth),
	)
	h := t.Host
	if h == nil {
		return append(dst, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil), nil
	}
	cpu, err := json.Marshal(toSharesJSON(h.CPU))
	if err != nil {
		return dst, fmt.Errorf("encode host CPU shares: %w", err)
	}
	per := make([]sharesJSON, len(h.PerCPU))
	for i, c := range h.PerCPU {
		per[i] = toSharesJSON(c)
	}
	perCPU, err := json.Marshal(per)
	if err != nil {
		return dst, fmt.Errorf("encode per-CPU shares: %w", err)
	}
	var cpuBy any // NULL when the ledger was not measured
	if h.CPUBy != nil {
		b, err := json.Marshal(h.CPUBy)
		if err != nil {
			return dst, fmt.Errorf("encode whose-CPU ledger: %w", err)
		}
		cpuBy = string(b)
	}
	var blame any // NULL when the probe did not measure it
	if h.Blame != nil {
		b, err := json.Marshal(h.Blame)
		if err != nil {
			return dst, fmt.Errorf("encode blame: %w", err)
		}
		blame = string(b)
	}
	var ioBy any // NULL when no process's storage I/O was seen
	if h.IOBy != nil {
		b, err := json.Marshal(h.IOBy)
		if err != nil {
			return dst, fmt.Errorf("encode I/O by process: %w", err)
		}
		ioBy = string(b)
	}
	return append(dst,
		nsOf(h.Start), nsOf(h.End),
		h.CPU.Steal, h.CPU.Busy(), h.MaxCPUSteal(),
		nullFloat(h.PSISome), nullFloat(h.PSIFull), nullFloat(h.Throttled), nullFloat(h.RunDelay),
		string(cpu), string(perCPU),
		nullFloat(h.SUTRunDelay), nullFloat(h.TareRunDelay), cpuBy, blame,
		nullFloat(h.PSIIOSome), ioBy, nullFloat(h.FixedWorkUS),
	), nil
}

// tickScan holds the scan destinations of one ticks row.
type tickScan struct {
	idx                                          int64
	start, end                                   int64
	arrivals, completions, errors, dropped, infl int64
	p50, p95, p99                                int64
	queueDepth                                   sql.NullFloat64
	hostStart, hostEnd                           sql.NullInt64
	steal, busy, maxCPUSteal                     sql.NullFloat64
	psiSome, psiFull, throttled, runDelay        sql.NullFloat64
	cpu, perCPU                                  sql.NullString
	sutRunDelay, tareRunDelay                    sql.NullFloat64
	cpuBy, blame                                 sql.NullString
	psiIOSome, fixedWorkUS                       sql.NullFloat64
	ioBy                                         sql.NullString
	dest                                         []any
}

func newTickScan() *tickScan {
	s := &tickScan{}
	s.dest = []any{&s.idx, &s.start, &s.end, &s.arrivals, &s.completions, &s.errors,
		&s.dropped, &s.infl, &s.p50, &s.p95, &s.p99, &s.queueDepth, &s.hostStart,
		&s.hostEnd, &s.steal, &s.busy, &s.maxCPUSteal, &s.psiSome, &s.psiFull,
		&s.throttled, &s.runDelay, &s.cpu, &s.perCPU, &s.sutRunDelay, &s.tareRunDelay, &s.cpuBy, &s.blame,
		&s.psiIOSome, &s.ioBy, &s.fixedWorkUS}
	return s
}

func (s *tickScan) tick() (tare.Tick, error) {
	t := tare.Tick{
		Start:       time.Unix(0, s.start).UTC(),
		End:         time.Unix(0, s.end).UTC(),
		Arrivals:    int(s.arrivals),
		Completions: int(s.completions),
		Errors:      int(s.errors),
		Dropped:     int(s.dropped),
		InFlight:    int(s.infl),
		P50:         time.Duration(s.p50),
		P95:         time.Duration(s.p95),
		P99:         time.Duration(s.p99),
		QueueDepth:  floatOf(s.queueDepth),
	}
	// The cpu column is the host sample's presence: the derived columns
	// (steal, busy, …) are for SQL readers and are not read back.
	if !s.cpu.Valid {
		return t, nil
	}
	h, err := decodeHost(s.cpu.String, s.perCPU.String)
	if err != nil {
		return t, fmt.Errorf("tick %d: %w", s.idx, err)
	}
	h.Start = timeOf(s.hostStart)
	h.End = timeOf(s.hostEnd)
	h.PSISome = floatOf(s.psiSome)
	h.PSIFull = floatOf(s.psiFull)
	h.Throttled = floatOf(s.throttled)
	h.RunDelay = floatOf(s.runDelay)
	h.SUTRunDelay = floatOf(s.sutRunDelay)
	h.TareRunDelay = floatOf(s.tareRunDelay)
	if s.cpuBy.Valid {
		var by tare.CPUBy
		if err := json.Unmarshal([]byte(s.cpuBy.String), &by); err != nil {
			return t, fmt.Errorf("%w: tick %d: whose-CPU ledger %q: %w", ErrDecode, s.idx, clip(s.cpuBy.String), err)
		}
		h.CPUBy = &by
	}
	if s.blame.Valid {
		var b tare.Blame
		if err := json.Unmarshal([]byte(s.blame.String), &b); err != nil {
			return t, fmt.Errorf("%w: tick %d: blame %q: %w", ErrDecode, s.idx, clip(s.blame.String), err)
		}
		h.Blame = &b
	}
	h.PSIIOSome = floatOf(s.psiIOSome)
	h.FixedWorkUS = floatOf(s.fixedWorkUS)
	if s.ioBy.Valid {
		if err := json.Unmarshal([]byte(s.ioBy.String), &h.IOBy); err != nil {
			return t, fmt.Errorf("%w: tick %d: I/O by process %q: %w", ErrDecode, s.idx, clip(s.ioBy.String), err)
		}
	}
	t.Host = h
	return t, nil
}

// decodeHost parses the stored aggregate and per-CPU shares of a host
// sample. An empty perCPU is no per-CPU figures.
func decodeHost(cpu, perCPU string) (*tare.HostSample, error) {
	var agg sharesJSON
	if err := json.Unmarshal([]byte(cpu), &agg); err != nil {
		return nil, fmt.Errorf("%w: host CPU shares %q: %w", ErrDecode, clip(cpu), err)
	}
	h := &tare.HostSample{CPU: agg.shares()}
	if perCPU == "" || perCPU == "null" {
		return h, nil
	}
	var per []sharesJSON
	if err := json.Unmarshal([]byte(perCPU), &per); err != nil {
		return nil, fmt.Errorf("%w: per-CPU shares %q: %w", ErrDecode, clip(perCPU), err)
	}
	if len(per) > 0 {
		h.PerCPU = make([]tare.CPUShares, len(per))
		for i, c := range per {
			h.PerCPU[i] = c.shares()
		}
	}
	return h, nil
}

// runScan holds the scan destinations of runColumns.
type runScan struct {
	id, label, window, target, arrival, protocol, version string
	config, status                                        string
	startedAt                                             int64
	endedAt                                               sql.NullInt64
	heartbeatAt                                           int64
	owner                                                 string
	dest                                                  []any
}

func newRunScan() *runScan {
	s := &runScan{}
	s.dest = []any{&s.id, &s.label, &s.window, &s.target, &s.arrival, &s.protocol,
		&s.version, &s.config, &s.status, &s.startedAt, &s.endedAt, &s.heartbeatAt, &s.owner}
	return s
}

func (s *runScan) run() (tare.Run, error) {
	r := tare.Run{
		ID:        s.id,
		Label:     s.label,
		Window:    s.window,
		Target:    s.target,
		Arrival:   s.arrival,
		Protocol:  s.protocol,
		Version:   s.version,
		Status:    tare.RunStatus(s.status),
		StartedAt: time.Unix(0, s.startedAt).UTC(),
		EndedAt:   timeOf(s.endedAt),
	}
	cfg, err := decodeConfig(s.config)
	if err != nil {
		return r, fmt.Errorf("run %q: %w", s.id, err)
	}
	r.Config = cfg
	return r, nil
}

func encodeConfig(cfg map[string]string) (string, error) {
	if len(cfg) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encode run config: %w", err)
	}
	return string(b), nil
}

// decodeConfig parses a stored run config; an empty object is a nil map,
// as it was before it was stored.
func decodeConfig(s string) (map[string]string, error) {
	var cfg map[string]string
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		return nil, fmt.Errorf("%w: run config %q: %w", ErrDecode, clip(s), err)
	}
	if len(cfg) == 0 {
		return nil, nil
	}
	return cfg, nil
}

// clip shortens a stored value quoted in an error message.
func clip(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
