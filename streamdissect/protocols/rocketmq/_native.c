/* RocketMQ's hot frames read for the analyses, compiled (optional: native.py loads it; the
 * Python path it replaces, the headers parsed by the json module and hot.hot_record, is the
 * fallback and the reference the tests and fuzz targets hold it to).
 *
 * hot_records: each whole JSON frame's light record (a HotSend, a HotAnswer, a HotPulled,
 * a HotPull),
 * made straight from its header's text (a pull response's stored messages walked as
 * messages.plain_sizes walks them), or None: read it the Python way.
 * json_run (_native_walk.c): the plain walk's loop (framing.walk._frames) over a run of
 * whole JSON frames (key 0: a JSON header under 64 KiB) of one direction's segments, each
 * noted as the loop notes a deferred frame; it stops at any other frame for the loop to take.
 * frames_of, place: plain_walk's reading of deferred frames, their bytes cut from the block
 * buffer, the light records' events made (_native_events.c) and put in their slots.
 * joined (_native_events.c): a block's runs of light sends and answers as one event each
 * (hot.joined_runs);
 * send_run (_native_runs.c): the collectors' loop over such a run (send_runs._frames).
 * named, in_time_order (_native_naming.c): a connection's block named in time order, and
 * its items sorted for it (plain_walk).
 * The scanner reads a strict subset of JSON, the one the clients and brokers write: no
 * blank, every text ASCII (escapes of code points under 0x80 only), keys unescaped, the
 * header's own keys known and each once, integers of at most 18 digits, extFields an object
 * of texts. Anything else, and every value whose meaning the Python path decides (an
 * integer field's text other than digits, a compressed or oneway send, a pull response
 * whose messages are not all usual ones), is None: never a record the Python path would not make the same.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#include "_native.h"
#include <string.h>

#define RESPONSE_FLAG 1
#define SEND_V2_CODE 310
#define PULL_CODE 11
#define MAX_DIGITS 18
#define JSON_SERIALIZE 0

/* A stored message's fixed part (messages._PLAIN_FIXED: head and IPv4 middle) and what is
 * read of it; the stored magics (spec.STORED_MAGICS: V1 a 1-byte topic length, V2 2-byte). */
#define PLAIN_FIXED 88
#define AT_MAGIC 4
#define AT_SYSFLAG 36
#define AT_LENGTH 84
#define MAGIC_V1 (-626843481)
#define MAGIC_V2 (-626843477)
#define SYSFLAG_COMPRESSED 0x1
#define V6_HOSTS 0x30

/* The interned group and topic of the light send read last (shared_text), and the tags of
 * the last few (senders alternate tags: recent_tags). */
#define RECENT 4
static PyObject *LAST_GROUP, *LAST_TOPIC, *RECENT_TAGS[RECENT];
static int RECENT_NEXT;

/* A function inlined where it is called (the scanner's per-text and per-field steps: their
 * calls cost as much as their work). */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* A text's place in the header (its content between the quotes) or absent (start NULL). */
typedef struct {
    const char *start, *end;
} Span;

/* The header keys, one bit each (each may be seen once). */
enum { K_CODE = 1, K_EXT = 2, K_FLAG = 4, K_LANGUAGE = 8, K_OPAQUE = 16, K_REMARK = 32,
       K_RPC = 64, K_VERSION = 128 };

/* The ext keys read: the V2 send's letters, the send response's and pull response's keys,
 * a pull request's (hot.PULL_FIELDS: its queueId and queueOffset the send response's). */
enum { E_GROUP, E_TOPIC, E_QUEUE, E_SYSFLAG, E_PROPERTIES, E_MSGID, E_QUEUEID, E_QUEUEOFFSET,
       E_NEXT, E_MIN, E_MAX, E_OFFSET, E_BROKER, E_PULL_GROUP, E_PULL_TOPIC, E_PULL_MAX_NUMS,
       E_PULL_SYSFLAG, E_PULL_COMMIT, E_PULL_SUSPEND, E_COUNT };
/* A light pull request's fields (hot.PULL_FIELDS, in its order): ext key, integer or text. */
#define PULL_FIELD_COUNT 8
static const struct { int key; int integer; } PULL_FIELDS[PULL_FIELD_COUNT] = {
    {E_PULL_GROUP, 0}, {E_PULL_TOPIC, 0}, {E_QUEUEID, 1}, {E_QUEUEOFFSET, 1},
    {E_PULL_MAX_NUMS, 1}, {E_PULL_SYSFLAG, 1}, {E_PULL_COMMIT, 1}, {E_PULL_SUSPEND, 1}};

typedef struct {
    int seen;
    long long code, opaque, flag;
    Span remark;
    Span ext[E_COUNT];
} Header;

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A header byte's class in a text: an ordinary one (0), the closing quote, an escape, or
 * one the scanner does not read (under 0x20, over 0x7E): one look-up a byte (text_classes). */
enum { T_PLAIN, T_QUOTE, T_ESCAPE, T_BAD };
static unsigned char TEXT_CLASS[256];

static void text_classes(void) {
    for (int c = 0; c < 256; c++)
        TEXT_CLASS[c] = c < 0x20 || c > 0x7E ? T_BAD
                        : c == '"'             ? T_QUOTE
                        : c == '\\'            ? T_ESCAPE
                                               : T_PLAIN;
}

/* The first byte from s on that is no ordinary one (TEXT_CLASS). s is in a frame, a bytes
 * object: CPython ends its bytes with a NUL (T_BAD), so the loop needs no bound; the caller
 * checks the byte found against its end. With SSE2 (every x86-64), 16 bytes a step: the
 * aligned 16-byte blocks from the one holding s on, each read whole (an aligned block never
 * crosses a page, and none is read past the one holding the NUL); else four a step. */
