----------------------------------------------------------------------------------------------
-- The runtime: everything below knows the protocol's wire types (integers, strings, arrays,
-- maps, offsets, the Osiris chunk, Publish's messages), framing over TCP, request/response
-- pairing and the preferences. What each command carries is in MESSAGES above.
-- Bad input never raises: a layout that does not fit is a DecodeError, shown as expert info.
----------------------------------------------------------------------------------------------

proto.prefs.ports = Pref.range("TCP ports", SETTINGS.ports,
    "TCP ports of RabbitMQ Stream servers (other ports: the heuristic finds the protocol)", 65535)
proto.prefs.max_frame = Pref.uint("Largest frame", SETTINGS.max_frame,
    "A size field above this (bytes) is taken as garbage, not as a frame")
proto.prefs.show_secrets = Pref.bool("Show SASL passwords", false,
    "Show the password of SASL PLAIN authentication (hidden by default)")
proto.prefs.check_crc = Pref.bool("Check chunk CRCs", true,
    "Compute the CRC-32 of each delivered chunk's data and compare it with its header")

-- Expert infos: name, text, group, severity.
local EXPERT, expert_list = {}, {}
for _, e in ipairs({
    {"malformed", "Malformed frame", "MALFORMED", "ERROR"},
    {"truncated", "Frame cut short in the capture", "MALFORMED", "WARN"},
    {"unknown", "Command or version not in the protocol table", "UNDECODED", "WARN"},
    {"not_a_frame", "Not a frame start", "MALFORMED", "ERROR"},
    {"bad_entry", "Chunk entry does not fit", "MALFORMED", "WARN"},
    {"bad_crc", "Chunk CRC does not match its data", "CHECKSUM", "WARN"},
    {"error_code", "Response code other than OK", "RESPONSE_CODE", "NOTE"},
    {"duplicate_id", "Correlation id reused while still unanswered", "SEQUENCE", "WARN"},
    {"orphan_response", "Response to no request in the capture", "SEQUENCE", "NOTE"},
}) do
    EXPERT[e[1]] = ProtoExpert.new(PROTOCOL .. ".expert." .. e[1], e[2], expert.group[e[3]],
        expert.severity[e[4]])
    expert_list[#expert_list + 1] = EXPERT[e[1]]
end
proto.experts = expert_list

local OK = 1
-- bit32 is Lua 5.2's (Wireshark up to 4.2); a Wireshark on Lua 5.3 or later may lack it but
-- has operators, which Lua 5.2 cannot parse: hence the string.
local bits = bit32 or load([[return {
    band = function(a, b) return a & b end,
    bxor = function(a, b) return (a ~ b) & 0xFFFFFFFF end,
    rshift = function(a, n) return (a & 0xFFFFFFFF) >> n end,
    bnot = function(a) return ~a & 0xFFFFFFFF end,
}]])()

----------------------------------------------------------------------------------------------
-- Reading: ctx = {tvb, pos, stop (end of the captured bytes of the frame), truncated, last}

local DecodeError = {}

local function fail(reason, at, short)
    error(setmetatable({reason = reason, at = at, short = short or false}, DecodeError), 0)
end

local function need(ctx, n, what)
    local left = ctx.stop - ctx.pos
    if n > left then
        fail(string.format("%s: needs %d bytes, %d left", what, n, left), ctx.pos, true)
    end
end

local function integer(range, width, signed)
    if width == 8 then
        if signed then return range:int64() end
        return range:uint64()
    end
    if signed then return range:int() end
    return range:uint()
end

local function ms_date(ms)
    local n = type(ms) == "number" and ms or ms:tonumber()
    if n ~= n or math.abs(n) > 1e14 then return "" end  -- (NaN, or past the year 5000)
    local seconds = math.floor(n / 1000)
    local date = os.date("!%Y-%m-%d %H:%M:%S", seconds)
    if type(date) ~= "string" then return "" end
    return string.format(" (%s.%03d UTC)", date, math.floor(n - seconds * 1000))
end

-- A text item over no bytes, to be given children and a length later.
local function subtree(ctx, tree, text)
    return tree:add(ctx.tvb(ctx.pos, 0), text)
end

local function generated(tree, field, value)
    local item = tree:add(field, value)
    item:set_generated()
    return item
end

local R = {}

local function read(ctx, d, tree, index)
    return R[d.kind](ctx, d, tree, index)
end

function R.int(ctx, d, tree)
    need(ctx, d.width, "integer field")
    local range = ctx.tvb(ctx.pos, d.width)
    local value = integer(range, d.width, d.signed)
    local shown = value
    if d.as64 == "uint" then shown = UInt64.new(value) elseif d.as64 == "int" then shown = Int64.new(value) end
    local item = tree:add(F[d.field], range, shown)
    if d.ms_time then item:append_text(ms_date(value)) end
    ctx.pos = ctx.pos + d.width
    return value
end

-- A length-prefixed value: int16 (strings) or int32 (bytes) length, -1 for null.
local function prefixed(ctx, d, tree, width, what)
    local start = ctx.pos
    need(ctx, width, what .. " length")
    local n = ctx.tvb(start, width):int()
    ctx.pos = start + width
    if n == -1 then
        tree:add(ctx.tvb(start, width), d.label .. ": (null)")
        return nil
    elseif n < 0 then
        fail(string.format("%s: negative length %d", what, n), start)
    end
    need(ctx, n, what)
    ctx.pos = ctx.pos + n
    return start + width, n
end

function R.string(ctx, d, tree)
    local start = ctx.pos
    local at, n = prefixed(ctx, d, tree, 2, "string")
    if at == nil then return nil end
    local value = n > 0 and ctx.tvb(at, n):string(ENC_UTF_8) or ""
    tree:add(F[d.field], ctx.tvb(start, ctx.pos - start), value)
    return value
end

-- SASL PLAIN is `authzid NUL authcid NUL password` (RFC 4616).
local function plain_parts(raw)
    local first = raw:find("\0", 1, true)
    if first == nil then return nil end
    local second = raw:find("\0", first + 1, true)
    if second == nil then return nil end
    return raw:sub(1, first - 1), raw:sub(first + 1, second - 1), second
end

-- The SASL response: PLAIN keeps its user names and hides its password, other mechanisms
-- are hidden whole (EXTERNAL carries no secret), unless the preference shows them.
local function secret(ctx, d, tree, at, n)
    local raw = n > 0 and ctx.tvb:raw(at, n) or ""
    local mechanism = ctx.values.mechanism
    local authzid, authcid, cut
    if mechanism == "PLAIN" then authzid, authcid, cut = plain_parts(raw) end
    if proto.prefs.show_secrets or mechanism == "EXTERNAL" then
        tree:add(F[d.field], ctx.tvb(at, n))
    elseif cut ~= nil then
        local item = tree:add(F[d.field], ctx.tvb(at, cut))
        item:set_text(d.label .. ": " .. tostring(ctx.tvb(at, cut):bytes()) .. " *** (password hidden)")
        item:add(ctx.tvb(at, 0), "Authorization identity: " .. authzid)
        item:add(ctx.tvb(at + cut, 0), "Password: *** (hidden; see the Show SASL passwords preference)")
    else
        tree:add(ctx.tvb(at, 0), d.label .. ": *** (hidden: it may hold credentials)")
    end
    return {username = authcid}
end

function R.bytes(ctx, d, tree)
    local at, n = prefixed(ctx, d, tree, 4, "bytes")
    if at == nil then return nil end
    if d.secret then return secret(ctx, d, tree, at, n) end
    tree:add(F[d.field], ctx.tvb(at, n))
    return {length = n}
end

-- An int32 element count, checked against the bytes left before anything is shown.
local function count(ctx, min_size, what)
    local at = ctx.pos
    need(ctx, 4, what .. " count")
    local n = ctx.tvb(at, 4):int()
    if n < 0 then fail(string.format("%s: negative count %d", what, n), at) end
    ctx.pos = at + 4
    local left = ctx.stop - ctx.pos
    if n * min_size > left then
        fail(string.format("%s: count %d cannot fit in %d bytes", what, n, left), at, true)
    end
    return n
end

function R.array(ctx, d, tree)
    local start = ctx.pos
    local n = count(ctx, d.min_size, "array")
    local item = tree:add(F[d.field], ctx.tvb(start, 4), n)
    local values = {}
    for i = 1, n do values[i] = read(ctx, d.element, item, i) end
    item:set_len(ctx.pos - start)
    return values
end

function R.struct(ctx, d, tree, index)
    local start = ctx.pos
    local item = subtree(ctx, tree, index and (d.label .. " " .. index) or d.label)
    local value = {}
    for _, member in ipairs(d.members) do
        value[member.name] = read(ctx, member.type, item)
        ctx.last = value[member.name]
    end
    item:set_len(ctx.pos - start)
    return value
end

local NULL_KEY = {}

function R.map(ctx, d, tree)
    local start = ctx.pos
    local n = count(ctx, d.pair_size, "map")
    local item = tree:add(F[d.field], ctx.tvb(start, 4), n)
    local pairs_read, seen = {}, {}
    for i = 1, n do
        local at = ctx.pos
        local pair = subtree(ctx, item, "")
        local key = read(ctx, d.key, pair)
        local value = read(ctx, d.value, pair)
        pair:set_len(ctx.pos - at)
        pair:set_text(tostring(key) .. ": " .. tostring(value))
        local seen_key = key == nil and NULL_KEY or tostring(key)
        if seen[seen_key] then fail("map: repeated key " .. tostring(key), at) end
        seen[seen_key] = true
        pairs_read[i] = {key, value}
    end
    item:set_len(ctx.pos - start)
    return pairs_read
end

-- A last field the sender leaves out when empty.
function R.trailing(ctx, d, tree)
    if ctx.pos == ctx.stop then return nil end
    local at = ctx.pos
    local value = read(ctx, d.inner, tree)
    if value == nil then fail("null in an optional trailing field", at) end
    return value
end

-- The value after an offset type (the field before it): a u64 offset for type 4, an int64
-- timestamp (ms) for type 5, nothing for the others; `carry_last`: 8 bytes that end the frame
-- are read whatever the type (a client that always writes them).
function R.offset(ctx, d, tree)
    local offset_type = ctx.last
    local carries = offset_type == 4 or offset_type == 5
    if not carries and (not d.carry_last or ctx.pos == ctx.stop) then return nil end
    need(ctx, 8, "offset")
    local range = ctx.tvb(ctx.pos, 8)
    local value
    if offset_type == 5 then
        value = range:int64()
        tree:add(F[d.timestamp], range, value):append_text(ms_date(value))
    else
        value = range:uint64()
        tree:add(F[d.field], range, value)
    end
    ctx.pos = ctx.pos + 8
    return value
end

-- The 48-byte Osiris chunk header, with the checks the codec makes of it.
function R.chunk_header(ctx, d, tree)
    local start = ctx.pos
    need(ctx, d.size, "chunk header")
    local item = tree:add(F[d.field], ctx.tvb(start, d.size))
    local header, pos = {}, start
    for _, m in ipairs(d.members) do
        local range = ctx.tvb(pos, m.width)
        local value = integer(range, m.width, m.signed)
        local sub = item:add(F[m.field], range, value)
        if m.ms_time then sub:append_text(ms_date(value)) end
        header[m.name] = value
        pos = pos + m.width
    end
    ctx.pos = pos
    if bits.rshift(header.magic_version, 4) ~= SETTINGS.chunk_magic then
        fail(string.format("bad chunk magic 0x%02x", header.magic_version), start)
    end
    if header.num_entries * SETTINGS.min_entry_size > header.data_length then
        fail(string.format("chunk header claims %d entries in %d bytes of data",
            header.num_entries, header.data_length), start + 2)
    end
    if header.num_records > header.num_entries * SETTINGS.max_sub_batch_records then
        fail(string.format("chunk header claims %d records in %d entries", header.num_records,
            header.num_entries), start + 4)
    end
    item:append_text(string.format(": first offset %s, %d entries, %d records",
        tostring(header.chunk_id), header.num_entries, header.num_records))
    return header
end

-- One entry (a simple entry or a sub-batch; the same in Publish messages and in chunks):
-- its layout, or nil and why it does not fit between pos and stop.
local function entry_at(tvb, pos, stop)
    if stop - pos < 4 then return nil, "entry header cut short" end
    local first = tvb(pos, 1):uint()
    if bits.band(first, 0x80) == 0 then
        local size = tvb(pos, 4):uint()
        if size > stop - pos - 4 then
            return nil, string.format("entry size %d exceeds the %d bytes left", size, stop - pos - 4)
        end
        return {pos = pos, data = pos + 4, length = size, stop = pos + 4 + size, records = 1}
    end
    if stop - pos < 11 then return nil, "sub-batch header cut short" end
    local length = tvb(pos + 7, 4):uint()
    if length > stop - pos - 11 then
        return nil, string.format("sub-batch length %d exceeds the %d bytes left", length,
            stop - pos - 11)
    end
    return {pos = pos, sub_batch = true, compression = bits.rshift(bits.band(first, 0x70), 4),
        records = tvb(pos + 1, 2):uint(), data = pos + 11, length = length,
        stop = pos + 11 + length}
end

local function show_entry(tvb, tree, e, first_offset)
    local item = tree:add(tvb(e.pos, e.stop - e.pos), e.sub_batch and "Sub-batch" or "Entry")
    if first_offset ~= nil then
        generated(item, F[ENTRY.offset], first_offset)
        item:append_text(" at offset " .. tostring(first_offset))
    end
    if e.sub_batch then
        item:add(F[ENTRY.compression], tvb(e.pos, 1), e.compression)
        item:add(F[ENTRY.records], tvb(e.pos + 1, 2), e.records)
        item:add(F[ENTRY.uncompressed_length], tvb(e.pos + 3, 4))
        item:add(F[ENTRY.length], tvb(e.pos + 7, 4))
        item:append_text(string.format(", %d records", e.records))
    else
        item:add(F[ENTRY.size], tvb(e.pos, 4))
    end
    item:add(F[ENTRY.data], tvb(e.data, e.length))
    return item
end

-- CRC-32 (IEEE), as Osiris computes it over a chunk's data.
local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if bits.band(c, 1) == 1 then c = bits.bxor(0xEDB88320, bits.rshift(c, 1))
        else c = bits.rshift(c, 1) end
    end
    CRC_TABLE[i] = c
end

local function crc32(data)
    local c = 0xFFFFFFFF
    local band, bxor, rshift, byte = bits.band, bits.bxor, bits.rshift, string.byte
    for block = 1, #data, 4096 do
        local bytes = {byte(data, block, math.min(block + 4095, #data))}
        for i = 1, #bytes do
            c = bxor(CRC_TABLE[band(bxor(c, bytes[i]), 0xFF)], rshift(c, 8))
        end
    end
    return bxor(c, 0xFFFFFFFF)
end

-- The rest of the frame; after a chunk header it is the chunk: data entries, then a trailer.
function R.rest(ctx, d, tree)
    local start, n = ctx.pos, ctx.stop - ctx.pos
    local item = tree:add(F[d.field], ctx.tvb(start, n))
    ctx.pos = ctx.stop
    local chunk = ctx.last
    if type(chunk) ~= "table" or chunk.data_length == nil then return {} end
    if not ctx.truncated and n < chunk.data_length then
        fail("chunk data_length exceeds the frame", 0)
    end
    local stop = start + math.min(n, chunk.data_length)
    local pos, index = start, 0
    while pos < stop do
        local e, why = entry_at(ctx.tvb, pos, stop)
        if e == nil then
            if not ctx.truncated then
                item:add_proto_expert_info(EXPERT.bad_entry, why .. " (entry at byte " .. pos .. ")")
            end
            break
        end
        show_entry(ctx.tvb, item, e, chunk.chunk_id + index)
        pos, index = e.stop, index + e.records
    end
    if n > chunk.data_length then
        item:add(F[d.trailer], ctx.tvb(start + chunk.data_length, n - chunk.data_length))
    end
    local crc_ok
    if proto.prefs.check_crc and n >= chunk.data_length then
        local data = chunk.data_length > 0 and ctx.tvb:raw(start, chunk.data_length) or ""
        crc_ok = crc32(data) == chunk.crc
        if not crc_ok then item:add_proto_expert_info(EXPERT.bad_crc) end
    end
    return {crc_ok = crc_ok}
end

-- Publish's `count:i32` then messages: publishing id, a filter value (v2), an entry.
function R.publish_messages(ctx, d, tree)
    local tvb, start, version = ctx.tvb, ctx.pos, ctx.version
    if ctx.stop - start < 4 then fail("publish count cut short", start, true) end
    local n = tvb(start, 4):int()
    if n < 0 then fail("publish: negative message count " .. n, start) end
    ctx.pos = start + 4
    local per_message = version == 1 and 12 or 14
    if n * per_message > ctx.stop - ctx.pos then
        fail(string.format("publish: %d messages cannot fit", n), start, true)
    end
    local item = tree:add(F[d.field], tvb(start, 4), n)
    local records = 0
    for i = 1, n do
        local at = ctx.pos
        if ctx.stop - at < (version == 1 and 12 or 8) then
            fail("publish message cut short", at, true)
        end
        local message = subtree(ctx, item, "Message " .. i)
        local id = tvb(at, 8):uint64()
        message:add(F[d.publishing_id], tvb(at, 8), id)
        message:append_text(": publishing id " .. tostring(id))
        local pos = at + 8
        if version >= 2 then
            if ctx.stop - pos < 2 then fail("filter value length cut short", pos, true) end
            local length = tvb(pos, 2):int()
            if length < -1 then fail("filter value: negative length " .. length, pos) end
            local filter_end = pos + 2 + math.max(length, 0)
            if filter_end > ctx.stop then fail("filter value exceeds the frame", pos, true) end
            if length >= 0 then
                local text = length > 0 and tvb(pos + 2, length):string(ENC_UTF_8) or ""
                message:add(F[d.filter_value], tvb(pos, 2 + length), text)
            end
            pos = filter_end
        end
        local e, why = entry_at(tvb, pos, ctx.stop)
        if e == nil then fail(why, pos, true) end
        show_entry(tvb, message, e, nil)
        records = records + e.records
        ctx.pos = e.stop
        message:set_len(e.stop - at)
    end
    item:set_len(ctx.pos - start)
    return {records = records}
end

----------------------------------------------------------------------------------------------
-- Ports: the preference's range, for registration and for telling the server's side.

local port_ranges = {}
local registered = nil

local function parse_ranges(text)
    local ranges = {}
    for part in string.gmatch(tostring(text or ""), "[^,%s]+") do
        local low, high = part:match("^(%d+)%-(%d+)$")
        if low == nil then low = part:match("^(%d+)$"); high = low end
        if low ~= nil then ranges[#ranges + 1] = {tonumber(low), tonumber(high)} end
    end
    return ranges
end

local function is_server_port(port)
    for _, r in ipairs(port_ranges) do
        if port >= r[1] and port <= r[2] then return true end
    end
    return false
end

----------------------------------------------------------------------------------------------
-- Pairing, per TCP connection, as analysis.latency pairs: a request by (direction,
-- correlation id) answered from the other direction by the same command's response; Tune:
-- the server's offer answered by the client's Tune. Worked out on the first pass; every
-- pass shows it.
-- A connection is known by its two endpoints (addresses and ports), read from pinfo: a field
-- such as tcp.stream is not there on tshark's first pass (-2), which builds no tree, and
-- Wireshark 4.0's Lua has no conversation API. Every connection then gets its own pending
-- requests whatever the interleaving (clients open several at once, each with corr id 1..).

local conversations = {}
local links = {}
-- (frames_not_captured's walk of each direction's frame starts, below)
-- "stream:src>dst" -> {next_start = seq or false, seen_to = seq, frame = the last frame the
-- walk saw start: {name (nil: its key not captured), packet}}
local directions = {}
-- "packet:seq" of a cut segment, or of one not starting with a frame -> {at = its first frame
-- start's offset, "inside" or false, frame = the frame its first bytes continue} (what a later
-- pass, or a click on the packet, says again: the walk itself has gone past it)
local segment_starts = {}

function proto.init()
    conversations, links, directions, segment_starts = {}, {}, {}, {}
end

local function endpoint(address, port)
    return tostring(address) .. "|" .. tostring(port)
end

local function conversation(pinfo, message)
    local here, there = endpoint(pinfo.src, pinfo.src_port), endpoint(pinfo.dst, pinfo.dst_port)
    local id = here < there and (here .. " " .. there) or (there .. " " .. here)
    local conv = conversations[id]
    if conv == nil then
        conv = {pending = {}}
        conversations[id] = conv
    end
    if conv.server == nil then
        local src_server, dst_server = is_server_port(pinfo.src_port), is_server_port(pinfo.dst_port)
        if src_server ~= dst_server then
            conv.server = src_server and endpoint(pinfo.src, pinfo.src_port)
                or endpoint(pinfo.dst, pinfo.dst_port)
        elseif message ~= nil and message.sender == "server" then
            conv.server = endpoint(pinfo.src, pinfo.src_port)
        elseif message ~= nil then
            conv.server = endpoint(pinfo.dst, pinfo.dst_port)
        end
    end
    return conv
end

-- A packet's time, read without a tree (the first pass may build none): since the first
-- packet (exact to the nanosecond) and since the epoch (exact to a few hundred).
local function now(pinfo)
    return {rel = pinfo.rel_ts, abs = pinfo.abs_ts}
end

local function elapsed(from, to)
    local seconds = to.rel - from.rel
    if math.abs(seconds - (to.abs - from.abs)) > 1e-6 then  -- a time reference in between
        seconds = to.abs - from.abs
    end
    local whole = math.floor(seconds)
    local nanoseconds = math.floor((seconds - whole) * 1e9 + 0.5)
    if nanoseconds >= 1e9 then whole, nanoseconds = whole + 1, nanoseconds - 1e9 end
    return NSTime.new(whole, nanoseconds)
end

local function link(request, response_id, number, time)
    links[request.id].response_in = number
    links[response_id].response_to = request.number
    links[response_id].time = elapsed(request.time, time)
end

local function work_out_pairing(pinfo, conv, message, id, from_server, corr)
    local number, this = pinfo.number, {}
    links[id] = this
    local time = now(pinfo)
    if message.pairing == "offer" then
        if from_server then
            conv.offer = {id = id, number = number, time = time}
        else
            local offer = conv.offer
            conv.offer = nil
            if offer ~= nil then link(offer, id, number, time) else this.orphan = true end
        end
    elseif not message.response then
        local key = (from_server and "s" or "c") .. corr
        local previous = conv.pending[key]
        if previous ~= nil then this.duplicate_of = previous.number end
        conv.pending[key] = {id = id, number = number, time = time, command = message.command}
    else
        local key = (from_server and "c" or "s") .. corr
        local request = conv.pending[key]
        if request ~= nil and request.command == message.command then
            conv.pending[key] = nil
            link(request, id, number, time)
        else
            this.orphan = true
        end
    end
end

local function pair(pinfo, message, values, item)
    local corr = values.correlation_id
    if message.pairing == nil or (message.pairing == "call" and corr == nil) then return end
    local conv = conversation(pinfo, message)
    local from_server = endpoint(pinfo.src, pinfo.src_port) == conv.server
    local id = table.concat({pinfo.number, from_server and "s" or "c",
        message.response and "r" or "q", tostring(corr)}, ":")
    if not pinfo.visited and links[id] == nil then
        work_out_pairing(pinfo, conv, message, id, from_server, tostring(corr))
    end
    local found = links[id]
    if found == nil then return end
    if found.response_in then generated(item, F.response_in, found.response_in) end
    if found.response_to then
        generated(item, F.response_to, found.response_to)
        generated(item, F.time, found.time)
    end
    if found.duplicate_of then
        item:add_proto_expert_info(EXPERT.duplicate_id, string.format(
            "Correlation id %s reused: the request in frame %d is unanswered", tostring(corr),
            found.duplicate_of))
    end
    if found.orphan then item:add_proto_expert_info(EXPERT.orphan_response) end
end

----------------------------------------------------------------------------------------------
-- Frames

local function set_info(pinfo, text)
    pinfo.cols.protocol:set("RabbitMQ Stream")
    if pinfo.private[PROTOCOL] then
        pinfo.cols.info:append(", " .. text)
    else
        pinfo.cols.info:set(text)
        pinfo.private[PROTOCOL] = "1"
    end
end

local function summary(message, values, status)
    local parts = {message.name}
    if values.correlation_id ~= nil then parts[#parts + 1] = "corr=" .. values.correlation_id end
    if values.code ~= nil then
        parts[#parts + 1] = "code=" .. (NAMES.codes[values.code] or values.code)
    end
    for _, name in ipairs(message.info) do
        local value = values[name]
        if value ~= nil and value ~= "" then parts[#parts + 1] = name .. "=" .. tostring(value) end
    end
    if status ~= "ok" then parts[#parts + 1] = "[" .. status .. "]" end
    return table.concat(parts, " ")
end

local function read_message(ctx, message, layout, item)
    local v = ctx.values
    if message.corr then v.correlation_id = R.int(ctx, HEADER.correlation_id, item) end
    if message.code then v.code = R.int(ctx, HEADER.code, item) end
    for _, field in ipairs(layout) do
        v[field.name] = read(ctx, field.type, item)
        ctx.last = v[field.name]
    end
end

local function show_derived(message, values, item)
    for _, d in ipairs(message.derived) do
        local source = values[d.from[1]]
        local value = type(source) == "table" and source[d.from[2]] or nil
        if value ~= nil then
            generated(item, F[d.field], value)
            values[d.field] = value
        end
    end
end

local function show_unknown(tvb, item, key, version, body)
    item:add_proto_expert_info(EXPERT.unknown, string.format(
        "Key 0x%04x version %d is not in the protocol table", key, version))
    if body <= 0 then return end
    if bits.band(key, bits.bnot(SETTINGS.response_bit)) == SETTINGS.sasl_key
            and not proto.prefs.show_secrets then
        item:add(tvb(8, 0), "Body: *** (hidden: it may hold credentials)")
    else
        item:add(F.body, tvb(8, body))
    end
end

local function dissect_frame(tvb, pinfo, tree)
    local have = tvb:len()
    local item = tree:add(proto, tvb())
    if have < 8 then
        local expert_info = tvb:reported_len() > have and EXPERT.truncated or EXPERT.not_a_frame
        item:add_proto_expert_info(expert_info, "Fewer than 8 bytes: no size, key and version")
        set_info(pinfo, "[fragment]")
        return have
    end
    local size, key, version = tvb(0, 4):uint(), tvb(4, 2):uint(), tvb(6, 2):uint()
    item:add(F.size, tvb(0, 4))
    item:add(F.key, tvb(4, 2))
    item:add(F.version, tvb(6, 2))
    if size < 4 or size > proto.prefs.max_frame then
        item:add_proto_expert_info(EXPERT.not_a_frame, string.format(
            "Size %d is no frame's (4 to %d): %d bytes skipped", size, proto.prefs.max_frame,
            tvb:reported_len()))
        set_info(pinfo, "[not a frame start]")
        return have
    end
    local message = MESSAGES[key]
    local layout = message and message.versions[version]
    if layout == nil then
        show_unknown(tvb, item, key, version, math.min(have, size + 4) - 8)
        item:append_text(string.format(", unknown key 0x%04x v%d", key, version))
        set_info(pinfo, string.format("Unknown key=0x%04x v%d", key, version))
        return have
    end
    generated(item, F.command, message.command)
    generated(item, F.response, message.response)
    local ctx = {tvb = tvb, pos = 8, stop = math.min(have, size + 4), values = {},
        truncated = have < size + 4, version = version}
    local ok, err = pcall(read_message, ctx, message, layout, item)
    local status = "ok"
    if not ok then
        if getmetatable(err) ~= DecodeError then error(err, 0) end
        if err.short and ctx.truncated then
            status = "truncated"
        else
            status = "malformed"
            item:add_proto_expert_info(EXPERT.malformed, string.format("Malformed %s: %s (at byte %d)",
                message.name, err.reason, err.at))
        end
    elseif ctx.pos ~= ctx.stop then
        status = "malformed"
        item:add_proto_expert_info(EXPERT.malformed, string.format(
            "Malformed %s: trailing bytes (at byte %d)", message.name, ctx.pos))
    elseif ctx.truncated then
        status = "truncated"
    end
    if status == "truncated" then
        item:add_proto_expert_info(EXPERT.truncated, string.format(
            "%s cut short: %d of %d bytes captured", message.name, have, size + 4))
    end
    if status ~= "malformed" then show_derived(message, ctx.values, item) end
    local code = ctx.values.code
    if code ~= nil and code ~= OK then
        item:add_proto_expert_info(EXPERT.error_code, string.format("%s: %s", message.name,
            NAMES.codes[code] or ("unknown code " .. code)))
    end
    pair(pinfo, message, ctx.values, item)
    local text = summary(message, ctx.values, status)
    item:append_text(", " .. text)
    set_info(pinfo, text)
    return have
end

-- The length of the frame starting at offset (size field included); a size no frame has
-- makes the rest of the segment one piece, shown as not a frame start.
local function frame_length(tvb, pinfo, offset)
    if tvb:len() - offset < 4 then return tvb:reported_length_remaining(offset) end
    local size = tvb(offset, 4):uint()
    if size < 4 or size > proto.prefs.max_frame then
        return tvb:reported_length_remaining(offset)
    end
    return size + 4
end

-- Where each direction's frames start, in TCP sequence numbers, worked out the first time
-- each segment is dissected (in capture order, on whichever pass dissects first): a
-- direction whose handshake the capture holds starts a frame at its first byte, and each
-- frame's size field, where the capture kept it, says where the next one starts. A lost
-- segment, a retransmission or a size field the snap length cut leaves the direction's
-- next start unknown from there on.
local tcp_stream, tcp_seq = Field.new("tcp.stream"), Field.new("tcp.seq")
local tcp_nxtseq, tcp_completeness = Field.new("tcp.nxtseq"), Field.new("tcp.completeness")
local HANDSHAKE_SEEN = 3  -- tcp.completeness: the SYN and the SYN-ACK

local function field_value(field)
    local value = field()
    return value and value.value
end

-- A frame header of the table: size in range, a known key and version.
local function plausible_header(tvb, pos)
    local size, key, version = tvb(pos, 4):uint(), tvb(pos + 4, 2):uint(), tvb(pos + 6, 2):uint()
    local message = MESSAGES[key]
    return size >= 4 and size <= proto.prefs.max_frame and message ~= nil
        and message.versions[version] ~= nil
end

-- Frame by frame from pos, while a size field is captured: where the walk stops (the first
-- frame start whose size is not captured), or nil at a size no frame has; and the last frame
-- start it stepped over. `checked`: a frame start not known, only guessed, so each step
-- whose header the capture kept must be one of the table's (message bytes may read as
-- sizes), as the heuristic checks.
local function walk_frames(tvb, pos, checked)
    local have, last = tvb:len(), nil
    while pos + 4 <= have do
        local size = tvb(pos, 4):uint()
        if size < 4 or size > proto.prefs.max_frame then return nil end
        if checked and pos + 8 <= have and not plausible_header(tvb, pos) then return nil end
        last, pos = pos, pos + size + 4
    end
    return pos, last
end

-- The command of the frame whose header is at pos, nil where its key is not captured.
local function command_at(tvb, pos)
    if pos == nil or pos + 8 > tvb:len() then return nil end
    local message = MESSAGES[tvb(pos + 4, 2):uint()]
    return message and message.name or string.format("unknown key 0x%04x", tvb(pos + 4, 2):uint())
end

-- The offset of tvb's first frame start as its direction's walk knows it ("inside": the
-- segment lies inside one frame), or nil when the walk does not know (no handshake seen, a
-- gap, a size cut off before); and, where that offset is not 0, the frame the segment's
-- first bytes continue. A tvb is its packet's segment, or TCP's own reassembly: a
-- frame made whole (the walk went past it already: its segment is done when the frame
-- ends it), then the segment's rest as its own tvb. (A cut segment is never reassembled.)
local function known_frame_start(tvb, pinfo)
    local seq, nxt = field_value(tcp_seq), field_value(tcp_nxtseq)
    if seq == nil or nxt == nil then return nil end
    local reported = tvb:reported_len()
    local first = nxt - reported  -- (a segment's, or its rest's, first byte)
    local key = tostring(field_value(tcp_stream)) .. ":" .. endpoint(pinfo.src, pinfo.src_port)
        .. ">" .. endpoint(pinfo.dst, pinfo.dst_port)
    local d = directions[key]
    if first < seq then  -- a reassembled frame
        if d ~= nil and d.seen_to == seq and d.next_start == nxt then d.seen_to = nxt end
        return nil
    end
    local id = pinfo.number .. ":" .. first
    local known = segment_starts[id]
    if known ~= nil then return known.at or nil, known.frame end
    if d == nil then
        local handshake = bits.band(field_value(tcp_completeness) or 0, HANDSHAKE_SEEN)
        d = {next_start = handshake == HANDSHAKE_SEEN and seq == 1 and 1, seen_to = seq}
        directions[key] = d
    end
    local start, continued = d.next_start, d.frame
    if seq ~= d.seen_to or not start or start < first then
        start = false  -- a gap or a retransmission: nothing known of this segment
        if seq > d.seen_to then d.next_start = false end
    elseif start < nxt then
        local stop, last = walk_frames(tvb, start - first, false)
        d.next_start = stop ~= nil and stop >= reported and first + stop
        if last ~= nil then d.frame = {name = command_at(tvb, last), packet = pinfo.number} end
        start = start - first
    else
        start = "inside"
    end
    d.seen_to = math.max(d.seen_to, nxt)
    if start ~= 0 and start ~= false or tvb:len() < reported then  -- (the ones a pass uses)
        segment_starts[id] = {at = start, frame = start ~= 0 and continued or nil}
    end
    return start or nil, start ~= 0 and continued or nil
end

-- A segment the capture cut (snap length) before a frame's start: that frame, and any after
-- it, is not shown (tcp_dissect_pdus stops at the captured end); said as Wireshark says a
-- packet cut short, in Info and the tree, no expert info (Wireshark's own "Packet size
-- limited during capture": a snap length is no fault of the packet). A frame whose own
-- bytes the cut ends in is said by dissect_frame (expert info `truncated`).
-- Said for certain of a segment whose first frame start its direction's walk knows (from
-- there: the bytes before end an earlier frame); nothing of one it knows lies inside a frame
-- (the rest of a large Deliver, whose message bytes may look like frame headers); where the
-- walk does not know, the segment's own bytes are read as frames from byte 0, and those past
-- the cut are said "possibly" not captured.
local function frames_not_captured(tvb, pinfo, tree, start)
    local have, reported = tvb:len(), tvb:reported_len()
    if have >= reported or start == "inside" or (start or 0) == 0 and have < 8 then return end
    local pos = walk_frames(tvb, start or 0, start == nil)
    if pos == nil or pos < have or pos >= reported then return end
    local what = start ~= nil and "not shown" or "possibly not shown (where this segment's "
        .. "frames start is not known: read from its own bytes)"
    tree:add(proto, tvb(0, 0), string.format("[Packet size limited during capture: %d bytes "
        .. "from byte %d not captured, the frames in them %s]", reported - pos, pos, what))
    pinfo.cols.info:append(" [Packet size limited during capture]")
end

-- The first n bytes of a segment, the rest of a frame that started in an earlier packet (as
-- the walk knows: TCP did not join them, the earlier segment being cut), said as Wireshark's
-- own dissectors say continuation data, not read as frames (message bytes may look like
-- frame headers).
local function show_continuation(tvb, pinfo, tree, n, frame)
    local name = frame and frame.name and (frame.name .. " frame") or "a frame"
    local from = frame and string.format(" from packet %d", frame.packet) or ""
    tree:add(proto, tvb(0, math.min(n, tvb:len())),
        string.format("[Continuation of %s%s, %d bytes]", name, from, n))
    set_info(pinfo, string.format("[Continuation of %s]", name))
end

function proto.dissector(tvb, pinfo, tree)
    local start, continued = known_frame_start(tvb, pinfo)  -- (every segment: the walk goes on)
    local rest = tvb
    if start == "inside" or (start ~= nil and start > 0) then
        local n = start == "inside" and tvb:reported_len() or start
        show_continuation(tvb, pinfo, tree, n, continued)
        if start == "inside" or start >= tvb:len() then return tvb:len() end
        rest = tvb(start):tvb()
    end
    dissect_tcp_pdus(rest, tree, 8, frame_length, dissect_frame, true)
    if rest ~= tvb and pinfo.desegment_len > 0 then  -- (TCP counts from the segment's start)
        pinfo.desegment_offset = pinfo.desegment_offset + start
    end
    frames_not_captured(tvb, pinfo, tree, start)
    return tvb:len()
end

----------------------------------------------------------------------------------------------
-- The heuristic, for other ports (as the core's framing.looks_like_stream): a direction that
-- starts with a PeerProperties request or a Heartbeat, or with a whole well-formed frame of
-- the table within its first bytes.

local NO_TREE = {}
setmetatable(NO_TREE, {__index = function() return function() return NO_TREE end end})

local function well_formed(tvb, size, key, version)
    local message = MESSAGES[key]
    local layout = message and message.versions[version]
    if layout == nil then return false end
    local ctx = {tvb = tvb, pos = 8, stop = size + 4, values = {}, truncated = false,
        version = version}
    local ok, err = pcall(read_message, ctx, message, layout, NO_TREE)
    if not ok and getmetatable(err) ~= DecodeError then error(err, 0) end
    return ok and ctx.pos == ctx.stop
end

local function looks_like_stream(tvb)
    local have = math.min(tvb:len(), SETTINGS.classify_bytes)
    if have < 8 then return false end
    local size, key, version = tvb(0, 4):uint(), tvb(4, 2):uint(), tvb(6, 2):uint()
    if key == SETTINGS.peer_properties and version == 1 and size >= 8
            and size <= SETTINGS.peer_properties_max then
        return true
    end
    if key == SETTINGS.heartbeat and version == 1 and size == 4 then return true end
    if not plausible_header(tvb, 0) or size + 4 > have then return false end
    if not well_formed(tvb, size, key, version) then return false end
    return have - (size + 4) < 8 or plausible_header(tvb, size + 4)
end

local function heuristic(tvb, pinfo, tree)
    if not looks_like_stream(tvb) then return false end
    pinfo.conversation = proto
    proto.dissector(tvb, pinfo, tree)
    return true
end

----------------------------------------------------------------------------------------------
-- Registration

local tcp_ports = DissectorTable.get("tcp.port")

local function register_ports()
    if registered ~= nil then tcp_ports:remove_all(proto) end
    registered = tostring(proto.prefs.ports)
    port_ranges = parse_ranges(registered)
    if registered ~= "" then tcp_ports:add(registered, proto) end
end

function proto.prefs_changed()
    if tostring(proto.prefs.ports) ~= registered then register_ports() end
end

register_ports()
proto:register_heuristic("tcp", heuristic)
