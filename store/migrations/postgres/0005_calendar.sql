-- The hosts' calendars (tare check --every, --record): one row per short
-- sample of a host with no load of tare's own, keyed by host, so that the
-- hosts of a team share one store. Its figures are a tick's, over the
-- sample (percent; NULL: not measured); top_others is JSON
-- ([]tare.ProcessShare), the busiest other processes by name.
CREATE TABLE calendar_samples (
	pk             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	host           text    NOT NULL,
	start_ns       bigint  NOT NULL,
	end_ns         bigint  NOT NULL,
	level          text    NOT NULL,
	interference   double precision,
	steal          double precision,
	neighbours     double precision,
	busy           double precision,
	psi_some       double precision,
	throttled      double precision,
	run_delay      double precision,
	polluted_ticks double precision,
	ticks          integer NOT NULL,
	cost_cpu_ms    double precision,
	top_others     jsonb   NOT NULL DEFAULT '[]'
);

-- A history reads one host's samples of the last days, in time order.
CREATE INDEX calendar_samples_by_host ON calendar_samples (host, start_ns);

-- The windows each protocol chose from a host's calendar (windows: auto),
-- with their evidence (JSON []tare.WindowChoice): chosen once, the first
-- time the protocol needs them, and kept, so that its runs and the lines
-- of tare protocol cron agree on them whatever the calendar learns later.
CREATE TABLE protocol_windows (
	protocol  text PRIMARY KEY,
	chosen_at bigint NOT NULL,
	chosen    text NOT NULL
);
