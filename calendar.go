package tare

import (
	"context"
	"time"
)

// CalendarSchema names the version of the Calendar JSON contract (`tare
// check history --json`).
const CalendarSchema = "tare.calendar/v1"

// CalendarSample is one short sample of a host with no load of tare's own
// (`tare check --every`, or `--record`), as the host's calendar keeps it:
// the check's figures over its ticks, its verdict, and the busiest other
// processes by name. Shares are percent; a figure that was not measured is
// nil, never 0.
type CalendarSample struct {
	Host  string    `json:"host"` // the host's name: TARE_HOSTNAME (a pod's node), else the kernel's
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Level Level     `json:"level"` // the check's verdict

	// InterferencePct is the CPU a test would not have had: steal plus
	// the neighbours' CPU (other processes and unattributed busy time), in
	// percent of all the host's CPU time; nil when whose CPU it was could
	// not be measured.
	InterferencePct  *float64 `json:"interference_pct"`
	StealPct         *float64 `json:"steal_pct"`
	NeighboursPct    *float64 `json:"neighbours_pct"` // other processes and unattributed busy time, % of the host's CPU time
	BusyPct          *float64 `json:"busy_pct"`       // the guest's own busy time, tare's sampling included
	PSISomePct       *float64 `json:"psi_some_pct"`
	ThrottledPct     *float64 `json:"throttled_pct"` // of tare's cgroup
	RunDelayPct      *float64 `json:"run_delay_pct"` // of tare's threads
	PollutedTicksPct *float64 `json:"polluted_ticks_pct"`
	// TopOthers are the busiest other processes of the sample, busiest
	// first (TopOthersKept at most), in percent of the host's CPU time.
	TopOthers []ProcessShare `json:"top_others"`
	Ticks     int            `json:"ticks"`
	// CostCPUMS is the CPU time tare itself spent on the sample, storing
	// it included; nil when it was not measured.
	CostCPUMS *float64 `json:"cost_cpu_ms"`
}

// CalendarFilter selects calendar samples: one host's, starting in
// [Since, Until). A zero Since or Until does not bound.
type CalendarFilter struct {
	Host  string
	Since time.Time
	Until time.Time
}

// CalendarHost is one host of a store's calendars.
type CalendarHost struct {
	Host    string    `json:"host"`
	Samples int       `json:"samples"`
	First   time.Time `json:"first"` // the start of its first sample
	Last    time.Time `json:"last"`
}

// CalendarStore keeps the calendars of hosts, each its samples, keyed by
// host, so several hosts share one store.
type CalendarStore interface {
	// AddCalendarSample stores one sample of a host's calendar. A sample
	// with no host, or that ends before it starts, is an *Error with code
	// EINVALID.
	AddCalendarSample(ctx context.Context, s CalendarSample) error
	// FindCalendarSamples returns the samples of the filter's host, in the
	// order they started. A filter without a host is EINVALID.
	FindCalendarSamples(ctx context.Context, f CalendarFilter) ([]CalendarSample, error)
	// FindCalendarHosts lists the hosts that have samples, by name.
	FindCalendarHosts(ctx context.Context) ([]CalendarHost, error)
	// KeepWindowChoice stores the windows a protocol chose from a
	// calendar, unless it has stored some already, and returns the ones
	// stored: a protocol's windows are chosen once.
	KeepWindowChoice(ctx context.Context, protocol string, chosen []WindowChoice) ([]WindowChoice, error)
	// FindWindowChoice returns the windows a protocol chose from a
	// calendar; nil when it has chosen none.
	FindWindowChoice(ctx context.Context, protocol string) ([]WindowChoice, error)
}

