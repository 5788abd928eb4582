"""THE RocketMQ remoting table: codes, languages, flag bits, the known headers' fields, the
SEND_MESSAGE_V2 short keys, the message system flags and the stored-message magic codes.

Decoding (codec.py), encoding (make_command, encode_command) and the named fields of every
record derive from it; docs/protocol-rocketmq.md says the same in prose. Facts from Apache
RocketMQ 4.9.x (RequestCode, ResponseCode, RemotingSysResponseCode, LanguageCode,
RemotingCommand, SendMessageRequestHeaderV2, MessageSysFlag, PullSysFlag, MessageDecoder),
checked against the captures in captures/rocketmq/. Adding a header is one `_header(...)`
line here plus a test with real bytes.
"""

from __future__ import annotations

from streamdissect.slotted import Frozen

# --- the frame ------------------------------------------------------------------------
JSON, ROCKETMQ = 0, 1  # high byte of the header-length word
SERIALIZE_NAMES = {JSON: "JSON", ROCKETMQ: "ROCKETMQ"}
HEADER_LENGTH_MASK = 0xFFFFFF
MAX_FRAME = 16 * 1024 * 1024  # the servers' default frame limit (frameMaxLength)
RESPONSE_FLAG, ONEWAY_FLAG = 0x1, 0x2  # flag bit 0: a response; bit 1: oneway
BINARY_FIXED = 2 + 1 + 2 + 4 + 4 + 4 + 4  # code..flag, remark length, ext length
JSON_KEYS = ("code", "language", "version", "opaque", "flag", "remark", "extFields",
             "serializeTypeCurrentRPC")  # fmt: skip

LANGUAGES = {0: "JAVA", 1: "CPP", 2: "DOTNET", 3: "PYTHON", 4: "DELPHI", 5: "ERLANG", 6: "RUBY",
             7: "OTHER", 8: "HTTP", 9: "GO", 10: "PHP", 11: "OMS", 12: "RUST", 13: "NODE_JS"}
LANGUAGE_CODES = {name: code for code, name in LANGUAGES.items()}

