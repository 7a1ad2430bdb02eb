-- Reward Queue (FiveM, server side). Settings, in server.cfg (`set`, never `sets`: the key must stay private):
--   set reward_queue_url "https://list.example/api/rewards/queue"
--   set reward_queue_key "vck_..."                -- the claim key from the list's dashboard
--   set reward_queue_retry_seconds 60             -- wait after a failed request (optional)
--
-- Every `next_check` seconds the list asks for, it lists the server's pending entries, naming the players online
-- (online-only entries of the others wait until they join); runs each entry's commands in order with ExecuteCommand
-- and writes the entry's id to executed-ids.json (in this resource's folder) before anything else; then acknowledges
-- the ids it ran. An id already in executed-ids.json is acknowledged without running again: a server stopped between
-- running and acknowledging pays nothing twice. An id leaves the file once an acknowledgement answered it.

local QUEUE_URL = GetConvar('reward_queue_url', '')
local CLAIM_KEY = GetConvar('reward_queue_key', '')
local RETRY_SECONDS = GetConvarInt('reward_queue_retry_seconds', 60)
local RESOURCE = GetCurrentResourceName()
local EXECUTED_FILE = 'executed-ids.json'
-- Entries per list; a full page is followed by the next one at once.
local PAGE_SIZE = 50
-- The API takes at most 100 ids per acknowledgement.
local MAX_ACK_IDS = 100
-- Seconds after a player joins before their rewards are listed (joins close together share one list).
local JOIN_DELAY_SECONDS = 2

-- Ids run and not yet acknowledged (a set), kept on disk so a restart never runs them again.
local executed = {}
local secondsUntilCheck = 0
local busy = false

local function log(text)
  print(('[reward-queue] %s'):format(text))
end

local function loadExecuted()
  local text = LoadResourceFile(RESOURCE, EXECUTED_FILE)
  if text == nil or text == '' then return end
  local ok, ids = pcall(json.decode, text)
  if not ok or type(ids) ~= 'table' then
    -- Failure policy: fail closed - an unreadable file is reported and the resource pays nothing until it is fixed.
    error(('%s is not a JSON list of ids; fix or delete it (deleting may pay entries run before again)'):format(EXECUTED_FILE))
  end
  for _, id in ipairs(ids) do executed[id] = true end
end