// Calendar is a host's interference by the hour of the day (`tare check
// history --json`): per hour, the figures of its samples with their spread
// and count, the busiest neighbours by name, and the quietest and busiest
// hours with how sure that is. Like Summary, keys may be added, never
// renamed; a figure that could not be computed is nil (JSON null).
type Calendar struct {
	Schema string    `json:"schema"`
	Host   string    `json:"host"`
	TZ     string    `json:"tz"`   // the zone its hours are in
	From   time.Time `json:"from"` // the span read
	To     time.Time `json:"to"`
	// DaysAsked is the span read, in days (--days); Days, how many
	// calendar days in it have samples.
	DaysAsked int `json:"days_asked"`
	Days      int `json:"days"`
	Samples   int `json:"samples"`
	// MinDays is how many days of samples an hour needs before the
	// hours are ranked; Enough says whether the calendar has them.
	MinDays int  `json:"min_days"`
	Enough  bool `json:"enough"`
	// Hours are the 24 hours of the day, from 0; an hour without a sample
	// has samples 0 and null figures.
	Hours []CalendarHour `json:"hours"`
	// Quietest and Busiest are the hours of least and most interference;
	// nil when there are too few days to tell (Enough is false).
	Quietest *HourRank `json:"quietest"`
	Busiest  *HourRank `json:"busiest"`
	// HourEffectP is the p-value of the hour of the day making no
	// difference: a permutation test that shuffles each day's hours among
	// themselves (see package calendar); below 0.05 the hours differ
	// beyond day-to-day chance. Nil when there are too few days to tell.
	HourEffectP *float64 `json:"hour_effect_p"`
	// Weekdays are the hours split by the day of the week, once every
	// weekday has been seen on two dates at least; nil before.
	Weekdays []CalendarWeekday `json:"weekdays"`
	// Cells are the hours of each day: the heatmap, day by hour.
	Cells []CalendarCell `json:"cells"`
	// Cost is what keeping the calendar costs, measured: nil when the
	// samples did not measure tare's own CPU.
	Cost *CalendarCost `json:"cost"`
	// Findings say what the calendar shows, in words: the quietest and
	// busiest hours and how sure, or that there are too few days to tell.
	Findings []string `json:"findings"`
	Warnings []string `json:"warnings,omitempty"`
	// OtherHosts are the other hosts with a calendar in the same store.
	OtherHosts []CalendarHost `json:"other_hosts,omitempty"`
}

// Spread is a figure over samples: its mean and its 10th and 90th
// percentiles; all nil when no sample measured it.
type Spread struct {
	Mean *float64 `json:"mean"`
	P10  *float64 `json:"p10"`
	P90  *float64 `json:"p90"`
}

// CalendarHour is one hour of the day over every day read.
type CalendarHour struct {
	Hour    int `json:"hour"` // 0 to 23, in the calendar's zone
	Samples int `json:"samples"`
	Days    int `json:"days"` // the days it was sampled on
	// InterferencePct spreads over the hour's samples; DailyPct is the
	// mean of its daily means, what the hours are ranked by (a day of
	// many samples weighs no more than a day of few).
	InterferencePct  Spread        `json:"interference_pct"`
	DailyPct         *float64      `json:"daily_mean_pct"`
	StealPct         Spread        `json:"steal_pct"`
	NeighboursPct    Spread        `json:"neighbours_pct"`
	BusyPct          Spread        `json:"busy_pct"`
	PSISomePct       Spread        `json:"psi_some_pct"`
	ThrottledPct     Spread        `json:"throttled_pct"`
	RunDelayPct      Spread        `json:"run_delay_pct"`
	PollutedTicksPct Spread        `json:"polluted_ticks_pct"`
	Levels           map[Level]int `json:"levels"`     // the samples' verdicts, counted
	Neighbours       []NamedCPU    `json:"neighbours"` // the busiest other processes of the hour, by name
}

// NamedCPU is a neighbour of an hour by name (its command, or its
// container): its mean share of the host's CPU time over the hour's
// samples, and in how many of them it was among the busiest.
type NamedCPU struct {
	Name    string  `json:"name"`
	CPUPct  float64 `json:"cpu_pct"`
	Samples int     `json:"samples"`
}

// HourRank is the quietest (or busiest) hour of a calendar and how sure
// that is, from a bootstrap over the days: the days are resampled with
// replacement and the hours ranked again each time.
type HourRank struct {
	Hour  int     `json:"hour"`
	Mean  float64 `json:"interference_pct"` // the mean of its daily means
	Low   float64 `json:"low_pct"`          // the 95 % interval of that mean
	High  float64 `json:"high_pct"`
	Sure  float64 `json:"sure_pct"`      // % of resamples in which it came out quietest (busiest)
	Ranks [2]int  `json:"rank_interval"` // 95 % of resamples rank it between these (1: quietest, or busiest)
	// Also are the other hours that came out quietest (busiest) in at
	// least 5 % of the resamples, most often first.
	Also   []HourShare `json:"also,omitempty"`
	Detail string      `json:"detail"`
}