#if defined(__SSE2__)
#include <emmintrin.h>
/* The bytes of an aligned 16-byte block that are no ordinary one, a bit each: '"', '\\',
 * 0x7F, and those under 0x20 or over 0x7F (under 0x20 as signed bytes). */
static inline unsigned unusual(const char *block) {
    __m128i v = _mm_load_si128((const __m128i *)block);
    __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i escape = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    __m128i low = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
    __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F));
    return (unsigned)_mm_movemask_epi8(
        _mm_or_si128(_mm_or_si128(quote, escape), _mm_or_si128(low, del)));
}

static inline const char *plain_run(const char *s) {
    const char *block = (const char *)((uintptr_t)s & ~(uintptr_t)15);
    unsigned mask = unusual(block) & (~0u << (s - block));
    while (mask == 0) mask = unusual(block += 16);
    return block + __builtin_ctz(mask);
}
#else
static inline const char *plain_run(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    for (;; u += 4) {
        if (TEXT_CLASS[u[0]]) return (const char *)u;
        if (TEXT_CLASS[u[1]]) return (const char *)u + 1;
        if (TEXT_CLASS[u[2]]) return (const char *)u + 2;
        if (TEXT_CLASS[u[3]]) return (const char *)u + 3;
    }
}
#endif

/* A JSON text from its opening quote: its content's span, *p past the closing quote; 0 when
 * it is not one the scanner reads (a byte over 0x7E or under 0x20, an escape of a code
 * point over 0x7F, a bad escape). `plain`: no escape allowed (a key). (Within a frame's
 * bytes: plain_run.) */
static ALWAYS_INLINE int text(const char **p, const char *end, Span *span, int plain) {
    const char *s = *p;
    if (s >= end || *s != '"') return 0;
    span->start = ++s;
    for (;;) {
        s = plain_run(s); /* (a quote, an escape or a bad byte) */
        if (s >= end) return 0;
        if (*s == '"') {
            span->end = s;
            *p = s + 1;
            return 1;
        }
        if (*s != '\\' || plain || s + 1 >= end) return 0;
        char e = s[1];
        if (e == 'u') { /* (\u00XX, X a hex digit, the first 0-7) */
            if (s + 6 > end || s[2] != '0' || s[3] != '0' || s[4] < '0' || s[4] > '7' ||
                hexval(s[5]) < 0)
                return 0;
            s += 6;
            continue;
        }
        if (!strchr("\"\\/bfnrt", e) || e == 0) return 0;
        s += 2;
    }
}

/* A text's content with its escapes read, into `out` (at least as long as the span). */
static Py_ssize_t unescape(Span span, char *out) {
    Py_ssize_t n = 0;
    for (const char *s = span.start; s < span.end;) {
        if (*s != '\\') { /* (the bytes up to the next escape copied at once) */
            const char *stop = memchr(s, '\\', span.end - s);
            Py_ssize_t run = (stop == NULL ? span.end : stop) - s;
            memcpy(out + n, s, run);
            n += run, s += run;
            continue;
        }
        char e = s[1];
        switch (e) {
        case 'u': out[n++] = (char)(hexval(s[4]) * 16 + hexval(s[5])); s += 6; continue;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        default: out[n++] = e; /* " \ / */
        }
        s += 2;
    }
    return n;
}

/* A JSON integer (-?(0|[1-9][0-9]*), at most MAX_DIGITS digits) followed by ',' or '}'. */
static ALWAYS_INLINE int json_int(const char **p, const char *end, long long *value) {
    const char *s = *p;
    int negative = 0, digits = 0;
    long long v = 0;
    if (s < end && *s == '-') negative = 1, s++;
    if (s < end && *s == '0') {
        s++, digits = 1;
    } else {
        while (s < end && *s >= '0' && *s <= '9' && digits < MAX_DIGITS)
            v = v * 10 + (*s++ - '0'), digits++;
    }
    /* (a digit still there: more than MAX_DIGITS, or a leading zero) */
    if (digits == 0 || s >= end || (*s != ',' && *s != '}')) return 0;
    *value = negative ? -v : v;
    *p = s;
    return 1;
}

/* An integer field's text as digits alone (int() of it), optionally signed by '-';
 * 0 when it is anything else (the Python path decides those). */
static int digits_value(Span span, long long *value) {
    const char *s = span.start;
    int negative = 0;
    long long v = 0;
    if (s < span.end && *s == '-') negative = 1, s++;
    if (s == span.end || span.end - s > MAX_DIGITS) return 0;
    for (; s < span.end; s++) {
        if (*s < '0' || *s > '9') return 0;
        v = v * 10 + (*s - '0');
    }
    *value = negative ? -v : v;
    return 1;
}

/* Whether the n bytes at s are the literal `name` (n known equal to its length: a key's
 * length is switched on first, so no key is compared byte by byte with every name);
 * compared here, unrolled for the literal's length, not by a call to memcmp. */
static ALWAYS_INLINE uint64_t word8(const char *p) { uint64_t w; memcpy(&w, p, 8); return w; }
static ALWAYS_INLINE uint32_t word4(const char *p) { uint32_t w; memcpy(&w, p, 4); return w; }
static ALWAYS_INLINE int same_bytes(const char *s, const char *name, size_t n) {
    if (n < 4) { /* (bytes; the literal's length known, the tests fold away) */
        for (size_t k = 0; k < n; k++)
            if (s[k] != name[k]) return 0;
        return 1;
    }
    if (n < 8) return word4(s) == word4(name) && word4(s + n - 4) == word4(name + n - 4);
    for (size_t k = 0; k + 8 < n; k += 8)
        if (word8(s + k) != word8(name + k)) return 0;
    return word8(s + n - 8) == word8(name + n - 8);
}
#define SAME(s, name) same_bytes((s), (name), sizeof(name) - 1)

