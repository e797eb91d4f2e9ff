-- A/B runs (tare ab): each its tare.ab/v1 result (JSON tare.AB) as it was
-- printed, which names its trials' runs (pairs[].a.run_id, …); the columns
-- beside it are what tare runs list filters and sorts on. Times as runs'.
CREATE TABLE ab_runs (
	pk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text   NOT NULL UNIQUE,
	label      text   NOT NULL DEFAULT '',
	target_a   text   NOT NULL DEFAULT '',
	target_b   text   NOT NULL DEFAULT '',
	started_at bigint NOT NULL,
	ab         text   NOT NULL
);

CREATE INDEX ab_runs_by_started ON ab_runs (started_at DESC, id DESC);
