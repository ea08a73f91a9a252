-- wrk script for bench/power_bench.py: POSTs each body of a file (one JSON pod a
-- line) exactly once, then ends wrk, which otherwise runs for all of its -d.
--
--   wrk -tC -cC -d300s -H 'Authorization: Bearer T' -H 'Content-Type: application/json' \
--       -s bench/wrk_create.lua https://HOST:PORT/api/v1/namespaces/NS/pods -- BODIES C DONE
--
-- One connection per thread (-t and -c equal, C): thread i sends bodies i, i+C,
-- i+2C, ... one after another on its connection. Each thread prints one line
-- `wrk_create {"thread":i,"sent":N,"answered":N,"codes":{"201":N}}` when its part
-- is answered, and appends a byte to the file DONE; the thread that makes it C
-- bytes long ends wrk.

local ffi = require("ffi")
ffi.cdef([[
int kill(int pid, int sig);
int getpid(void);
]])

local counter = 0

-- Runs in wrk's main Lua state once per thread, before that thread's init().
function setup(thread)
  thread:set("index", counter)
  counter = counter + 1
end

local requests = {}
local sent, answered = 0, 0
local codes = {}
local threads, done_file

function init(args)
  threads, done_file = tonumber(args[2]), args[3]
  local n = 0
  for line in io.lines(args[1]) do
    if #line > 0 then
      if n % threads == index then
        -- Formatted here, so that the timed part only hands out strings.
        requests[#requests + 1] = wrk.format("POST", nil, nil, line)
      end
      n = n + 1
    end
  end
end

-- wrk calls request() again, for the same request, when the TLS write could not
-- start yet (it read nothing back in between): a new body only after an answer.
function request()
  if answered == sent then
    sent = sent + 1
  end
  return requests[sent]
end

local function finish()
  local parts = {}
  for code, count in pairs(codes) do
    parts[#parts + 1] = string.format('"%d":%d', code, count)
  end
  io.write(string.format('wrk_create {"thread":%d,"sent":%d,"answered":%d,"codes":{%s}}\n',
                         index, sent, answered, table.concat(parts, ",")))
  io.flush()
  wrk.thread:stop()
  local f = io.open(done_file, "a")
  f:write("x")
  f:close()
  f = io.open(done_file, "r")
  local finished = f:seek("end")
  f:close()
  if finished >= threads then
    -- wrk's main thread sleeps for all of -d; SIGINT (its stop handler) wakes it
    -- now, so the process ends with the last answer.
    ffi.C.kill(ffi.C.getpid(), 2)
  end
end

function response(status, headers, body)
  answered = answered + 1
  codes[status] = (codes[status] or 0) + 1
  if answered == #requests then
    finish()
  end
end
