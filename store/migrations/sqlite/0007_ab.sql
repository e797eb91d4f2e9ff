-- A/B runs (tare ab): each its tare.ab/v1 result (JSON tare.AB) as it was
-- printed, which names its trials' runs (pairs[].a.run_id, …); the columns
-- beside it are what tare runs list filters and sorts on. Times as runs'.
CREATE TABLE ab_runs (
	pk         INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE,
	label      TEXT    NOT NULL DEFAULT '',
	target_a   TEXT    NOT NULL DEFAULT '',
	target_b   TEXT    NOT NULL DEFAULT '',
	started_at INTEGER NOT NULL,
	ab         TEXT    NOT NULL
);

CREATE INDEX ab_runs_by_started ON ab_runs (started_at DESC, id DESC);
