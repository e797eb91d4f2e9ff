package tare

// SummarySchema names the version of the Summary JSON contract.
const SummarySchema = "tare.summary/v1"

// Summary is the machine-readable summary of one run (`--json`), the
// contract of docs/json.md: keys may be added, never renamed. Times are
// milliseconds, shares are percent, counts are integers, and a figure that
// could not be measured is nil (JSON null), never 0.
type Summary struct {
	Schema       string         `json:"schema"`
	Run          Run            `json:"run"`
	Env          Env            `json:"env"`
	Requests     Requests       `json:"requests"`
	Rate         Rate           `json:"rate"`
	Latency      LatencyMS      `json:"latency_ms"`
	Service      PercentilesMS  `json:"service_ms"`
	SendLag      LagMS          `json:"send_lag_ms"`
	Generator    Generator      `json:"generator"`
	Queue        *QueueSummary  `json:"queue"`
	Model        *ModelSummary  `json:"model"`
	TTFB         *PercentilesMS `json:"ttfb_ms,omitempty"` // a plain HTTP target's time to the first response byte, from the send
	Host         HostSummary    `json:"host"`
	SUT          *SUTSummary    `json:"system_under_test"`
	Blame        *Blame         `json:"blame"`
	CleanLatency *CleanLatency  `json:"clean_latency_ms"`
	Tail         *Tail          `json:"tail,omitempty"` // per-request blame, where the scheduler probe measured the waits
	Goodput      *Goodput       `json:"goodput,omitempty"`
	Verdict      Verdict        `json:"verdict"`
	ErrorKinds   map[string]int `json:"error_kinds,omitempty"`  // error kind → count
	StatusCodes  map[string]int `json:"status_codes,omitempty"` // HTTP status → count
	// ErrorMessages holds, per error kind, the words of its first failure
	// (the server's message where it gave one), so "http 400" says why.
	ErrorMessages map[string]string `json:"error_messages,omitempty"`
	// FailedAfterStatus counts the requests answered with a 2xx status
	// that failed after it, by status and kind ("200 timeout": a stream
	// that started, then timed out): StatusCodes counts them as that status.
	FailedAfterStatus map[string]int     `json:"failed_after_status,omitempty"`
	Thresholds        map[string]float64 `json:"thresholds,omitempty"`   // the thresholds the verdict used
	Shards            []ShardSummary     `json:"shards,omitempty"`       // per generator, when the run was sharded
	WorkerHosts       []WorkerHost       `json:"worker_hosts,omitempty"` // per worker host, when workers published their host
	Targets           []TargetSummary    `json:"targets,omitempty"`      // per target, when a targets file mixed requests
	Stages            []StageSummary     `json:"stages,omitempty"`       // per stage, when the rate ramped through stages
	Warmup            *Warmup            `json:"warmup,omitempty"`       // the warm-up left out of every figure, when there was one
}

// PollutedThreshold is the share (%) above which a tick of the run was
// polluted: the threshold its verdict recorded, DefaultPollutedThreshold
// when it recorded none (a summary written before thresholds were kept).
func (s *Summary) PollutedThreshold() float64 {
	if v, ok := s.Thresholds[PollutedThresholdKey]; ok {
		return v
	}
	return DefaultPollutedThreshold
}

// QuantilesMS are the usual tail percentiles, in milliseconds.
type QuantilesMS struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
}

// TargetSummary is one request of a targets file: what the arrivals that
// took it got.
type TargetSummary struct {
	Name     string      `json:"name"` // the file's name for it, or its method and URL
	Requests int         `json:"requests"`
	OK       int         `json:"ok"`
	Errors   int         `json:"errors"`
	Dropped  int         `json:"dropped"`
	Latency  QuantilesMS `json:"latency_ms"`
}

