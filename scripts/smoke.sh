#!/usr/bin/env bash
# scripts/smoke.sh BASE_URL: walk the main flows of a running Frontdesk with curl.
#
#   scripts/smoke.sh https://frontdesk.example.com            # through nginx
#   scripts/smoke.sh http://127.0.0.1:8000              # gunicorn alone (scripts/run)
#
# It signs up a new user (a unique address), checks the five token headers, reads and
# updates the profile (name, a ui_settings key), uploads a small PNG avatar and fetches it
# back from BASE_URL (an image, with X-Content-Type-Options: nosniff), deletes it, sets
# availability (busy) and auto_offline (false), reads the account and renames it as its
# administrator, reads the cache keys (and their Cache-Control), stamps update_active_at,
# then checks that a wrong current_password is a 422, no credentials a 401, another
# account's id a 404, and that after sign-out the token is a 401.
# Each step prints one line. On an unexpected answer it prints the failing step, the
# status and the body, and exits 1 (2 for bad usage). Needs bash, curl and python3.
#
# Environment (all optional):
#   SMOKE_EMAIL_DOMAIN=example.com  domain of the sign-up address; its confirmation
#                                   e-mail is queued like any other
#   SMOKE_SKIP_AVATAR_FETCH=1       skip fetching the avatar file (it is skipped anyway when
#                                   gunicorn answers directly: nginx serves AVATAR_DIR)
#   SMOKE_MAX_TIME=10               seconds allowed per request
#
# Each run leaves a user and an account behind (there is no delete endpoint), and uses
# one sign-up of the 5 per client address per 30 minutes that RATE_LIMITS=on allows.
set -euo pipefail