/* An ext key's index (E_*), or -1: one not read. */
static int ext_key(const char *s, Py_ssize_t n) {
    switch (n) {
    case 1:
        switch (*s) {
        case 'a': return E_GROUP;
        case 'b': return E_TOPIC;
        case 'e': return E_QUEUE;
        case 'f': return E_SYSFLAG;
        case 'i': return E_PROPERTIES;
        }
        return -1;
    case 5: return SAME(s, "msgId") ? E_MSGID : SAME(s, "topic") ? E_PULL_TOPIC : -1;
    case 6: return SAME(s, "offset") ? E_OFFSET : -1;
    case 7: return SAME(s, "queueId") ? E_QUEUEID : SAME(s, "sysFlag") ? E_PULL_SYSFLAG : -1;
    case 9: return SAME(s, "minOffset") ? E_MIN : SAME(s, "maxOffset") ? E_MAX : -1;
    case 10: return SAME(s, "maxMsgNums") ? E_PULL_MAX_NUMS : -1;
    case 11: return SAME(s, "queueOffset") ? E_QUEUEOFFSET : -1;
    case 12: return SAME(s, "commitOffset") ? E_PULL_COMMIT : -1;
    case 13: return SAME(s, "consumerGroup") ? E_PULL_GROUP : -1;
    case 15: return SAME(s, "nextBeginOffset") ? E_NEXT : -1;
    case 20:
        return SAME(s, "suggestWhichBrokerId")   ? E_BROKER
               : SAME(s, "suspendTimeoutMillis") ? E_PULL_SUSPEND
                                                 : -1;
    }
    return -1;
}

/* A header key's bit (K_*), or 0: one the scanner does not read. */
static int header_key(const char *s, Py_ssize_t n) {
    switch (n) {
    case 4: return SAME(s, "code") ? K_CODE : SAME(s, "flag") ? K_FLAG : 0;
    case 6: return SAME(s, "opaque") ? K_OPAQUE : SAME(s, "remark") ? K_REMARK : 0;
    case 7: return SAME(s, "version") ? K_VERSION : 0;
    case 8: return SAME(s, "language") ? K_LANGUAGE : 0;
    case 9: return SAME(s, "extFields") ? K_EXT : 0;
    case 23: return SAME(s, "serializeTypeCurrentRPC") ? K_RPC : 0;
    }
    return 0;
}

/* extFields' object of texts, its read keys' values noted (a read key twice: 0). */
static int ext_fields(const char **p, const char *end, Header *h) {
    const char *s = *p;
    Span key, value;
    if (s >= end || *s != '{') return 0;
    s++;
    if (s < end && *s == '}') {
        *p = s + 1;
        return 1;
    }
    for (;;) {
        if (!text(&s, end, &key, 1) || s >= end || *s++ != ':' || !text(&s, end, &value, 0))
            return 0;
        int k = ext_key(key.start, key.end - key.start);
        if (k >= 0) {
            if (h->ext[k].start) return 0;
            h->ext[k] = value;
        }
        if (s >= end) return 0;
        if (*s == '}') {
            *p = s + 1;
            return 1;
        }
        if (*s++ != ',') return 0;
    }
}

/* The header's text read into `h` (within a frame's bytes object: plain_run); 0: not one the
 * scanner reads. */
static int scan(const char *s, const char *end, Header *h) {
    Span key, value;
    memset(h, 0, sizeof(*h));
    if (s >= end || *s++ != '{') return 0;
    for (;;) {
        if (!text(&s, end, &key, 1) || s >= end || *s++ != ':') return 0;
        int bit = header_key(key.start, key.end - key.start);
        if (bit == 0 || (h->seen & bit)) return 0;
        h->seen |= bit;
        long long ignored;
        int ok;
        switch (bit) {
        case K_CODE: ok = json_int(&s, end, &h->code); break;
        case K_OPAQUE: ok = json_int(&s, end, &h->opaque); break;
        case K_FLAG: ok = json_int(&s, end, &h->flag); break;
        case K_VERSION: ok = json_int(&s, end, &ignored); break;
        case K_EXT: ok = ext_fields(&s, end, h); break;
        case K_REMARK: ok = text(&s, end, &h->remark, 0); break;
        default: ok = text(&s, end, &value, 0);
        }
        if (!ok || s >= end) return 0;
        if (*s == '}') return s + 1 == end && (h->seen & K_CODE);
        if (*s++ != ',') return 0;
    }
}

/* n bytes as a str, every one ASCII (the scanner's texts are: their bytes 0x20..0x7E, their
 * escapes under 0x80), made without PyUnicode_DecodeASCII's check of each. */
static PyObject *ascii_text(const char *start, Py_ssize_t n) {
    PyObject *out = PyUnicode_New(n, 127);
    if (out != NULL) memcpy(PyUnicode_1BYTE_DATA(out), start, n);
    return out;
}

/* A text's value as a str (its escapes read), None when absent; NULL: an error. */
static PyObject *text_or_none(Span span) {
    if (!span.start) Py_RETURN_NONE;
    Py_ssize_t size = span.end - span.start;
    if (!memchr(span.start, '\\', size)) return ascii_text(span.start, size);
    char small[256], *buf = size <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc(size);
    if (buf == NULL) return PyErr_NoMemory();
    PyObject *out = ascii_text(buf, unescape(span, buf));
    if (buf != small) PyMem_Free(buf);
    return out;
}

/* A text many rows hold (a group, a topic, a tag) as one string for all of them, as the
   collectors keep it (analysis/rows.py `shared`): interned here, not by a Python call a
   row. NULL passes through (an error). */
static PyObject *interned(PyObject *text) {
    if (text != NULL && PyUnicode_CheckExact(text)) PyUnicode_InternInPlace(&text);
    return text;
}