# --- codes: two tables (17 is UPDATE_AND_CREATE_TOPIC asked, TOPIC_NOT_EXIST answered) ----
REQUEST_CODES = {
    10: "SEND_MESSAGE", 11: "PULL_MESSAGE", 12: "QUERY_MESSAGE", 13: "QUERY_BROKER_OFFSET",
    14: "QUERY_CONSUMER_OFFSET", 15: "UPDATE_CONSUMER_OFFSET", 17: "UPDATE_AND_CREATE_TOPIC",
    21: "GET_ALL_TOPIC_CONFIG", 22: "GET_TOPIC_CONFIG_LIST", 23: "GET_TOPIC_NAME_LIST",
    25: "UPDATE_BROKER_CONFIG", 26: "GET_BROKER_CONFIG", 27: "TRIGGER_DELETE_FILES",
    28: "GET_BROKER_RUNTIME_INFO", 29: "SEARCH_OFFSET_BY_TIMESTAMP", 30: "GET_MAX_OFFSET",
    31: "GET_MIN_OFFSET", 32: "GET_EARLIEST_MSG_STORETIME", 33: "VIEW_MESSAGE_BY_ID",
    34: "HEART_BEAT", 35: "UNREGISTER_CLIENT", 36: "CONSUMER_SEND_MSG_BACK",
    37: "END_TRANSACTION", 38: "GET_CONSUMER_LIST_BY_GROUP", 39: "CHECK_TRANSACTION_STATE",
    40: "NOTIFY_CONSUMER_IDS_CHANGED", 41: "LOCK_BATCH_MQ", 42: "UNLOCK_BATCH_MQ",
    43: "GET_ALL_CONSUMER_OFFSET", 45: "GET_ALL_DELAY_OFFSET", 46: "CHECK_CLIENT_CONFIG",
    50: "UPDATE_AND_CREATE_ACL_CONFIG", 51: "DELETE_ACL_CONFIG",
    52: "GET_BROKER_CLUSTER_ACL_INFO", 53: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
    54: "GET_BROKER_CLUSTER_ACL_CONFIG", 100: "PUT_KV_CONFIG", 101: "GET_KV_CONFIG",
    102: "DELETE_KV_CONFIG", 103: "REGISTER_BROKER", 104: "UNREGISTER_BROKER",
    105: "GET_ROUTEINFO_BY_TOPIC", 106: "GET_BROKER_CLUSTER_INFO",
    200: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", 201: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
    202: "GET_TOPIC_STATS_INFO", 203: "GET_CONSUMER_CONNECTION_LIST",
    204: "GET_PRODUCER_CONNECTION_LIST", 205: "WIPE_WRITE_PERM_OF_BROKER",
    206: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER", 207: "DELETE_SUBSCRIPTIONGROUP",
    208: "GET_CONSUME_STATS", 209: "SUSPEND_CONSUMER", 210: "RESUME_CONSUMER",
    211: "RESET_CONSUMER_OFFSET_IN_CONSUMER", 212: "RESET_CONSUMER_OFFSET_IN_BROKER",
    213: "ADJUST_CONSUMER_THREAD_POOL", 214: "WHO_CONSUME_THE_MESSAGE",
    215: "DELETE_TOPIC_IN_BROKER", 216: "DELETE_TOPIC_IN_NAMESRV", 219: "GET_KVLIST_BY_NAMESPACE",
    220: "RESET_CONSUMER_CLIENT_OFFSET", 221: "GET_CONSUMER_STATUS_FROM_CLIENT",
    222: "INVOKE_BROKER_TO_RESET_OFFSET", 223: "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
    224: "GET_TOPICS_BY_CLUSTER", 300: "QUERY_TOPIC_CONSUME_BY_WHO",
    301: "REGISTER_FILTER_SERVER", 302: "REGISTER_MESSAGE_FILTER_CLASS",
    303: "QUERY_CONSUME_TIME_SPAN", 304: "GET_SYSTEM_TOPIC_LIST_FROM_NS",
    305: "GET_SYSTEM_TOPIC_LIST_FROM_BROKER", 306: "CLEAN_EXPIRED_CONSUMEQUEUE",
    307: "GET_CONSUMER_RUNNING_INFO", 308: "QUERY_CORRECTION_OFFSET",
    309: "CONSUME_MESSAGE_DIRECTLY", 310: "SEND_MESSAGE_V2", 311: "GET_UNIT_TOPIC_LIST",
    312: "GET_HAS_UNIT_SUB_TOPIC_LIST", 313: "GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST",
    314: "CLONE_GROUP_OFFSET", 315: "VIEW_BROKER_STATS_DATA", 316: "CLEAN_UNUSED_TOPIC",
    317: "GET_BROKER_CONSUME_STATS", 318: "UPDATE_NAMESRV_CONFIG", 319: "GET_NAMESRV_CONFIG",
    320: "SEND_BATCH_MESSAGE", 321: "QUERY_CONSUME_QUEUE", 322: "QUERY_DATA_VERSION",
    323: "RESUME_CHECK_HALF_MESSAGE", 324: "SEND_REPLY_MESSAGE", 325: "SEND_REPLY_MESSAGE_V2",
    326: "PUSH_REPLY_MESSAGE_TO_CLIENT", 327: "ADD_WRITE_PERM_OF_BROKER",
    328: "GET_ALL_PRODUCER_INFO", 329: "DELETE_EXPIRED_COMMITLOG",
}
RESPONSE_CODES = {
    0: "SUCCESS", 1: "SYSTEM_ERROR", 2: "SYSTEM_BUSY", 3: "REQUEST_CODE_NOT_SUPPORTED",
    4: "TRANSACTION_FAILED", 10: "FLUSH_DISK_TIMEOUT", 11: "SLAVE_NOT_AVAILABLE",
    12: "FLUSH_SLAVE_TIMEOUT", 13: "MESSAGE_ILLEGAL", 14: "SERVICE_NOT_AVAILABLE",
    15: "VERSION_NOT_SUPPORTED", 16: "NO_PERMISSION", 17: "TOPIC_NOT_EXIST",
    18: "TOPIC_EXIST_ALREADY", 19: "PULL_NOT_FOUND", 20: "PULL_RETRY_IMMEDIATELY",
    21: "PULL_OFFSET_MOVED", 22: "QUERY_NOT_FOUND", 23: "SUBSCRIPTION_PARSE_FAILED",
    24: "SUBSCRIPTION_NOT_EXIST", 25: "SUBSCRIPTION_NOT_LATEST",
    26: "SUBSCRIPTION_GROUP_NOT_EXIST", 27: "FILTER_DATA_NOT_EXIST", 28: "FILTER_DATA_NOT_LATEST",
    200: "TRANSACTION_SHOULD_COMMIT", 201: "TRANSACTION_SHOULD_ROLLBACK",
    202: "TRANSACTION_STATE_UNKNOW", 203: "TRANSACTION_STATE_GROUP_WRONG", 204: "NO_BUYER_ID",
    205: "NOT_IN_CURRENT_UNIT", 206: "CONSUMER_NOT_ONLINE", 207: "CONSUME_MSG_TIMEOUT",
    208: "NO_MESSAGE", 209: "UPDATE_AND_CREATE_ACL_CONFIG_FAILED", 210: "DELETE_ACL_CONFIG_FAILED",
    211: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED",
}