// StageSummary is one stage of a ramping schedule, judged on its own: the
// arrivals scheduled in it, and the host during its seconds.
type StageSummary struct {
	// Stage is the stage's number in the schedule, from 1 (--stages
	// 30s:10/s,2m:50/s has stages 1 and 2); a jump (0s) and a stage the
	// warm-up covers have none here, so numbers may skip. 0 in a summary
	// stored before it was recorded.
	Stage        int         `json:"stage,omitempty"`
	StartS       float64     `json:"start_s"`    // offset of the stage's start from the run's
	DurationS    float64     `json:"duration_s"` // what of it was measured (a warm-up takes the rest)
	FromPerS     float64     `json:"from_per_s"` // the rate the stage ramps from
	TargetPerS   float64     `json:"target_per_s"`
	Requests     int         `json:"requests"`
	Errors       int         `json:"errors"`
	OfferedPerS  *float64    `json:"offered_per_s"`  // arrivals / duration
	AchievedPerS *float64    `json:"achieved_per_s"` // completions in the stage's seconds, whenever scheduled / duration
	Latency      QuantilesMS `json:"latency_ms"`
	Verdict      Level       `json:"verdict"`           // the stage's own verdict
	Fired        []string    `json:"fired,omitempty"`   // the signals that fired in it
	SLO          *bool       `json:"slo_met,omitempty"` // whether the stage met the SLO; nil without one
}

// Warmup is the start of a run sent but left out of every figure and of
// the verdict (--warmup).
type Warmup struct {
	DurationS float64 `json:"duration_s"`
	Requests  int     `json:"requests"` // arrivals scheduled in it, left out
}

// Requests counts what happened to every arrival.
type Requests struct {
	Total   int `json:"total"` // arrivals
	OK      int `json:"ok"`
	Errors  int `json:"errors"`
	Dropped int `json:"dropped"` // arrivals never sent: the in-flight cap was reached
	// Redirects is how many redirects were followed, over all requests:
	// the server answered Total − Dropped + Redirects requests. Only plain
	// HTTP targets follow redirects (at most --redirects per request).
	Redirects int `json:"redirects"`
}

// Rate is offered against achieved load.
type Rate struct {
	Offered  *float64 `json:"offered_per_s"`  // arrivals per second of the arrival window
	Achieved *float64 `json:"achieved_per_s"` // completions per second of wall time
}

