-- +goose Up
CREATE TABLE feature_flags (
    key         TEXT PRIMARY KEY,
    enabled     INTEGER NOT NULL DEFAULT 0,
    rollout_pct INTEGER NOT NULL DEFAULT 0 CHECK (rollout_pct BETWEEN 0 AND 100),
    owner       TEXT NOT NULL,
    remove_by   TEXT,
    description TEXT NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE feature_flags;