// HourShare is an hour and a percentage.
type HourShare struct {
	Hour int     `json:"hour"`
	Pct  float64 `json:"pct"`
}

// CalendarWeekday is one day of the week over every date of it read.
type CalendarWeekday struct {
	Weekday         string     `json:"weekday"` // "Monday"
	Days            int        `json:"days"`    // dates of it with samples
	Samples         int        `json:"samples"`
	InterferencePct *float64   `json:"interference_pct"`
	Hours           []*float64 `json:"hours"` // 24 means of interference; null where no sample
}

// CalendarCell is one hour of one day: a cell of the heatmap.
type CalendarCell struct {
	Date            string   `json:"date"` // 2006-01-02, in the calendar's zone
	Hour            int      `json:"hour"`
	Samples         int      `json:"samples"`
	InterferencePct *float64 `json:"interference_pct"`
}

// CalendarCost is what the calendar's samples cost tare, measured.
type CalendarCost struct {
	CPUMSPerSample float64 `json:"cpu_ms_per_sample"` // the mean
	SamplesPerDay  float64 `json:"samples_per_day"`   // from the samples' median spacing
	CPUSPerDay     float64 `json:"cpu_s_per_day"`
	// CPUPct is that as a share of one CPU.
	CPUPct float64 `json:"cpu_pct"`
}

// The choices of a window made from a host's calendar (a plan's windows:
// auto, or offpeak: quietest).
const (
	ChoiceQuietest = "quietest"
	ChoiceBusiest  = "busiest"
	ChoiceTypical  = "typical"
)

// WindowChoice is a protocol window chosen from a host's calendar, with
// the evidence: what the calendar predicts of it, and how sure.
type WindowChoice struct {
	Window string `json:"window"` // peak, offpeak or mid
	Choice string `json:"choice"` // quietest, busiest or typical
	From   string `json:"from"`   // 02:00, in the plan's zone
	To     string `json:"to"`
	Host   string `json:"host"`
	// Predicted is the window's interference, the mean of its daily means
	// over the calendar, with the 95 % interval of that mean.
	Predicted float64 `json:"predicted_pct"`
	Low       float64 `json:"low_pct"`
	High      float64 `json:"high_pct"`
	// DayLow and DayHigh bound the window's interference on 8 days in 10
	// (the 10th and 90th percentiles of its daily means): what one day's
	// run may meet.
	DayLow  float64 `json:"day_p10_pct"`
	DayHigh float64 `json:"day_p90_pct"`
	// Sure is the share of resamples of the days in which this window
	// (or one overlapping it) came out the quietest (busiest; for the
	// typical window, nearest the median).
	Sure         float64   `json:"sure_pct"`
	Days         int       `json:"days"`
	Samples      int       `json:"samples"`
	CalendarFrom time.Time `json:"calendar_from"`
	CalendarTo   time.Time `json:"calendar_to"`
	Detail       string    `json:"detail"`
}

// WindowCheck says whether a window chosen from the calendar was, when
// measured, as quiet (or busy) as the calendar predicted.
type WindowCheck struct {
	WindowChoice
	// Measured is the interference measured during the window's run
	// (steal plus the neighbours' CPU, as the calendar's); nil when the
	// run did not measure it.
	Measured *float64 `json:"measured_pct"`
	// AsPredicted: a quietest window no busier than its days' 90th
	// percentile, a busiest one no quieter than their 10th, a typical one
	// between; nil when not measured.
	AsPredicted *bool  `json:"as_predicted"`
	Verdict     string `json:"verdict"` // in words
}

// Interference is the CPU a test would not have had over a window with no
// load of its own, or beside its load: steal plus the neighbours' CPU, in
// percent of all the host's CPU time; nil when whose CPU it was was not
// measured.
func (h *HostSummary) Interference() *float64 {
	if h.CPUBy == nil {
		return nil
	}
	return Float(h.CPUBy.Steal + h.CPUBy.Neighbours())
}
