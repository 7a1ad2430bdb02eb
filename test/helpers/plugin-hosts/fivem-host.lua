-- TEST CODE, never shipped: a small emulation of the FiveM server API that docs/plugins/fivem/reward-queue uses,
-- written from FiveM's documentation (PerformHttpRequest, ExecuteCommand, GetPlayers, GetPlayerName,
-- GetPlayerIdentifiers, GetConvar, LoadResourceFile/SaveResourceFile, AddEventHandler, Citizen.CreateThread/Wait,
-- SetTimeout, the json library), so the resource runs under lua5.4 exactly as written.
-- Run: lua5.4 fivem-host.lua <resource dir> <server.cfg>
--
-- Time is virtual: nothing happens until the test says so on stdin, one line at a time, and every line is answered
-- "READY <seconds>" once everything it caused (threads due, HTTP requests and their callbacks) is done:
--   join <name> <SteamID64>   a player joins (playerJoining)     leave <name>   a player drops (playerDropped)
--   advance <seconds>         the clock moves on, running the threads due on the way
-- What the resource does is printed: "COMMAND <command>" for ExecuteCommand, "REQUEST <method> <path>" for each HTTP
-- request (never its query: the key stays out of the output), "LOG <text>" for print. PerformHttpRequest is curl.
-- HOST_EXIT_BEFORE_PATH: the process dies (exit 137) just before the first request to that path.
io.stdout:setvbuf('line')

local resourceDir, cfgPath = arg[1], arg[2]
local resourceName = resourceDir:match('([^/]+)/*$')
local exitBeforePath = os.getenv('HOST_EXIT_BEFORE_PATH')

local function emit(line)
  io.stdout:write(line, '\n')
end

-- json, as FiveM's scripting runtime provides it ---------------------------------------------------------------
json = {}

local function encodeString(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
    return named[c] or ('\\u%04x'):format(c:byte())
  end) .. '"'
end

