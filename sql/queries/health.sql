-- name: applied_migrations
SELECT version FROM schema_migrations;
