-- name: grant_app_role
-- manage.py migrate --app-role, as the migration role (migration 0019, SPEC 3.4).
SELECT grant_app_role(%(role)s::regrole);
