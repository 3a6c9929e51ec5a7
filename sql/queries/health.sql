-- name: applied_migrations
SELECT version FROM schema_migrations;

-- name: ping
SELECT 1 AS ok;
