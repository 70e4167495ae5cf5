-- strings.lua — makes LuaJIT compile many small, string-heavy traces:
-- the other shape of bench.lua's (few loops over numbers per chunk).
--
-- Every round loads a fresh chunk (nothing is shared between rounds)
-- with several short loops over strings (concatenation, string.byte,
-- string.sub, gsub-free formatting), each hot enough to become a trace of
-- its own, and side exits that become side traces: many small traces, each
-- making LuaJIT switch its machine-code area RW → RX again.
-- Usage: luajit strings.lua [ROUNDS]   (default 5000); prints one checksum.
local rounds = tonumber(arg and arg[1]) or 5000
local sum = 0
for r = 1, rounds do
  local src = string.format([[
    local k = %d
    local s = "k" .. k
    local acc = 0
    for i = 1, 60 do s = s .. string.char(97 + (i + k) %% 26) end
    for i = 1, #s do acc = acc + s:byte(i) end
    for i = 1, 60 do
      local c = s:sub(i, i)
      if c == "a" or c == "e" then acc = acc + 3 else acc = acc + 1 end
    end
    local parts = {}
    for i = 1, 60 do parts[#parts + 1] = tostring(i * k %% 97) end
    local joined = table.concat(parts, ",")
    for i = 1, #joined, 7 do acc = acc + joined:byte(i) end
    return acc
  ]], r)
  local f = assert(loadstring(src))
  sum = (sum + f()) % 1000000007
end
print(string.format("%d rounds, checksum %d", rounds, sum))