# a send's response code -> the SendStatus the Java client makes of it (4.9.x
# MQClientAPIImpl.processSendResponse); any other code is an error, not a status
SEND_STATUS = {0: "SEND_OK", 10: "FLUSH_DISK_TIMEOUT", 11: "SLAVE_NOT_AVAILABLE",
               12: "FLUSH_SLAVE_TIMEOUT"}  # fmt: skip
SEND_CODES = frozenset((10, 310, 320, 324, 325))  # the requests that send messages
PULL_CODE, QUERY_OFFSET_CODE, UPDATE_OFFSET_CODE, MAX_OFFSET_CODE = 11, 14, 15, 30
HEARTBEAT_CODE, UNREGISTER_CLIENT_CODE = 34, 35
REGISTER_BROKER_CODE, UNREGISTER_BROKER_CODE = 103, 104


def request_name(code: int) -> str:
    return REQUEST_CODES.get(code) or f"unknown({code})"


def response_name(code: int) -> str:
    return RESPONSE_CODES.get(code) or f"unknown({code})"


# --- header (ext) fields -----------------------------------------------------------------
# Wire values are text in the Java client's headers (numbers and booleans as strings); JSON
# headers of other clients may hold numbers or booleans. A field's type says what it means.
STR, INT, BOOL = "str", "int", "bool"


class Field(Frozen):
    """A custom header's field: its wire key, its name in records and its type."""

    __slots__ = field_names = ("key", "name", "type")
    key: str  # as on the wire (the V2 short key for SEND_MESSAGE_V2/SEND_BATCH_MESSAGE)
    name: str  # the field's name in records (camelCase, as RocketMQ names it)
    type: str  # STR, INT or BOOL

    def __init__(self, key: str, name: str, type: str) -> None:
        self._set(key=key, name=name, type=type)


class Header(Frozen):
    """A custom header: RocketMQ's class name for it and its fields."""

    __slots__ = field_names = ("name", "fields")
    name: str  # RocketMQ's class name for it
    fields: tuple[Field, ...]

    def __init__(self, name: str, fields: tuple[Field, ...]) -> None:
        self._set(name=name, fields=fields)

    def by_key(self) -> dict[str, Field]:
        return {f.key: f for f in self.fields}


def _header(name: str, *fields: tuple[str, str], keys: str | None = None) -> Header:
    """A header from (name, type) pairs; `keys`: the wire keys in order (V2's letters)."""
    wire = list(keys) if keys else [n for n, _ in fields]
    return Header(name, tuple(Field(k, n, t) for k, (n, t) in zip(wire, fields)))


_SEND_FIELDS = (("producerGroup", STR), ("topic", STR), ("defaultTopic", STR),
                ("defaultTopicQueueNums", INT), ("queueId", INT), ("sysFlag", INT),
                ("bornTimestamp", INT), ("flag", INT), ("properties", STR),
                ("reconsumeTimes", INT), ("unitMode", BOOL), ("maxReconsumeTimes", INT),
                ("batch", BOOL), ("brokerName", STR))  # fmt: skip
# SendMessageRequestHeaderV2: the same fields under one letter each, a..n in this order
V2_KEYS = "abcdefghijklmn"
SEND_V2 = _header("SendMessageRequestHeaderV2", *_SEND_FIELDS, keys=V2_KEYS)
V2_NAMES = {f.key: f.name for f in SEND_V2.fields}