local function saveExecuted()
  local ids = {}
  for id in pairs(executed) do ids[#ids + 1] = id end
  table.sort(ids)
  SaveResourceFile(RESOURCE, EXECUTED_FILE, json.encode(ids), -1)
end

local function urlencode(text)
  return (tostring(text):gsub('[^%w%-%._~]', function(c) return ('%%%02X'):format(c:byte()) end))
end

local function finish(seconds)
  secondsUntilCheck = seconds - 1
  busy = false
end

-- An entry's player is online when a connected player has their Steam or Discord identifier, or their name.
local function isOnline(player)
  if type(player) ~= 'table' then return false end
  local steam = nil
  if type(player.steam_id) == 'string' and player.steam_id:match('^%d+$') then
    steam = ('steam:%x'):format(math.tointeger(tonumber(player.steam_id)))
  end
  local discord = type(player.discord_id) == 'string' and ('discord:' .. player.discord_id) or nil
  local name = type(player.name) == 'string' and player.name:lower() or nil
  for _, src in ipairs(GetPlayers()) do
    for _, identifier in ipairs(GetPlayerIdentifiers(src)) do
      if identifier == steam or identifier == discord then return true end
    end
    if name ~= nil and (GetPlayerName(src) or ''):lower() == name then return true end
  end
  return false
end

-- Runs the entries not run before, recording each id first; returns every id to acknowledge.
local function runEntries(entries)
  local toAck = {}
  for _, entry in ipairs(entries) do
    local id = type(entry) == 'table' and entry.id or nil
    if type(id) == 'string' then
      if executed[id] then
        -- Run before a restart or a lost acknowledgement: acknowledge only.
        toAck[#toAck + 1] = id
      elseif not entry.online_only or isOnline(entry.player) then
        for _, command in ipairs(entry.commands or {}) do ExecuteCommand(command) end
        executed[id] = true
        saveExecuted()
        toAck[#toAck + 1] = id
      end
    end
  end
  return toAck
end

local function acknowledge(ids, nextCheck)
  if #ids == 0 then return finish(nextCheck) end
  local batch, rest = {}, {}
  for i, id in ipairs(ids) do
    if i <= MAX_ACK_IDS then batch[#batch + 1] = id else rest[#rest + 1] = id end
  end
  PerformHttpRequest(QUEUE_URL .. '/ack?key=' .. urlencode(CLAIM_KEY), function(status, body)
    if status ~= 200 then
      -- Failure policy: retry later - the ids stay in executed-ids.json, so the next list acknowledges them without running them.
      log(('the acknowledgement answered %s; the entries run are kept and acknowledged later'):format(tostring(status)))
      return finish(RETRY_SECONDS)
    end
    local ok, answer = pcall(json.decode, body)
    if ok and type(answer) == 'table' then
      for _, id in ipairs(answer.acked or {}) do executed[id] = nil end
      for _, id in ipairs(answer.unknown or {}) do executed[id] = nil end
      saveExecuted()
    else
      -- Failure policy: keep the ids - an unreadable answer acknowledges nothing we know of; the next list tells again.
      log('the acknowledgement\'s answer is not JSON; the entries run are kept')
    end
    if #rest > 0 then acknowledge(rest, nextCheck) else finish(nextCheck) end
  end, 'POST', json.encode({ ids = batch }), { ['Content-Type'] = 'application/json' })
end

local function listQueue()
  busy = true
  local names = {}
  for _, src in ipairs(GetPlayers()) do names[#names + 1] = urlencode(GetPlayerName(src) or '') end
  local url = ('%s?key=%s&limit=%d&online=%s'):format(QUEUE_URL, urlencode(CLAIM_KEY), PAGE_SIZE, table.concat(names, ','))
  PerformHttpRequest(url, function(status, body)
    if status ~= 200 then
      -- Failure policy: retry later - an unanswered or refused list runs nothing; the entries stay queued.
      log(('the reward queue answered %s; listing again in %d s'):format(tostring(status), RETRY_SECONDS))
      return finish(RETRY_SECONDS)
    end
    local ok, page = pcall(json.decode, body)
    if not ok or type(page) ~= 'table' or type(page.entries) ~= 'table' then
      -- Failure policy: retry later - an answer we cannot read runs nothing.
      log(('the reward queue\'s answer is not JSON; listing again in %d s'):format(RETRY_SECONDS))
      return finish(RETRY_SECONDS)
    end
    local toAck = runEntries(page.entries)
    local nextCheck = math.max(5, math.tointeger(tonumber(page.next_check) or RETRY_SECONDS) or RETRY_SECONDS)
    -- A full page that ran something may have more behind it: list again at once.
    if #page.entries >= PAGE_SIZE and #toAck > 0 then nextCheck = 1 end
    acknowledge(toAck, nextCheck)
  end, 'GET', '', {})
end

-- A player joining: list soon, so their online-only rewards are paid while they play.
AddEventHandler('playerJoining', function()
  if secondsUntilCheck > JOIN_DELAY_SECONDS then secondsUntilCheck = JOIN_DELAY_SECONDS end
end)

Citizen.CreateThread(function()
  if QUEUE_URL == '' or CLAIM_KEY == '' then
    log('set reward_queue_url and reward_queue_key in server.cfg (the claim key from the list\'s dashboard), then restart the resource')
    return
  end
  loadExecuted()
  while true do
    if not busy then
      if secondsUntilCheck <= 0 then listQueue() else secondsUntilCheck = secondsUntilCheck - 1 end
    end
    Citizen.Wait(1000)
  end
end)