if [ $# -ne 1 ] || [[ $1 != http://* && $1 != https://* ]]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit 2
fi
base=${1%/}
domain=${SMOKE_EMAIL_DOMAIN:-example.com}
if [[ ! $domain =~ ^[A-Za-z0-9.-]+$ ]]; then
  echo "SMOKE_EMAIL_DOMAIN must be a domain name, not '$domain'" >&2
  exit 2
fi
max_time=${SMOKE_MAX_TIME:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step=start
status=
fail() {
  {
    echo "FAIL $step: $1"
    if [ -s "$tmp/curl_error" ]; then sed 's/^/  curl: /' "$tmp/curl_error"; fi
    if [ -s "$tmp/body" ]; then echo "  body: $(head -c 2000 "$tmp/body")"; fi
  } >&2
  exit 1
}
say() { echo "ok   $*"; }

# call STEP EXPECTED_STATUS METHOD PATH [curl options...]: one request. The body goes to
# $tmp/body and the headers to $tmp/headers; any other status, or no answer, fails.
call() {
  step=$1
  local expected=$2 method=$3 url=$4
  shift 4
  if [[ $url == /* ]]; then url=$base$url; fi
  rm -f "$tmp/body" "$tmp/headers"
  # Expect: off, so that no "100 Continue" block comes before the real headers.
  status=$(curl -sS --max-time "$max_time" -X "$method" -H 'Expect:' -o "$tmp/body" -D "$tmp/headers" \
    -w '%{http_code}' "$@" "$url" 2>"$tmp/curl_error") || true
  if [ "$status" != "$expected" ]; then fail "expected HTTP $expected, got HTTP ${status:-000}"; fi
}

# py EXPR: a Python expression over the last answer (d: the JSON body or None; h: the
# headers, lower-case names; env: the exported variables below), printed.
py() {
  python3 - "$tmp" "$1" <<'PY'
import json, os, sys, time
tmp, expr = sys.argv[1:]
env = os.environ
h = {}
with open(f'{tmp}/headers', encoding='latin-1') as f:
    for line in f.read().replace('\r', '').strip().split('\n\n')[-1].split('\n')[1:]:
        name, _, value = line.partition(':')
        h[name.strip().lower()] = value.strip()
try:
    with open(f'{tmp}/body', encoding='utf-8') as f:
        d = json.load(f)
except (OSError, ValueError):
    d = None

def membership():
    return next(a for a in d['accounts'] if a['id'] == int(env['account_id']))

try:
    value = eval(expr)
except Exception as ex:
    sys.exit(f'  cannot evaluate {expr}: {type(ex).__name__} {ex}')
print(value if isinstance(value, str) else json.dumps(value))
PY
}
# get NAME EXPR: set and export $NAME from the last answer.
get() {
  local value
  value=$(py "$2") || fail "HTTP $status, but no $2 in the answer"
  printf -v "$1" '%s' "$value"
  export "${1?}"
}
# check EXPR: the last answer must make EXPR true.
check() { [ "$(py "bool($1)")" = true ] || fail "HTTP $status, but not $1"; }

json=(-H 'Content-Type: application/json')
stamp="$(date +%s)-$$-$RANDOM"
export stamp
export email="smoke-$stamp@$domain"
password="smoke $stamp passphrase"

call sign-up 200 POST /api/v1/accounts "${json[@]}" -d "{\"account_name\": \"Smoke test $stamp\",
  \"email\": \"$email\", \"user_full_name\": \"Smoke Tester\", \"password\": \"$password\"}"
get user_id 'd["data"]["id"]'
get account_id 'd["data"]["account_id"]'
check 'd["data"]["email"] == env["email"] and d["data"]["role"] == "administrator"'
say "sign-up: user $user_id, account $account_id, $email"

step='five headers'
get token 'h["access-token"]'
get client 'h["client"]'
check 'h["token-type"] == "Bearer" and h["uid"] == env["email"] and int(h["expiry"]) > time.time()'
auth=(-H "access-token: $token" -H "client: $client" -H "uid: $email")
say "five headers: access-token, token-type Bearer, client, expiry in the future, uid"

call 'profile read' 200 GET /api/v1/profile "${auth[@]}"
check 'd["id"] == int(env["user_id"]) and d["email"] == env["email"] and d["account_id"] == int(env["account_id"])'
check 'h["access-token"] == env["token"] and h["client"] == env["client"] and h["uid"] == env["email"]'
say "profile read: $email, token headers echoed"

call 'profile update' 200 PUT /api/v1/profile "${auth[@]}" "${json[@]}" \
  -d "{\"profile\": {\"name\": \"Smoke Tester $stamp\", \"ui_settings\": {\"smoke_check\": \"$stamp\"}}}"
check 'd["name"] == "Smoke Tester " + env["stamp"] and d["ui_settings"].get("smoke_check") == env["stamp"]'
say "profile update: name and ui_settings.smoke_check returned as sent"

# An 8x8 PNG from the standard library alone (no Pillow on the client side).
python3 - "$tmp/avatar.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
rows = b''.join(b'\0' + b'\x33\x66\x99' * 8 for _ in range(8))
with open(sys.argv[1], 'wb') as f:
    f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 8, 8, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b''))
PY
call 'avatar upload' 200 PUT /api/v1/profile "${auth[@]}" -F "profile[avatar]=@$tmp/avatar.png;type=image/png"
get avatar_url 'd["avatar_url"]'
check 'env["avatar_url"] != ""'
say "avatar upload: $avatar_url"
server=$(py 'h.get("server", "")')

if [ "${SMOKE_SKIP_AVATAR_FETCH:-0}" = 1 ]; then
  echo "skip avatar fetch: SMOKE_SKIP_AVATAR_FETCH=1"
elif [ "$server" = gunicorn ]; then
  # Nothing in front of gunicorn (scripts/run alone): nginx is what serves AVATAR_DIR.
  echo "skip avatar fetch: no proxy in front (Server: gunicorn); nginx serves the avatar files"
elif [[ $avatar_url != /* ]]; then
  echo "skip avatar fetch: $avatar_url is not under $base"
else
  call 'avatar fetch' 200 GET "$avatar_url"
  check 'h.get("content-type", "").startswith("image/") and h.get("x-content-type-options") == "nosniff"'
  say "avatar fetch: $(py 'h["content-type"]'), nosniff, $(wc -c <"$tmp/body") bytes"
fi

call 'avatar delete' 200 DELETE /api/v1/profile/avatar "${auth[@]}"
check 'd["avatar_url"] == ""'
say 'avatar delete: avatar_url ""'

call availability 200 POST /api/v1/profile/availability "${auth[@]}" "${json[@]}" \
  -d "{\"profile\": {\"availability\": \"busy\", \"account_id\": $account_id}}"
check 'membership()["availability"] == "busy"'
say "availability: busy in account $account_id"

call auto_offline 200 POST /api/v1/profile/auto_offline "${auth[@]}" "${json[@]}" \
  -d "{\"profile\": {\"auto_offline\": false, \"account_id\": $account_id}}"
check 'membership()["auto_offline"] is False and membership()["availability_status"] == "busy"'
say 'auto_offline: false, availability_status busy'

call 'account read' 200 GET "/api/v1/accounts/$account_id" "${auth[@]}"
check 'd["id"] == int(env["account_id"]) and d["name"] == "Smoke test " + env["stamp"]'
say "account read: $(py 'd["name"]')"

call 'account update' 200 PATCH "/api/v1/accounts/$account_id" "${auth[@]}" "${json[@]}" \
  -d "{\"name\": \"Smoke test $stamp renamed\"}"
check 'd["name"] == "Smoke test " + env["stamp"] + " renamed"'
say "account update: renamed by its administrator"

call 'cache keys' 200 GET "/api/v1/accounts/$account_id/cache_keys" "${auth[@]}"
check 'sorted(d["cache_keys"]) == ["inbox", "label", "team"]'
check 'h.get("cache-control") == "max-age=10, private, stale-while-revalidate=300"'
say "cache keys: label, inbox, team; Cache-Control: $(py 'h["cache-control"]')"

call update_active_at 200 POST "/api/v1/accounts/$account_id/update_active_at" "${auth[@]}"
check 'd == {}'
say 'update_active_at: {}'

call 'wrong current_password' 422 PUT /api/v1/profile "${auth[@]}" "${json[@]}" -d '{"profile":
  {"current_password": "not the password", "password": "another passphrase", "password_confirmation": "another passphrase"}}'
check 'd["message"] == "Invalid current password"'
say 'wrong current_password: 422 Invalid current password'

call 'no credentials' 401 GET /api/v1/profile
check 'd == {"errors": ["You need to sign in or sign up before continuing."]}'
say 'no credentials: 401'

# Not a member there: the same 404 whether that account exists or not, so ids cannot be probed.
other=$((account_id > 1 ? account_id - 1 : account_id + 1))
call "another account's id" 404 GET "/api/v1/accounts/$other" "${auth[@]}"
check 'd == {"error": "Resource could not be found"}'
call "another account's id" 404 POST /api/v1/profile/availability "${auth[@]}" "${json[@]}" \
  -d "{\"profile\": {\"availability\": \"offline\", \"account_id\": $other}}"
say "another account's id: 404 for account $other and for availability there"

call sign-out 200 DELETE /auth/sign_out "${auth[@]}"
check 'd == {"success": True}'
call 'token after sign-out' 401 GET /api/v1/profile "${auth[@]}"
say 'sign-out: the token is now a 401'

echo "smoke test passed against $base"