REQUEST_HEADERS: dict[int, Header] = {
    10: _header("SendMessageRequestHeader", *_SEND_FIELDS),
    310: SEND_V2,
    320: SEND_V2,
    324: _header("SendMessageRequestHeader", *_SEND_FIELDS),
    325: SEND_V2,
    11: _header("PullMessageRequestHeader", ("consumerGroup", STR), ("topic", STR),
                ("queueId", INT), ("queueOffset", INT), ("maxMsgNums", INT), ("sysFlag", INT),
                ("commitOffset", INT), ("suspendTimeoutMillis", INT), ("subscription", STR),
                ("subVersion", INT), ("expressionType", STR)),
    14: _header("QueryConsumerOffsetRequestHeader", ("consumerGroup", STR), ("topic", STR),
                ("queueId", INT)),
    15: _header("UpdateConsumerOffsetRequestHeader", ("consumerGroup", STR), ("topic", STR),
                ("queueId", INT), ("commitOffset", INT)),
    17: _header("CreateTopicRequestHeader", ("topic", STR), ("defaultTopic", STR),
                ("readQueueNums", INT), ("writeQueueNums", INT), ("perm", INT),
                ("topicFilterType", STR), ("topicSysFlag", INT), ("order", BOOL)),
    29: _header("SearchOffsetRequestHeader", ("topic", STR), ("queueId", INT),
                ("timestamp", INT)),
    30: _header("GetMaxOffsetRequestHeader", ("topic", STR), ("queueId", INT)),
    31: _header("GetMinOffsetRequestHeader", ("topic", STR), ("queueId", INT)),
    35: _header("UnregisterClientRequestHeader", ("clientID", STR), ("producerGroup", STR),
                ("consumerGroup", STR)),
    36: _header("ConsumerSendMsgBackRequestHeader", ("offset", INT), ("group", STR),
                ("delayLevel", INT), ("originMsgId", STR), ("originTopic", STR),
                ("unitMode", BOOL), ("maxReconsumeTimes", INT)),
    38: _header("GetConsumerListByGroupRequestHeader", ("consumerGroup", STR)),
    40: _header("NotifyConsumerIdsChangedRequestHeader", ("consumerGroup", STR)),
    103: _header("RegisterBrokerRequestHeader", ("brokerName", STR), ("brokerAddr", STR),
                 ("clusterName", STR), ("haServerAddr", STR), ("brokerId", INT),
                 ("compressed", BOOL), ("bodyCrc32", INT)),
    104: _header("UnRegisterBrokerRequestHeader", ("brokerName", STR), ("brokerAddr", STR),
                 ("clusterName", STR), ("brokerId", INT)),
    105: _header("GetRouteInfoRequestHeader", ("topic", STR)),
}
# Responses carry no request code: their fields are known by name, whatever the call.
RESPONSE_HEADER = _header(
    "(response headers)",
    # SendMessageResponseHeader
    ("msgId", STR), ("queueId", INT), ("queueOffset", INT), ("transactionId", STR),
    ("batchUniqId", STR), ("MSG_REGION", STR), ("TRACE_ON", BOOL),
    # PullMessageResponseHeader
    ("suggestWhichBrokerId", INT), ("nextBeginOffset", INT), ("minOffset", INT),
    ("maxOffset", INT),
    # Query/GetMax/GetMin/SearchOffset responses
    ("offset", INT),
    # RegisterBrokerResponseHeader
    ("haServerAddr", STR), ("masterAddr", STR))  # fmt: skip
# the fields that make a response a pull response (its body: stored messages)
PULL_RESPONSE_KEYS = frozenset(("nextBeginOffset", "minOffset", "maxOffset"))
MESSAGE_BODY_CODES = frozenset((10, 310, 324, 325))  # a request's body is one message
BATCH_CODE = 320  # the body is the batch's messages

# --- messages ------------------------------------------------------------------------------
NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR = "\x01", "\x02"
UNIQ_KEY, TAGS, KEYS = "UNIQ_KEY", "TAGS", "KEYS"
# MessageSysFlag bits
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_MASK = 0xC  # PREPARED 0x4, COMMIT 0x8, ROLLBACK 0xC
SYSFLAG_BORNHOST_V6 = 0x10
SYSFLAG_STOREHOST_V6 = 0x20
SYSFLAG_NEED_UNWRAP = 0x40
SYSFLAG_INNER_BATCH = 0x80
SYSFLAG_COMPRESSION_MASK = 0x700  # LZ4 0x100, ZSTD 0x200, ZLIB 0x300 (4.9.8 sets 0x300; 0: zlib)
COMPRESSION_TYPES = {0x000: "zlib", 0x100: "lz4", 0x200: "zstd", 0x300: "zlib"}
# PullSysFlag bits (the pull request's sysFlag)
PULL_COMMIT_OFFSET, PULL_SUSPEND, PULL_SUBSCRIPTION, PULL_CLASS_FILTER, PULL_LITE = (
    0x1, 0x2, 0x4, 0x8, 0x10)  # fmt: skip
# stored messages (pull bodies): magic codes as signed int32; V2 has a 2-byte topic length
MAGIC_V1, MAGIC_V2, MAGIC_BLANK = -626843481, -626843477, -875286124
STORED_MAGICS = {MAGIC_V1: 1, MAGIC_V2: 2}
MAX_INFLATED = 4 * 1024 * 1024  # a message body inflated beyond this is refused (4 MiB:
#                                 the broker's default maximum message size)
MALFORMED_KEPT = 64  # the first bytes of a malformed frame a record keeps