/* A text many rows hold (a light send's group, topic, tags) interned, as `interned` makes
 * it, the one made last for the same place kept (`last`, one a place): the same characters
 * give that string, not decoded and looked up again. `made`: the text as a str, or NULL. */
static int same_as_last(const char *start, Py_ssize_t n, PyObject *last) {
    return last != NULL && PyUnicode_GET_LENGTH(last) == n &&
           memcmp(PyUnicode_DATA(last), start, n) == 0;
}

static PyObject *kept_last(PyObject *made, PyObject **last) {
    PyObject *text = interned(made);
    if (text != NULL && PyUnicode_CheckExact(text) && PyUnicode_IS_COMPACT_ASCII(text))
        Py_XSETREF(*last, Py_NewRef(text));
    return text;
}

/* A header text's value (text_or_none) interned, through `last`. */
static PyObject *shared_text(Span span, PyObject **last) {
    if (span.start && !memchr(span.start, '\\', span.end - span.start) &&
        same_as_last(span.start, span.end - span.start, *last))
        return Py_NewRef(*last);
    return kept_last(text_or_none(span), last);
}


/* A send's tags (n bytes, unescaped) interned, as `interned` makes them: the same string as
 * one of the last few sends' when it is theirs, not decoded and looked up again. */
static PyObject *recent_tags(const char *start, Py_ssize_t n) {
    for (int k = 0; k < RECENT; k++)
        if (same_as_last(start, n, RECENT_TAGS[k])) return Py_NewRef(RECENT_TAGS[k]);
    PyObject *text = kept_last(ascii_text(start, n), &RECENT_TAGS[RECENT_NEXT]);
    RECENT_NEXT = (RECENT_NEXT + 1) % RECENT;
    return text;
}

/* Whether an integer field's text is absent or digits alone (the scanner types those). */
static int typed_here(Span span) {
    long long v;
    return !span.start || digits_value(span, &v);
}

/* An integer field's value, its text absent (None) or digits alone (typed_here). */
static PyObject *integer_or_none(Span span) {
    long long v = 0;
    if (!span.start) Py_RETURN_NONE;
    digits_value(span, &v);
    return PyLong_FromLongLong(v);
}

/* Where a class's __slots__ keeps `name` in its instances (its member descriptor, holding
 * an object), or -1: not such a slot. */
Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    PyObject *d = _PyType_Lookup(type, name);
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return -1;
    PyMemberDef *member = ((PyMemberDescrObject *)d)->d_member;
    if (member->type != T_OBJECT_EX || (member->flags & READONLY)) return -1;
    return member->offset;
}

/* cls() for a class whose instances are made by object's own __new__ and __init__ (a plain
 * slots class: the light records), without the call's argument handling; any other called. */
static PyObject *made(PyObject *cls) {
    if (PyType_Check(cls)) {
        PyTypeObject *type = (PyTypeObject *)cls;
        if (type->tp_new == PyBaseObject_Type.tp_new && type->tp_init == PyBaseObject_Type.tp_init &&
            !(type->tp_flags & Py_TPFLAGS_IS_ABSTRACT))
            return type->tp_alloc(type, 0);
    }
    return PyObject_CallNoArgs(cls);
}

static inline int32_t i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int i16(const unsigned char *p) { return (int16_t)((uint16_t)(p[0] << 8 | p[1])); }

/* messages.plain_sizes: how many stored messages and their bodies' bytes, every one a
 * usual one (_plain_fixed's checks) and none compressed; 0 for any other body. */
static int plain_sizes(const unsigned char *body, Py_ssize_t end, long long *count,
                       long long *bytes) {
    Py_ssize_t pos = 0;
    *count = *bytes = 0;
    while (pos < end) {
        const unsigned char *m = body + pos;
        Py_ssize_t fixed_end = pos + PLAIN_FIXED;
        if (fixed_end > end) return 0;
        int32_t total = i32(m), magic = i32(m + AT_MAGIC), sys_flag = i32(m + AT_SYSFLAG),
                length = i32(m + AT_LENGTH);
        Py_ssize_t stop = pos + total;
        if ((sys_flag & V6_HOSTS) || (magic != MAGIC_V1 && magic != MAGIC_V2) ||
            !(fixed_end <= stop && stop <= end) || length < 0)
            return 0;
        Py_ssize_t at = fixed_end + length; /* the topic's length */
        if (magic == MAGIC_V1) {
            if (at + 1 > stop) return 0;
            at += 1 + body[at];
        } else {
            if (at + 2 > stop) return 0;
            int topic_length = i16(body + at);
            if (topic_length < 0) return 0;
            at += 2 + topic_length;
        }
        if (at + 2 > stop || at + 2 + i16(body + at) != stop) return 0;
        if (sys_flag & SYSFLAG_COMPRESSED) return 0;
        *count += 1;
        *bytes += length;
        pos = stop;
    }
    return 1;
}

/* (shared with _native_runs.c: _native.h) */
PyObject *N_FRAME, *N_OPAQUE, *N_GROUP, *N_TOPIC, *N_QUEUE_ID, *N_MSG_ID, *N_TAGS,
    *N_KEYS, *N_WIRE, *N_CODE, *N_REMARK, *N_REQUEST_CODE, *N_QUEUE_OFFSET, *N_MESSAGES, *N_BYTES,
    *N_NEXT, *N_MIN, *N_MAX, *N_OFFSET, *N_BROKER;
/* A light pull request's `fields` slot, and its fields' names (PULL_FIELDS' order). */
static PyObject *N_FIELDS, *N_CONSUMER_GROUP, *N_QUEUE_ID_FIELD,
    *N_QUEUE_OFFSET_FIELD, *N_MAX_NUMS, *N_SYSFLAG, *N_COMMIT, *N_SUSPEND;
