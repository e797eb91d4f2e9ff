-- tare store, version 1 (SQLite).
-- Times are int64 nanoseconds since the Unix epoch; NULL is "no such instant".
-- JSON columns hold text. Child rows reference runs.pk, an integer, so a
-- million results do not repeat a 36-byte run id.

CREATE TABLE runs (
	pk           INTEGER PRIMARY KEY,
	id           TEXT    NOT NULL UNIQUE,
	label        TEXT    NOT NULL DEFAULT '',
	window_name  TEXT    NOT NULL DEFAULT '',
	target       TEXT    NOT NULL DEFAULT '',
	arrival      TEXT    NOT NULL DEFAULT '',
	protocol     TEXT    NOT NULL DEFAULT '',
	version      TEXT    NOT NULL DEFAULT '',
	config       TEXT    NOT NULL DEFAULT '{}',
	env          TEXT    NOT NULL DEFAULT '{}',
	status       TEXT    NOT NULL,
	started_at   INTEGER NOT NULL,
	ended_at     INTEGER,
	heartbeat_at INTEGER NOT NULL,
	owner        TEXT    NOT NULL DEFAULT '',
	summary      TEXT
);

CREATE INDEX runs_by_started  ON runs (started_at DESC, id DESC);
CREATE INDEX runs_by_label    ON runs (label, started_at DESC);
CREATE INDEX runs_by_protocol ON runs (protocol, started_at DESC);

CREATE TABLE ticks (
	run           INTEGER NOT NULL,
	idx           INTEGER NOT NULL,
	start_ns      INTEGER NOT NULL,
	end_ns        INTEGER NOT NULL,
	arrivals      INTEGER NOT NULL,
	completions   INTEGER NOT NULL,
	errors        INTEGER NOT NULL,
	dropped       INTEGER NOT NULL,
	in_flight     INTEGER NOT NULL,
	p50_ns        INTEGER NOT NULL,
	p95_ns        INTEGER NOT NULL,
	p99_ns        INTEGER NOT NULL,
	queue_depth   REAL,
	host_start_ns INTEGER,
	host_end_ns   INTEGER,
	steal         REAL,
	busy          REAL,
	max_cpu_steal REAL,
	psi_some      REAL,
	psi_full      REAL,
	throttled     REAL,
	run_delay     REAL,
	cpu           TEXT,
	per_cpu       TEXT,
	PRIMARY KEY (run, idx)
);

-- WITHOUT ROWID: the rows live in the (run, seq) b-tree itself, which is
-- both the streaming order and the only index.
CREATE TABLE results (
	run           INTEGER NOT NULL,
	seq           INTEGER NOT NULL,
	scheduled_ns  INTEGER,
	sent_ns       INTEGER,
	first_byte_ns INTEGER,
	done_ns       INTEGER,
	dropped       INTEGER NOT NULL,
	status        INTEGER,
	err           TEXT,
	bytes_in      INTEGER,
	bytes_out     INTEGER,
	started_ns    INTEGER,
	worker        TEXT,
	deliveries    INTEGER,
	output_tokens INTEGER,
	token_source  TEXT,
	PRIMARY KEY (run, seq)
) WITHOUT ROWID;

-- store_meta takes the write probe made at every open, so an unwritable
-- store fails before any load is sent.
CREATE TABLE store_meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
