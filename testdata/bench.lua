-- bench.lua — makes LuaJIT compile thousands of traces.
--
-- Every round loads a fresh chunk of Lua source (so nothing is shared between
-- rounds) whose loops get hot and are compiled into traces; each compiled
-- trace makes LuaJIT switch its machine-code area RW → RX again, so the
-- program does tens of thousands of mprotect calls a second.
-- Usage: luajit bench.lua [ROUNDS]   (default 10000); prints one checksum.
local rounds = tonumber(arg and arg[1]) or 10000
local sum = 0
for r = 1, rounds do
  local src = string.format([[
    local k = %d
    local acc = 0
    for i = 1, 200 do acc = acc + (i * k) %% 7 end
    local t = {}
    for i = 1, 120 do t[i] = i + k end
    for i = 1, 120 do acc = acc + t[i] %% 5 end
    return acc
  ]], r)
  local f = assert(loadstring(src))
  sum = (sum + f()) % 1000000007
end
print(string.format("%d rounds, checksum %d", rounds, sum))