static PyObject *const *PULL_NAMES[PULL_FIELD_COUNT] = {
    &N_CONSUMER_GROUP, &N_TOPIC, &N_QUEUE_ID_FIELD, &N_QUEUE_OFFSET_FIELD, &N_MAX_NUMS,
    &N_SYSFLAG, &N_COMMIT, &N_SUSPEND};

/* The light records' fields, by the names above (F_* indexes FIELD_NAMES). */
enum { F_FRAME, F_OPAQUE, F_GROUP, F_TOPIC, F_QUEUE_ID, F_MSG_ID, F_TAGS, F_KEYS, F_WIRE,
       F_CODE, F_REMARK, F_REQUEST_CODE, F_QUEUE_OFFSET, F_MESSAGES, F_BYTES, F_NEXT, F_MIN,
       F_MAX, F_OFFSET, F_BROKER, F_FIELDS, F_COUNT };
static PyObject *const *FIELD_NAMES[F_COUNT] = {
    &N_FRAME, &N_OPAQUE, &N_GROUP, &N_TOPIC, &N_QUEUE_ID, &N_MSG_ID, &N_TAGS, &N_KEYS, &N_WIRE,
    &N_CODE, &N_REMARK, &N_REQUEST_CODE, &N_QUEUE_OFFSET, &N_MESSAGES, &N_BYTES, &N_NEXT,
    &N_MIN, &N_MAX, &N_OFFSET, &N_BROKER, &N_FIELDS};

/* A light record class of a hot_records call and where its instances keep each field
 * (slot_offset; -1: set by its name), looked up once (kept_lights), not at each field set. */
typedef struct {
    PyObject *cls;
    PyTypeObject *type; /* (NULL: cls is no class) */
    unsigned int tag;   /* (its version tag then: a class changed since has another, or 0) */
    Py_ssize_t at[F_COUNT];
} Light;

static void light_of(Light *l, PyObject *cls) {
    l->cls = cls;
    l->type = PyType_Check(cls) ? (PyTypeObject *)cls : NULL;
    for (int k = 0; k < F_COUNT; k++)
        l->at[k] = l->type == NULL ? -1 : slot_offset(l->type, *FIELD_NAMES[k]);
    l->tag = l->type == NULL ? 0 : l->type->tp_version_tag;
}

/* The four light classes' Lights (send, answer, pulled, pull) as the last call's, kept
 * while each is the same class unchanged (its version tag: the slots looked up again
 * otherwise; the class held meanwhile). */
static Light LIGHTS[4];

static const Light *kept_lights(PyObject *const *classes) {
    for (int k = 0; k < 4; k++) {
        Light *l = &LIGHTS[k];
        if (l->cls == classes[k] && l->tag && l->type->tp_version_tag == l->tag) continue;
        PyObject *old = l->cls;
        light_of(l, Py_NewRef(classes[k]));
        Py_XDECREF(old);
    }
    return LIGHTS;
}

/* obj.field = value (its reference taken; NULL: an error passed on), obj made for `l`. A
 * slot is written as its member descriptor writes it (PyMember_SetOne), without the
 * generic lookup's calls; an instance of another type (cls() made it) set by the name. */
static ALWAYS_INLINE int put(PyObject *obj, const Light *l, int field, PyObject *value) {
    if (value == NULL) return -1;
    Py_ssize_t at = Py_TYPE(obj) == l->type && l->tag && l->type->tp_version_tag == l->tag
                        ? l->at[field]
                        : -1;
    if (at < 0) {
        int r = PyObject_SetAttr(obj, *FIELD_NAMES[field], value);
        Py_DECREF(value);
        return r;
    }
    PyObject **slot = (PyObject **)((char *)obj + at), *old = *slot;
    *slot = value;
    Py_XDECREF(old);
    return 0;
}

/* A property's place among a send's values read (UNIQ_KEY, TAGS, KEYS), or -1. */
static inline int property_of(const char *name, Py_ssize_t n) {
    return n == 8 && SAME(name, "UNIQ_KEY") ? 0
           : n == 4 && SAME(name, "TAGS")   ? 1
           : n == 4 && SAME(name, "KEYS")   ? 2
                                            : -1;
}

/* wire.parse_properties' items (name \x01 value, each ended by \x02) of the unescaped text
 * [item, end): the last UNIQ_KEY's, TAGS' and KEYS' values, into found[]. */
static void properties_found(const char *item, const char *end, Span found[3]) {
    for (;;) {
        const char *stop = memchr(item, '\x02', end - item);
        if (stop == NULL) stop = end;
        const char *sep = memchr(item, '\x01', stop - item);
        if (sep != NULL) {
            int k = property_of(item, sep - item);
            if (k >= 0) found[k] = (Span){sep + 1, stop};
        }
        if (stop == end) break;
        item = stop + 1;
    }
}

/* properties_found read straight from the header's text (no copy unescaped), when its only
 * escapes are the separators, \u0001 and \u0002, and no item has a second \u0001 (a value
 * with an escape in it); 0: another text (read from its unescaped copy). */
static int separated_properties(Span span, Span found[3]) {
    const char *item = span.start, *sep = NULL, *s = item, *end = span.end;
    for (;;) {
        const char *e = memchr(s, '\\', end - s), *stop;
        if (e == NULL) {
            stop = end;
        } else {
            /* (the scanner read each escape whole: \u00XX within the text) */
            if (e[1] != 'u' || e[2] != '0' || e[3] != '0' || e[4] != '0') return 0;
            if (e[5] == '1') {
                if (sep != NULL) return 0;
                sep = e;
                s = e + 6;
                continue;
            }
            if (e[5] != '2') return 0;
            stop = e;
        }
        if (sep != NULL) {
            int k = property_of(item, sep - item);
            if (k >= 0) found[k] = (Span){sep + 6, stop};
        }
        if (stop == end) return 1;
        item = s = stop + 6, sep = NULL;
    }
}

