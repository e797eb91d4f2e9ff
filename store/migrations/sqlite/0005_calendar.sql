-- The hosts' calendars (tare check --every, --record): one row per short
-- sample of a host with no load of tare's own, keyed by host, so that the
-- hosts of a team share one store. Its figures are a tick's, over the
-- sample (percent; NULL: not measured); top_others is JSON
-- ([]tare.ProcessShare), the busiest other processes by name.
CREATE TABLE calendar_samples (
	pk             INTEGER PRIMARY KEY,
	host           TEXT    NOT NULL,
	start_ns       INTEGER NOT NULL,
	end_ns         INTEGER NOT NULL,
	level          TEXT    NOT NULL,
	interference   REAL,
	steal          REAL,
	neighbours     REAL,
	busy           REAL,
	psi_some       REAL,
	throttled      REAL,
	run_delay      REAL,
	polluted_ticks REAL,
	ticks          INTEGER NOT NULL,
	cost_cpu_ms    REAL,
	top_others     TEXT    NOT NULL DEFAULT '[]'
);

-- A history reads one host's samples of the last days, in time order.
CREATE INDEX calendar_samples_by_host ON calendar_samples (host, start_ns);

-- The windows each protocol chose from a host's calendar (windows: auto),
-- with their evidence (JSON []tare.WindowChoice): chosen once, the first
-- time the protocol needs them, and kept, so that its runs and the lines
-- of tare protocol cron agree on them whatever the calendar learns later.
CREATE TABLE protocol_windows (
	protocol  TEXT PRIMARY KEY,
	chosen_at INTEGER NOT NULL,
	chosen    TEXT NOT NULL
);
