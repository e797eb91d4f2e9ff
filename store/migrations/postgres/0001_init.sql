-- tare store, version 1 (PostgreSQL).
-- Times are int64 nanoseconds since the Unix epoch; NULL is "no such instant".
-- Child rows reference runs.pk, a bigint, so a million results do not repeat
-- a 36-byte run id. There are no foreign keys: the store deletes children
-- itself, and a per-row trigger would halve the COPY rate.

CREATE TABLE runs (
	pk           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text   NOT NULL UNIQUE,
	label        text   NOT NULL DEFAULT '',
	window_name  text   NOT NULL DEFAULT '',
	target       text   NOT NULL DEFAULT '',
	arrival      text   NOT NULL DEFAULT '',
	protocol     text   NOT NULL DEFAULT '',
	version      text   NOT NULL DEFAULT '',
	config       jsonb  NOT NULL DEFAULT '{}',
	env          jsonb  NOT NULL DEFAULT '{}',
	status       text   NOT NULL,
	started_at   bigint NOT NULL,
	ended_at     bigint,
	heartbeat_at bigint NOT NULL,
	owner        text   NOT NULL DEFAULT '',
	summary      jsonb
);

CREATE INDEX runs_by_started  ON runs (started_at DESC, id DESC);
CREATE INDEX runs_by_label    ON runs (label, started_at DESC);
CREATE INDEX runs_by_protocol ON runs (protocol, started_at DESC);

CREATE TABLE ticks (
	run           bigint  NOT NULL,
	idx           integer NOT NULL,
	start_ns      bigint  NOT NULL,
	end_ns        bigint  NOT NULL,
	arrivals      integer NOT NULL,
	completions   integer NOT NULL,
	errors        integer NOT NULL,
	dropped       integer NOT NULL,
	in_flight     integer NOT NULL,
	p50_ns        bigint  NOT NULL,
	p95_ns        bigint  NOT NULL,
	p99_ns        bigint  NOT NULL,
	queue_depth   double precision,
	host_start_ns bigint,
	host_end_ns   bigint,
	steal         double precision,
	busy          double precision,
	max_cpu_steal double precision,
	psi_some      double precision,
	psi_full      double precision,
	throttled     double precision,
	run_delay     double precision,
	cpu           jsonb,
	per_cpu       jsonb,
	PRIMARY KEY (run, idx)
);

-- Zero values are stored as NULL: a NULL costs a bit in the row's null
-- bitmap, a zero bigint eight bytes.
CREATE TABLE results (
	run           bigint  NOT NULL,
	seq           bigint  NOT NULL,
	scheduled_ns  bigint,
	sent_ns       bigint,
	first_byte_ns bigint,
	done_ns       bigint,
	dropped       boolean NOT NULL,
	status        integer,
	err           text,
	bytes_in      bigint,
	bytes_out     bigint,
	started_ns    bigint,
	worker        text,
	deliveries    integer,
	output_tokens integer,
	token_source  text,
	PRIMARY KEY (run, seq)
);