/* A send's properties (name \x01 value items, each ended by \x02, wire.parse_properties):
 * the last UNIQ_KEY's, TAGS' and KEYS' values found in its unescaped text. */
static int send_properties(PyObject *send, const Light *l, Span span) {
    Span found[3] = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}};
    char small[512], *buf = small;
    if (span.start && !separated_properties(span, found)) {
        Py_ssize_t size = span.end - span.start;
        for (int k = 0; k < 3; k++) found[k] = (Span){NULL, NULL}; /* (any it noted) */
        if (size > (Py_ssize_t)sizeof(small) && (buf = PyMem_Malloc(size)) == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        properties_found(buf, buf + unescape(span, buf), found);
    }
    int r = 0;
    PyObject *values[3];
    for (int k = 0; k < 3; k++) {
        if (found[k].start == NULL || (k == 0 && found[k].start == found[k].end))
            values[k] = Py_NewRef(Py_None); /* (msg_id: an empty UNIQ_KEY is None) */
        else if (k == 1)
            values[k] = recent_tags(found[k].start, found[k].end - found[k].start);
        else
            values[k] = ascii_text(found[k].start, found[k].end - found[k].start);
    }
    if (buf != small) PyMem_Free(buf);
    if (put(send, l, F_MSG_ID, values[0]) < 0) r = -1;
    if (put(send, l, F_TAGS, values[1]) < 0) r = -1;
    if (put(send, l, F_KEYS, values[2]) < 0) r = -1;
    return r;
}

/* A response's fields every light response has (HotAnswer's); -1: an error. */
static int answer_fields(PyObject *out, const Light *l, PyObject *frame, Header *h) {
    return put(out, l, F_QUEUE_ID, integer_or_none(h->ext[E_QUEUEID])) < 0 ||
                   put(out, l, F_QUEUE_OFFSET, integer_or_none(h->ext[E_QUEUEOFFSET])) < 0 ||
                   put(out, l, F_CODE, PyLong_FromLongLong(h->code)) < 0 ||
                   put(out, l, F_OPAQUE, PyLong_FromLongLong(h->opaque)) < 0 ||
                   put(out, l, F_REMARK, text_or_none(h->remark)) < 0 ||
                   put(out, l, F_REQUEST_CODE, Py_NewRef(Py_None)) < 0 ||
                   put(out, l, F_FRAME, Py_NewRef(frame)) < 0 ||
                   put(out, l, F_MSG_ID, text_or_none(h->ext[E_MSGID])) < 0
               ? -1
               : 0;
}

/* A pull response's light record (hot._pulled), None (declined) or NULL (an error). */
static PyObject *pulled(PyObject *frame, Py_ssize_t length, Header *h, const Light *l) {
    static const int keys[5] = {E_NEXT, E_MIN, E_MAX, E_OFFSET, E_BROKER};
    static const int names[5] = {F_NEXT, F_MIN, F_MAX, F_OFFSET, F_BROKER};
    long long count, bytes;
    for (int k = 0; k < 5; k++)
        if (!typed_here(h->ext[keys[k]])) Py_RETURN_NONE;
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(frame);
    if (!plain_sizes(data + 8 + length, PyBytes_GET_SIZE(frame) - 8 - length, &count, &bytes))
        Py_RETURN_NONE;
    PyObject *out = made(l->cls);
    if (out == NULL || answer_fields(out, l, frame, h) < 0 ||
        put(out, l, F_MESSAGES, PyLong_FromLongLong(count)) < 0 ||
        put(out, l, F_BYTES, PyLong_FromLongLong(bytes)) < 0)
        goto error;
    for (int k = 0; k < 5; k++)
        if (put(out, l, names[k], integer_or_none(h->ext[keys[k]])) < 0) goto error;
    return out;
error:
    Py_XDECREF(out);
    return NULL;
}

/* A pull request's light record (hot._pull): no body, its integer fields digits alone;
 * None (declined) or NULL (an error). */
static PyObject *pull(PyObject *frame, Py_ssize_t length, Header *h, const Light *l) {
    if (length != PyBytes_GET_SIZE(frame) - 8) Py_RETURN_NONE;
    for (int k = 0; k < PULL_FIELD_COUNT; k++)
        if (PULL_FIELDS[k].integer && !typed_here(h->ext[PULL_FIELDS[k].key])) Py_RETURN_NONE;
    PyObject *fields = PyDict_New(), *out = NULL;
    if (fields == NULL) return NULL;
    for (int k = 0; k < PULL_FIELD_COUNT; k++) {
        Span span = h->ext[PULL_FIELDS[k].key];
        if (!span.start) continue;
        PyObject *value = PULL_FIELDS[k].integer ? integer_or_none(span) : text_or_none(span);
        if (value == NULL || PyDict_SetItem(fields, *PULL_NAMES[k], value) < 0) {
            Py_XDECREF(value);
            goto error;
        }
        Py_DECREF(value);
    }
    out = made(l->cls);
    if (out == NULL || put(out, l, F_OPAQUE, PyLong_FromLongLong(h->opaque)) < 0 ||
        put(out, l, F_FRAME, Py_NewRef(frame)) < 0 || put(out, l, F_FIELDS, Py_NewRef(fields)) < 0)
        goto error;
    Py_DECREF(fields);
    return out;
error:
    Py_XDECREF(out);
    Py_DECREF(fields);
    return NULL;
}