function json.encode(value)
  local kind = type(value)
  if value == nil then return 'null' end
  if kind == 'boolean' then return tostring(value) end
  if kind == 'number' then return math.type(value) == 'integer' and tostring(value) or ('%.17g'):format(value) end
  if kind == 'string' then return encodeString(value) end
  if kind == 'table' then
    if next(value) == nil or #value > 0 then
      local parts = {}
      for _, v in ipairs(value) do parts[#parts + 1] = json.encode(v) end
      return '[' .. table.concat(parts, ',') .. ']'
    end
    local parts = {}
    for k, v in pairs(value) do parts[#parts + 1] = encodeString(tostring(k)) .. ':' .. json.encode(v) end
    return '{' .. table.concat(parts, ',') .. '}'
  end
  error('cannot encode a ' .. kind)
end

function json.decode(text)
  local at = 1
  local function space() at = text:find('[^ \t\r\n]', at) or #text + 1 end
  local value
  local function str()
    local out = {}
    at = at + 1
    while true do
      local c = text:sub(at, at)
      if c == '' then error('unterminated string') end
      if c == '"' then at = at + 1; return table.concat(out) end
      if c == '\\' then
        local e = text:sub(at + 1, at + 1)
        if e == 'u' then
          out[#out + 1] = utf8.char(tonumber(text:sub(at + 2, at + 5), 16))
          at = at + 6
        else
          out[#out + 1] = ({ n = '\n', t = '\t', r = '\r', b = '\b', f = '\f' })[e] or e
          at = at + 2
        end
      else
        out[#out + 1] = c
        at = at + 1
      end
    end
  end
  function value()
    space()
    local c = text:sub(at, at)
    if c == '{' then
      local obj = {}
      at = at + 1
      space()
      if text:sub(at, at) == '}' then at = at + 1; return obj end
      while true do
        space()
        local key = str()
        space()
        if text:sub(at, at) ~= ':' then error('expected :') end
        at = at + 1
        obj[key] = value()
        space()
        local sep = text:sub(at, at)
        at = at + 1
        if sep == '}' then return obj end
        if sep ~= ',' then error('expected , or }') end
      end
    elseif c == '[' then
      local list = {}
      at = at + 1
      space()
      if text:sub(at, at) == ']' then at = at + 1; return list end
      while true do
        list[#list + 1] = value()
        space()
        local sep = text:sub(at, at)
        at = at + 1
        if sep == ']' then return list end
        if sep ~= ',' then error('expected , or ]') end
      end
    elseif c == '"' then
      return str()
    elseif text:sub(at, at + 3) == 'true' then at = at + 4; return true
    elseif text:sub(at, at + 4) == 'false' then at = at + 5; return false
    elseif text:sub(at, at + 3) == 'null' then at = at + 4; return nil
    end
    local number = text:match('^-?%d+%.?%d*[eE]?[+-]?%d*', at)
    if not number or number == '' then error('unexpected character at ' .. at) end
    at = at + #number
    return math.tointeger(tonumber(number)) or tonumber(number)
  end
  local result = value()
  space()
  if at <= #text then error('text after the JSON value') end
  return result
end

-- The scheduler: threads (coroutines) due at a virtual time, in the order they were made ---------------------------
local nowMs = 0
local threads = {}
local pendingRequests = {}
local sequence = 0

local function schedule(fn, atMs)
  sequence = sequence + 1
  threads[#threads + 1] = { co = coroutine.create(fn), at = atMs, seq = sequence }
end

Citizen = {}
function Citizen.CreateThread(fn) schedule(fn, nowMs) end
function Citizen.Wait(ms) coroutine.yield(ms) end
function Citizen.SetTimeout(ms, fn) schedule(fn, nowMs + ms) end
CreateThread, Wait, SetTimeout = Citizen.CreateThread, Citizen.Wait, Citizen.SetTimeout

-- Server natives ---------------------------------------------------------------------------------------------------
local convars = {}
for line in io.lines(cfgPath) do
  local name, value = line:match('^%s*set[rs]?%s+([%w_]+)%s+"(.-)"%s*$')
  if not name then name, value = line:match('^%s*set[rs]?%s+([%w_]+)%s+(%S+)%s*$') end
  if name then convars[name] = value end
end

function GetConvar(name, default) return convars[name] or default end
function GetConvarInt(name, default) return math.tointeger(tonumber(convars[name])) or default end
function GetCurrentResourceName() return resourceName end

function LoadResourceFile(resource, file)
  local f = io.open(resourceDir .. '/' .. file, 'rb')
  if not f then return nil end
  local text = f:read('a')
  f:close()
  return text
end

function SaveResourceFile(resource, file, data, length)
  -- Written whole and renamed into place, as a crash mid-write must not lose the file.
  local path = resourceDir .. '/' .. file
  local f = assert(io.open(path .. '.tmp', 'wb'))
  f:write(length and length >= 0 and data:sub(1, length) or data)
  f:close()
  assert(os.rename(path .. '.tmp', path))
  return true
end

function ExecuteCommand(command) emit('COMMAND ' .. command) end

local players = {}
local nextPlayerId = 1

function GetPlayers()
  local ids = {}
  for _, p in ipairs(players) do ids[#ids + 1] = tostring(p.id) end
  return ids
end

local function playerOf(src)
  for _, p in ipairs(players) do
    if tostring(p.id) == tostring(src) then return p end
  end
  return nil
end

function GetPlayerName(src)
  local p = playerOf(src)
  return p and p.name or nil
end

function GetPlayerIdentifiers(src)
  local p = playerOf(src)
  if not p then return {} end
  return { ('steam:%x'):format(math.tointeger(tonumber(p.steam))), 'license:' .. ('%040x'):format(p.id), 'ip:127.0.0.1' }
end

local handlers = {}
function AddEventHandler(name, fn) handlers[name] = handlers[name] or {}; table.insert(handlers[name], fn) end
function RegisterNetEvent(name) end

local function trigger(name, src, ...)
  for _, fn in ipairs(handlers[name] or {}) do
    local args = table.pack(...)
    schedule(function()
      source = src
      fn(table.unpack(args, 1, args.n))
    end, nowMs)
  end
end

local function shellQuote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

function PerformHttpRequest(url, callback, method, data, headers)
  pendingRequests[#pendingRequests + 1] = { url = url, callback = callback, method = method or 'GET', data = data or '', headers = headers or {} }
end

local function perform(request)
  local path = request.url:match('^https?://[^/]+([^?]*)') or ''
  if exitBeforePath and exitBeforePath ~= '' and path == exitBeforePath then
    emit('KILLED before ' .. request.method .. ' ' .. path)
    os.exit(137)
  end
  emit('REQUEST ' .. request.method .. ' ' .. path)
  local bodyFile, outFile = os.tmpname(), os.tmpname()
  local f = assert(io.open(bodyFile, 'wb'))
  f:write(request.data)
  f:close()
  local args = { 'curl', '-s', '-X', request.method, '-o', shellQuote(outFile), '-w', "'%{http_code}'", '--max-time', '30' }
  for k, v in pairs(request.headers) do args[#args + 1] = '-H ' .. shellQuote(k .. ': ' .. v) end
  if request.method ~= 'GET' then args[#args + 1] = '--data-binary @' .. shellQuote(bodyFile) end
  args[#args + 1] = shellQuote(request.url)
  local pipe = assert(io.popen(table.concat(args, ' ')))
  local status = tonumber(pipe:read('a')) or 0
  pipe:close()
  local out = io.open(outFile, 'rb')
  local body = out and out:read('a') or ''
  if out then out:close() end
  os.remove(bodyFile)
  os.remove(outFile)
  schedule(function() request.callback(status, body, {}, status == 0 and 'no answer' or nil) end, nowMs)
end

-- Runs everything due up to `untilMs`: HTTP requests first (their callbacks become threads due now), then threads.
local function runUntil(untilMs)
  while true do
    while #pendingRequests > 0 do perform(table.remove(pendingRequests, 1)) end
    local due, dueIndex = nil, nil
    for i, t in ipairs(threads) do
      if t.at <= untilMs and (due == nil or t.at < due.at or (t.at == due.at and t.seq < due.seq)) then due, dueIndex = t, i end
    end
    if not due then break end
    if due.at > nowMs then nowMs = due.at end
    local ok, waitMs = coroutine.resume(due.co)
    if not ok then
      emit('LOG error: ' .. tostring(waitMs))
      table.remove(threads, dueIndex)
    elseif coroutine.status(due.co) == 'dead' then
      table.remove(threads, dueIndex)
    else
      sequence = sequence + 1
      due.at, due.seq = nowMs + (waitMs or 0), sequence
    end
  end
  nowMs = math.max(nowMs, untilMs)
end

print = function(...)
  local parts = table.pack(...)
  for i = 1, parts.n do parts[i] = tostring(parts[i]) end
  emit('LOG ' .. table.concat(parts, ' ', 1, parts.n):gsub('%^%d', ''))
end

-- Load the resource as FiveM does: its fxmanifest.lua names the server scripts ----------------------------------------
local serverScripts = {}
local manifest = setmetatable({
  server_script = function(file) serverScripts[#serverScripts + 1] = file end,
  server_scripts = function(files) for _, file in ipairs(files) do serverScripts[#serverScripts + 1] = file end end,
}, { __index = function() return function() end end })
assert(loadfile(resourceDir .. '/fxmanifest.lua', 't', manifest))()
for _, file in ipairs(serverScripts) do
  schedule(assert(loadfile(resourceDir .. '/' .. file)), nowMs)
end
runUntil(nowMs)
emit('READY ' .. nowMs // 1000)

for line in io.lines() do
  local command, a, b = line:match('^(%S+)%s*(%S*)%s*(%S*)')
  if command == 'join' then
    local player = { id = nextPlayerId, name = a, steam = b }
    nextPlayerId = nextPlayerId + 1
    players[#players + 1] = player
    trigger('playerJoining', player.id, tostring(player.id))
    runUntil(nowMs)
  elseif command == 'leave' then
    for i, p in ipairs(players) do
      if p.name == a then
        table.remove(players, i)
        trigger('playerDropped', p.id, 'Exiting')
        break
      end
    end
    runUntil(nowMs)
  elseif command == 'advance' then
    runUntil(nowMs + math.floor(tonumber(a) * 1000))
  end
  emit('READY ' .. nowMs // 1000)
end
