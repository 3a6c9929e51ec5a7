-- wrk script for bench/ (python -m bench). Every request, the /healthz baseline's included, is
-- built by request(), so wrk spends about the same per request on every endpoint.
--
--   wrk ... -s bench/bench.lua http://127.0.0.1:PORT -- <endpoint> <users> <password> <nonce> <pat file>
--
-- User i (1..users) was seeded by bench/common.py: e-mail user<i>@bench.test, token
-- bench-token-<i> on client client-<i>, administrator of account i; for pat_profile, a
-- personal access token on line i of <pat file>.

local endpoint, users, password, nonce
local personal_tokens = {}
local counter = 0
local next_thread_id = 0

function setup(thread)
  next_thread_id = next_thread_id + 1
  thread:set("thread_id", next_thread_id)
end

function init(args)
  endpoint, users, password, nonce = args[1], tonumber(args[2]), args[3], args[4]
  if endpoint == "pat_profile" then
    for line in io.lines(args[5]) do personal_tokens[#personal_tokens + 1] = line end
  end
  math.randomseed(tonumber(nonce, 16) + thread_id)
  math.random(); math.random()
end

local function signed_in(i, json)
  local headers = {
    ["access-token"] = "bench-token-" .. i,
    ["client"] = "client-" .. i,
    ["uid"] = "user" .. i .. "@bench.test",
  }
  if json then headers["Content-Type"] = "application/json" end
  return headers
end

local build = {
  healthz = function()
    return wrk.format("GET", "/healthz", {})
  end,
  get_profile = function(i)
    return wrk.format("GET", "/api/v1/profile", signed_in(i))
  end,
  pat_profile = function(i)
    return wrk.format("GET", "/api/v1/profile", {["Authorization"] = "Bearer " .. personal_tokens[i]})
  end,
  put_profile = function(i)
    return wrk.format("PUT", "/api/v1/profile", signed_in(i, true),
                      '{"profile":{"ui_settings":{"k":' .. counter .. '}}}')
  end,
  get_account = function(i)
    return wrk.format("GET", "/api/v1/accounts/" .. i, signed_in(i))
  end,
  cache_keys = function(i)
    return wrk.format("GET", "/api/v1/accounts/" .. i .. "/cache_keys", signed_in(i))
  end,
  validate_token = function(i)
    return wrk.format("GET", "/auth/validate_token", signed_in(i))
  end,
  sign_in = function(i)
    return wrk.format("POST", "/auth/sign_in", {["Content-Type"] = "application/json"},
                      '{"email":"user' .. i .. '@bench.test","password":"' .. password .. '"}')
  end,
  sso_sign_in = function()
    -- The counter-th token of this thread (bench/common.py seed_sso_tokens), whose user
    -- is fixed by the counter; each token signs in once.
    local user = ((counter - 1) % users) + 1
    return wrk.format("POST", "/auth/sign_in", {["Content-Type"] = "application/json"},
                      '{"email":"user' .. user .. '@bench.test","password":"",' ..
                      '"sso_auth_token":"bench-sso-' .. nonce .. '-' .. thread_id .. '-' ..
                      counter .. '"}')
  end,
  sign_up = function()
    -- Unique per request: the run's nonce, the thread and its counter.
    local email = "signup-" .. nonce .. "-" .. thread_id .. "-" .. counter .. "-" ..
                  math.random(1000000) .. "@bench.test"
    return wrk.format("POST", "/api/v1/accounts", {["Content-Type"] = "application/json"},
                      '{"account_name":"Bench signup","email":"' .. email ..
                      '","user_full_name":"Bench Signup","password":"' .. password .. '"}')
  end,
}

function request()
  counter = counter + 1
  return build[endpoint](math.random(users))
end

-- One machine-readable line for bench/common.py; latencies in microseconds.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50":%.0f,"p90":%.0f,"p99":%.0f,"max":%.0f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