/* The frame's light record, None (declined) or NULL (an error). */
static PyObject *record(PyObject *frame, const Light *light) {
    const Light *send = &light[0], *answer = &light[1];
    const char *data = PyBytes_AS_STRING(frame);
    Py_ssize_t size = PyBytes_GET_SIZE(frame);
    Header h;
    if (size < 10 || (unsigned char)data[4] != JSON_SERIALIZE) Py_RETURN_NONE;
    Py_ssize_t length = ((unsigned char)data[5] << 16) | ((unsigned char)data[6] << 8) |
                        (unsigned char)data[7];
    if (length > size - 8 || !scan(data + 8, data + 8 + length, &h)) Py_RETURN_NONE;
    PyObject *out;
    if (h.flag == RESPONSE_FLAG) {
        if (!typed_here(h.ext[E_QUEUEID]) || !typed_here(h.ext[E_QUEUEOFFSET])) Py_RETURN_NONE;
        if (h.code == 0 && h.ext[E_NEXT].start && h.ext[E_MIN].start && h.ext[E_MAX].start)
            return pulled(frame, length, &h, &light[2]);
        out = made(answer->cls);
        if (out == NULL || answer_fields(out, answer, frame, &h) < 0) {
            Py_XDECREF(out);
            return NULL;
        }
        return out;
    }
    if (h.flag == 0 && h.code == PULL_CODE) return pull(frame, length, &h, &light[3]);
    if (h.flag != 0 || h.code != SEND_V2_CODE) Py_RETURN_NONE;
    long long sysflag = 0;
    if (h.ext[E_SYSFLAG].start && (!digits_value(h.ext[E_SYSFLAG], &sysflag) || sysflag))
        Py_RETURN_NONE; /* (a compressed message, or a text the Python path types) */
    if (!typed_here(h.ext[E_QUEUE])) Py_RETURN_NONE;
    out = made(send->cls);
    if (out == NULL || put(out, send, F_QUEUE_ID, integer_or_none(h.ext[E_QUEUE])) < 0 ||
        put(out, send, F_OPAQUE, PyLong_FromLongLong(h.opaque)) < 0 ||
        put(out, send, F_FRAME, Py_NewRef(frame)) < 0 ||
        put(out, send, F_GROUP, shared_text(h.ext[E_GROUP], &LAST_GROUP)) < 0 ||
        put(out, send, F_TOPIC, shared_text(h.ext[E_TOPIC], &LAST_TOPIC)) < 0 ||
        put(out, send, F_WIRE, PyLong_FromSsize_t(size - 8 - length)) < 0 ||
        send_properties(out, send, h.ext[E_PROPERTIES]) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *hot_records(PyObject *self, PyObject *args) {
    PyObject *frames, *classes[4];
    if (!PyArg_ParseTuple(args, "O!OOOO", &PyList_Type, &frames, &classes[0], &classes[1],
                          &classes[2], &classes[3]))
        return NULL;
    const Light *light = kept_lights(classes);
    Py_ssize_t n = PyList_GET_SIZE(frames);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *frame = PyList_GET_ITEM(frames, k), *r;
        if (!PyBytes_CheckExact(frame)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "hot_records: frames are bytes");
            return NULL;
        }
        r = record(frame, light);
        if (r == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, r);
    }
    return out;
}

/* Deferred frames' items packed, 8 int64 each (start, end, size, ts, row, slot, at,
 * seg_end: json_run's, an array('q')), held for the call; how many in `*n`. */
static int packed(PyObject *obj, Py_buffer *view, Py_ssize_t *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (view->itemsize != 8 || view->format == NULL || strcmp(view->format, "q") != 0 ||
        view->len % (8 * 8) != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "deferred frames: an array('q'), 8 items a frame");
        return -1;
    }
    *n = view->len / (8 * 8);
    return 0;
}

/* (mv, items, read[, so, lo, po]) -> each deferred frame's bytes (items packed):
 * mv[at : at + end - start] when it ends in its segment (a slice, clamped to the buffer as
 * Python's is), else read(start, end), or, given the segments' arrays (read's, InOrder's),
 * the frame joined from them as read joins it (joined_frame; read where it declines). */
static PyObject *frames_of(PyObject *self, PyObject *args) {
    PyObject *mv, *items, *read, *so = NULL, *lo = NULL, *po = NULL, *out = NULL;
    Py_buffer view, iv;
    Held hs = {0}, hl = {0}, hp = {0};
    Py_ssize_t n, segments = 0;
    if (!PyArg_ParseTuple(args, "OOO|OOO", &mv, &items, &read, &so, &lo, &po)) return NULL;
    if (packed(items, &iv, &n) < 0) return NULL;
    if (PyObject_GetBuffer(mv, &view, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&iv);
        return NULL;
    }
    if (po != NULL) {
        if (hold(so, &hs, 8) < 0 || hold(lo, &hl, 8) < 0 || hold(po, &hp, 8) < 0) goto error;
        segments = hs.view.len / 8;
        if (hl.view.len / 8 != segments || hp.view.len / 8 != segments) {
            PyErr_SetString(PyExc_ValueError, "frames_of: segment arrays of one length expected");
            goto error;
        }
    }
    out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        const int64_t *item = (const int64_t *)iv.buf + 8 * k;
        long long start = item[0], end = item[1], at = item[6], seg_end = item[7];
        PyObject *frame = NULL;
        if (end <= seg_end && at >= 0 && end >= start) {
            long long lo = at < view.len ? at : view.len, hi = at + (end - start);
            hi = hi < view.len ? hi : view.len;
            frame = PyBytes_FromStringAndSize((const char *)view.buf + lo, hi - lo);
        } else {
            if (segments > 0)
                frame = joined_frame(view.buf, view.len, hs.view.buf, hl.view.buf, hp.view.buf,
                                     segments, start, end);
            if (frame == NULL && !PyErr_Occurred())
                frame = PyObject_CallFunction(read, "LL", start, end);
        }
        if (frame == NULL) goto error;
        PyList_SET_ITEM(out, k, frame);
    }
    goto done;