// LatencyMS are latency figures measured from the scheduled time.
type LatencyMS struct {
	Avg *float64 `json:"avg"`
	P50 *float64 `json:"p50"`
	P90 *float64 `json:"p90"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
	Max *float64 `json:"max"`
}

// PercentilesMS are the usual tail percentiles and the maximum.
type PercentilesMS struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
	Max *float64 `json:"max"`
}

// LagMS is the send lag: actual send − scheduled.
type LagMS struct {
	P50 *float64 `json:"p50"`
	P99 *float64 `json:"p99"`
	Max *float64 `json:"max"`
}

// Generator is tare's own use of the machine: a generator near its limit
// invents latency.
type Generator struct {
	CPUPct      *float64 `json:"cpu_pct"`       // share of one core
	RunDelayPct *float64 `json:"run_delay_pct"` // its own wait for a CPU, share of wall time
	// Engine is what sent the load: "event loop" (plain http://, each loop
	// a thread of its own) or "goroutines" (TLS, a proxy, --net-http, a
	// queue, a model); Engines how many loops; Connections the most the
	// loops had open at once. Empty where the load was not tare's own.
	Engine      string `json:"engine,omitempty"`
	Engines     int    `json:"engines,omitempty"`
	Connections int    `json:"connections,omitempty"`
	// Protocols counts the connections an HTTP/2 target (--http2, --h2c)
	// opened by what each spoke: "h2" (chosen by ALPN), "h2c" (prior
	// knowledge), or what a server chose instead of h2 ("http/1.1"),
	// such connections closed unused. Left out for other targets.
	Protocols map[string]int `json:"protocols,omitempty"`
	// ConnectionUse is what the run did with its connections, for a
	// target that counts them (--url, --targets, --model); left out for
	// the others.
	ConnectionUse *ConnectionUse `json:"connection_use,omitempty"`
}

// ConnectionUse is a run's connections to its target.
type ConnectionUse struct {
	// Limit is --connections, the most open at once; nil when none was
	// given (requests in flight are the limit then).
	Limit  *int `json:"limit"`
	Opened int  `json:"opened"` // connections established
	Reused int  `json:"reused"` // requests sent on a connection that had carried one before
	// Closed counts the connections closed while the run went on (the
	// server closed them, an error or a timeout cut them); the others
	// were still open when it ended.
	Closed int `json:"closed"`
	// Waited counts the requests that waited for a connection at the
	// limit; nil where it is not counted (net/http's pool).
	Waited *int `json:"waited"`
	// InUsePerTick is, per tick of the timeline (TickMS long, from the
	// start of the figures), how many connections carried a request at
	// some moment of it (from its send to its end).
	TickMS       float64 `json:"tick_ms"`
	InUsePerTick []int   `json:"in_use_per_tick"`
}

// QueueSummary are the figures of a queue target. Besides the wait and the
// depth, what the generator saw of the queue that its results do not show;
// each is nil when it was not measured (a summary merged from the shards'
// records).
type QueueSummary struct {
	Wait  WaitMS     `json:"wait_ms"`
	Depth DepthStats `json:"depth"`
	// Redelivered counts the jobs whose result took more than one
	// delivery: a worker died, or seemed dead (claim idle), holding them,
	// and their model was called again.
	Redelivered *int `json:"redelivered"`
	// DuplicateResults counts results for a job already reported (a job
	// done twice), not reported again; UnknownResults, results naming this
	// run but no job it enqueued; LateResults, results for a job already
	// given up (timed out or unfinished).
	DuplicateResults *int `json:"duplicate_results"`
	UnknownResults   *int `json:"unknown_results"`
	LateResults      *int `json:"late_results"`
	// OldestPending is the age of the oldest job delivered to a worker and
	// not completed: a job held by a dead worker shows here long before its
	// timeout.
	OldestPending *PendingMS `json:"oldest_pending_ms"`
	// Workers are the workers registered on the queue during the run.
	Workers *QueueWorkers `json:"workers"`
}

// PendingMS is the oldest pending job's age over a run.
type PendingMS struct {
	Max *float64 `json:"max"` // the highest of the samples
	End *float64 `json:"end"` // at the last sample, as the run ended
}

// QueueWorkers counts the workers registered on a queue during a run.
type QueueWorkers struct {
	Max  int `json:"max"`  // registered at once, at most
	End  int `json:"end"`  // registered at the last look, as the run ended
	Lost int `json:"lost"` // times every registered worker went away mid-run
}

// Int returns a pointer to v, for the optional counts of a Summary.
func Int(v int) *int { return &v }

// WaitMS is the queue wait: worker start − enqueue.
type WaitMS struct {
	Avg *float64 `json:"avg"`
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
}

// DepthStats is the queue depth over the run.
type DepthStats struct {
	Mean *float64 `json:"mean"`
	Max  *float64 `json:"max"`
}

// ModelSummary are the figures of a model endpoint.
type ModelSummary struct {
	TTFT         PercentilesMS `json:"ttft_ms"`
	TPOT         PercentilesMS `json:"tpot_ms"`
	OutputTokens int           `json:"output_tokens"`
	TokensPerS   *float64      `json:"tokens_per_s"`
	// InputTokens are the prompts' tokens as the server's usage counted
	// them (InputTokenSource "usage", or "worker" for a queue's worker
	// reporting its model's usage); nil when no request's usage said.
	InputTokens      *int     `json:"input_tokens"`
	InputTokensPerS  *float64 `json:"input_tokens_per_s"` // input tokens / wall seconds
	InputTokenSource string   `json:"input_token_source,omitempty"`
	// Classes are the figures of each class of call (Result.Class), in
	// order: per turn of a conversation, a shared prefix group's first
	// requests and its later ones. None when the load has no classes.
	Classes []ClassSummary `json:"classes,omitempty"`
	// Conversations are the figures per conversation of a multi-turn
	// load; nil for single requests.
	Conversations *ConversationSummary `json:"conversations,omitempty"`
	// PromptCount compares the server's count of each prompt (its usage)
	// with tare's own; nil when no request had both.
	PromptCount *TokenCount `json:"prompt_count,omitempty"`
	// Server is the model server's own figures, read from its metrics
	// during the run (--model-metrics); nil when none were read.
	Server *ModelServer `json:"server,omitempty"`
}

// ClassSummary is what the model calls of one class got.
type ClassSummary struct {
	Name     string        `json:"name"`
	Requests int           `json:"requests"`
	OK       int           `json:"ok"`
	Errors   int           `json:"errors"`
	TTFT     PercentilesMS `json:"ttft_ms"`
	Latency  QuantilesMS   `json:"latency_ms"`
	// InputTokens is the mean prompt length the server counted (its
	// usage); nil when it gave none.
	InputTokens *float64 `json:"input_tokens"`
}

// ConversationSummary is a multi-turn load's conversations: how many
// were seen (at least one turn finished in the run), how many had every
// turn seen succeed, their turns, and how long one took from its first
// turn's scheduled time to its last turn's answer.
type ConversationSummary struct {
	Count    int         `json:"count"`
	Complete int         `json:"complete"`
	Turns    float64     `json:"turns_mean"`
	Duration QuantilesMS `json:"duration_ms"`
}

// TokenCount compares the server's token counts of the prompts with
// tare's own (words: tare has no tokenizer), since every per-token figure
// and every prompt length tare was asked for depend on them. They
// disagree where they differ by more than MarginPct of tare's count and
// more than MarginTokens (a chat template adds a few tokens of its own).
type TokenCount struct {
	Compared     int      `json:"compared"`      // requests with both counts
	Disagreed    int      `json:"disagreed"`     // of them, those beyond the margin
	DisagreedPct *float64 `json:"disagreed_pct"` // their share, %
	MarginPct    float64  `json:"margin_pct"`
	MarginTokens int      `json:"margin_tokens"`
	// TokensPerWord is the server's tokens over tare's words, all the
	// compared requests together.
	TokensPerWord *float64 `json:"tokens_per_word"`
}

// The margin beyond which the server's count of a prompt and tare's
// disagree (TokenCount): more than 25 % and more than 16 tokens.
const (
	TokenMarginPct    = 25
	TokenMarginTokens = 16
)

// ModelServer is what a model server said of itself during a run, read
// from its Prometheus metrics twice a tick. Its waiting requests are the
// model endpoint's queue depth (each tick's QueueDepth). A figure the
// server does not export is nil.
type ModelServer struct {
	MetricsURL string     `json:"metrics_url"`
	Server     string     `json:"server"`   // whose metric names it exports: vllm, sglang, tgi, llama.cpp
	Readings   int        `json:"readings"` // reads that answered
	Failed     int        `json:"failed"`   // reads that did not
	Waiting    DepthStats `json:"waiting"`  // requests waiting to be scheduled: the server's queue
	Running    DepthStats `json:"running"`
	// KVCachePct is the share of the KV cache in use, 0–100.
	KVCachePct DepthStats `json:"kv_cache_pct"`
	// Preemptions is how many requests the server preempted during the
	// run (its counter's increase); nil when it does not count them.
	Preemptions *int `json:"preemptions"`
}

// HostSummary is the host's interference over the run.
type HostSummary struct {
	CPUBusyPct       *float64   `json:"cpu_busy_pct"`
	Steal            StealStats `json:"steal_pct"`
	PollutedTicksPct *float64   `json:"polluted_ticks_pct"`
	PSISomePct       *float64   `json:"psi_some_pct"`
	ThrottledPct     *float64   `json:"throttled_pct"`
	RunDelayPct      *float64   `json:"run_delay_pct"`
	// NeighbourWaitPct is the mean share of wall time the system under test
	// and tare waited for a CPU that a neighbour held (HostSample.NeighbourWait).
	NeighbourWaitPct *float64 `json:"neighbour_wait_pct"`
	CPUBy            *CPUBy   `json:"cpu_by"` // whose CPU the run was, over all its ticks; nil when not measured
	Ticks            int      `json:"ticks"`
}

// SUTSummary is what tare knows of the system under test: which processes
// it is, how it found them, and what they got of the machine.
type SUTSummary struct {
	PIDs    []int  `json:"pids"`
	FoundBy string `json:"found_by"` // e.g. "--pid", "listening socket of 127.0.0.1:8080", "started by tare"
	// Calls are the processes of this host it called (the roots of every
	// node of Graph after the first ones), counted with it from the tick
	// tare saw the connection: their CPU is the system's own, not a
	// neighbour's.
	Calls        []int    `json:"calls,omitempty"`
	CPUPct       *float64 `json:"cpu_pct"`       // share of one core, as the generator's: 150 is one and a half cores
	RunDelayPct  *float64 `json:"run_delay_pct"` // its threads' wait for a CPU, share of wall time
	ThrottledPct *float64 `json:"throttled_pct"` // share of the run its cgroup was throttled
	// Graph is the system under test as a process graph: what was named
	// or found first, then every process of this host it called, in the
	// order tare found them (a proxy, the app server behind it, the
	// app's database on a socket file). Empty when the graph is unknown.
	Graph []SUTNode `json:"graph,omitempty"`
}

// SUTNode is one node of the system under test's process graph: the
// processes that hold one listening socket (a pre-fork pool: nginx's
// workers, gunicorn's, PostgreSQL's postmaster and its backends) or that
// were named together, with their descendants.
type SUTNode struct {
	Name        string   `json:"name"`          // command name of its first process (the pool's master)
	PIDs        []int    `json:"pids"`          // its processes at the end of the run (or when last seen)
	CPUPct      *float64 `json:"cpu_pct"`       // share of one core over the run, as SUTSummary's
	RunDelayPct *float64 `json:"run_delay_pct"` // its threads' wait for a CPU, share of wall time
	// ReachedBy says how tare found it: "listening socket 127.0.0.1:8080",
	// "--pid", "tcp 127.0.0.1:8000 from nginx", "unix
	// /var/run/postgresql/.s.PGSQL.5432 from gunicorn", "tcp
	// 10.231.7.2:8080 in netns of pid 4121 from socat".
	ReachedBy string `json:"reached_by"`
	From      *int   `json:"from,omitempty"` // the index of the node that called it; nil for a node found first
	// Container is the container its first process runs in, named as
	// the ledger names a neighbour's; nil outside one.
	Container *Container `json:"container,omitempty"`
}

// StealStats is steal over the run: the mean and worst tick of the
// aggregate, and the worst tick of any single CPU.
type StealStats struct {
	Mean   *float64 `json:"mean"`
	Max    *float64 `json:"max"`
	MaxCPU *float64 `json:"max_cpu"`
}

// CleanLatency are latency percentiles over the requests that lived
// entirely in clean ticks: an estimate of what the code does on a quiet host.
type CleanLatency struct {
	P50      *float64 `json:"p50"`
	P95      *float64 `json:"p95"`
	P99      *float64 `json:"p99"`
	Requests int      `json:"requests"`
	// By says which requests: CleanByRequests (those that overlapped no
	// outside wait, where the probe measured them) or CleanByTicks
	// (those that lived in clean ticks only, the fallback).
	By string `json:"by,omitempty"`
}

// What CleanLatency is over.
const (
	CleanByRequests = "requests"
	CleanByTicks    = "ticks"
)

// Goodput is how many requests met every per-request objective of the SLO
// (ttft, tpot, e2e), and the token throughput of those alone.
type Goodput struct {
	SLO           string   `json:"slo"`
	Met           int      `json:"met"`
	AttainmentPct *float64 `json:"attainment_pct"` // met / sent requests
	TokensPerS    *float64 `json:"tokens_per_s"`   // output tokens of the requests that met it / wall seconds
}

// Float returns a pointer to v, for the optional figures of a Summary.
func Float(v float64) *float64 { return &v }