error:
    Py_CLEAR(out);
done:
    release(&hs);
    release(&hl);
    release(&hp);
    PyBuffer_Release(&view);
    PyBuffer_Release(&iv);
    return out;
}

/* (records, items, make, connection, direction, slots) -> the indices of the frames left
 * (records[k] None): each light record's event, make(ts, connection, direction, start,
 * record), put in its slot as (row, slot, event), as plain_walk's _read puts it (items
 * packed, frames_of's). */
static PyObject *place(PyObject *self, PyObject *args) {
    PyObject *records, *items, *make, *connection, *direction, *slots;
    Py_buffer iv;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!OOOOO!", &PyList_Type, &records, &items, &make,
                          &connection, &direction, &PyList_Type, &slots))
        return NULL;
    if (packed(items, &iv, &n) < 0) return NULL;
    PyObject *left = NULL;
    if (PyList_GET_SIZE(records) != n) {
        PyErr_SetString(PyExc_ValueError, "place: a record (or None) a deferred frame");
        goto error;
    }
    left = PyList_New(0);
    for (Py_ssize_t k = 0; left != NULL && k < n; k++) {
        PyObject *record = PyList_GET_ITEM(records, k), *index, *event, *placed;
        if (record == Py_None) {
            if ((index = PyLong_FromSsize_t(k)) == NULL || PyList_Append(left, index) < 0) {
                Py_XDECREF(index);
                goto error;
            }
            Py_DECREF(index);
            continue;
        }
        const int64_t *item = (const int64_t *)iv.buf + 8 * k;
        if (item[5] < 0 || item[5] >= PyList_GET_SIZE(slots)) {
            PyErr_SetString(PyExc_IndexError, "place: a slot outside the block's events");
            goto error;
        }
        PyObject *ts = PyLong_FromLongLong(item[3]), *start = PyLong_FromLongLong(item[0]);
        PyObject *row = PyLong_FromLongLong(item[4]), *slot = PyLong_FromLongLong(item[5]);
        event = placed = NULL;
        if (ts != NULL && start != NULL && row != NULL && slot != NULL) {
            PyObject *call[5] = {ts, connection, direction, start, record};
            event = event_of(make, call);
        }
        if (event != NULL && (placed = PyTuple_New(3)) != NULL) { /* (their references) */
            PyTuple_SET_ITEM(placed, 0, row);
            PyTuple_SET_ITEM(placed, 1, slot);
            PyTuple_SET_ITEM(placed, 2, event);
            row = slot = event = NULL;
        }
        Py_XDECREF(ts);
        Py_XDECREF(start);
        Py_XDECREF(row);
        Py_XDECREF(slot);
        Py_XDECREF(event);
        if (placed == NULL) goto error;
        PyObject *old = PyList_GET_ITEM(slots, item[5]);
        PyList_SET_ITEM(slots, item[5], placed);
        Py_XDECREF(old);
    }
    PyBuffer_Release(&iv);
    return left;
error:
    Py_XDECREF(left);
    PyBuffer_Release(&iv);
    return NULL;
}

static PyMethodDef methods[] = {
    {"send_run", send_run, METH_VARARGS, "send_runs._frames, compiled."},
    {"named", named, METH_VARARGS, "A connection's block named in time order (plain_walk)."},
    {"in_time_order", in_time_order, METH_VARARGS, "A block's items sorted (plain_walk)."},
    {"joined", joined, METH_VARARGS, "A block's runs of light sends and answers joined."},
    {"frames_of", frames_of, METH_VARARGS, "Deferred frames' bytes (plain_walk._read)."},
    {"place", place, METH_VARARGS, "Light records' events in their slots (plain_walk._read)."},
    {"plain_event", plain_event, METH_O, "The frame event class place makes by its slots."},
    {"self_events", self_events, METH_VARARGS, "The light records place makes their own events."},
    {"json_run", json_run, METH_VARARGS, "A run of deferred JSON frames walked (walk._frames)."},
    {"hot_records", hot_records, METH_VARARGS,
     "Each frame's light record (HotSend, HotAnswer, HotPulled, HotPull) or None (hot_record's way)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "RocketMQ's hot frames read for the analyses, compiled.",
    -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
#define NAME(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    NAME(N_FRAME, "frame") NAME(N_OPAQUE, "opaque") NAME(N_GROUP, "group")
    NAME(N_TOPIC, "topic") NAME(N_QUEUE_ID, "queue_id") NAME(N_MSG_ID, "msg_id")
    NAME(N_TAGS, "tags") NAME(N_KEYS, "keys") NAME(N_WIRE, "wire") NAME(N_CODE, "code")
    NAME(N_REMARK, "remark") NAME(N_REQUEST_CODE, "request_code")
    NAME(N_QUEUE_OFFSET, "queue_offset") NAME(N_MESSAGES, "messages") NAME(N_BYTES, "bytes")
    NAME(N_NEXT, "next_begin_offset") NAME(N_MIN, "min_offset") NAME(N_MAX, "max_offset")
    NAME(N_OFFSET, "offset") NAME(N_BROKER, "suggested_broker_id")
    NAME(N_FIELDS, "fields") NAME(N_CONSUMER_GROUP, "consumerGroup")
    NAME(N_QUEUE_ID_FIELD, "queueId")
    NAME(N_QUEUE_OFFSET_FIELD, "queueOffset") NAME(N_MAX_NUMS, "maxMsgNums")
    NAME(N_SYSFLAG, "sysFlag") NAME(N_COMMIT, "commitOffset")
    NAME(N_SUSPEND, "suspendTimeoutMillis")
#undef NAME
    if (runs_names() < 0 || naming_names() < 0) return NULL;
    text_classes();
    return PyModule_Create(&module);
}
