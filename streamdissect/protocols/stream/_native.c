/* The RabbitMQ Stream fast path's hottest loops, compiled (optional: native.py loads it,
 * the pure-Python code in hot_walk.py and hot.py is the fallback and the reference).
 *
 * hot_run: HotWalk.run's walk over one direction's in-order segments of a block, a frame
 * at a time, noting the hot frames' stream offsets and segments.
 * hot_decode: hot.decode's gathers and checks, every frame's head read once.
 * copy_ranges: HotBlock._patch's copies of the frames that cross segments.
 *
 * Every input is checked: segment arrays of one length, buffer positions inside the buffer
 * (a ValueError otherwise, where the Python code's struct read would raise); the notes grow
 * with the frames found, at least 8 bytes each, so never beyond the bytes present.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define HEADER 8 /* a frame's size (u32), key (u16), version (u16) */
/* hot_decode asks for the heads of the frame PREFETCH places ahead (its first two cache
 * lines): the block was written by the helper process, so each head is a cache miss, and
 * the frames' positions are known in advance (0.024 -> 0.016 s of CPU on the small-frame
 * benchmark capture) */
#define PREFETCH 16
#define PREFETCH_BYTES 128

typedef struct {
    Py_buffer view;
    int held;
} Held;

static void release(Held *h) {
    if (h->held) {
        PyBuffer_Release(&h->view);
        h->held = 0;
    }
}

/* A buffer of `itemsize`-byte items (format checked when given), C-contiguous. */
static int hold(PyObject *obj, Held *h, Py_ssize_t itemsize, const char *name, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &h->view, flags) < 0)
        return -1;
    h->held = 1;
    if (itemsize > 0 && (h->view.itemsize != itemsize || h->view.len % itemsize != 0)) {
        PyErr_Format(PyExc_ValueError, "%s: items of %zd bytes expected", name, itemsize);
        release(h);
        return -1;
    }
    return 0;
}

/* A growing array of int64 (the notes). */
typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} Ints;

static inline int push(Ints *a, int64_t x) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? a->cap * 2 : 256;
        int64_t *v = PyMem_Realloc(a->v, (size_t)cap * sizeof(int64_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static PyObject *ints_bytes(Ints *a) {
    return PyBytes_FromStringAndSize((const char *)a->v, a->n * (Py_ssize_t)sizeof(int64_t));
}

static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

/* The segments of a walk: stream offsets, lengths, buffer positions. */
typedef struct {
    const int64_t *so, *lo, *po;
    Py_ssize_t n;
    const uint8_t *buf;
    Py_ssize_t buflen;
} Segs;

/* bisect.bisect_right(so, x, lo) */
static Py_ssize_t bisect_right(const Segs *s, int64_t x, Py_ssize_t lo) {
    Py_ssize_t hi = s->n;
    if (lo < 0)
        lo = 0;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < s->so[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Bytes [at, at + n) of the buffer, or NULL (a ValueError set). */
static const uint8_t *at_buffer(const Segs *s, int64_t at, int64_t n) {
    if (at < 0 || n < 0 || at > s->buflen - n) {
        PyErr_SetString(PyExc_ValueError, "a segment's bytes outside the block buffer");
        return NULL;
    }
    return s->buf + at;
}

/* The stream bytes [a, a + n) into out, segment by segment as InOrder.read does (out may
 * be in the same buffer, not overlapping them). */
static int read_stream(const Segs *s, int64_t a, int64_t n, uint8_t *out) {
    Py_ssize_t j = bisect_right(s, a, 0) - 1;
    while (n > 0) {
        if (j < 0 || j >= s->n) {
            PyErr_SetString(PyExc_ValueError, "stream bytes outside the segments");
            return -1;
        }
        int64_t within = a - s->so[j];
        int64_t take = s->lo[j] - within;
        if (within < 0 || take <= 0) {
            PyErr_SetString(PyExc_ValueError, "stream bytes outside the segments");
            return -1;
        }
        if (take > n)
            take = n;
        const uint8_t *src = at_buffer(s, s->po[j] + within, take);
        if (src == NULL)
            return -1;
        memmove(out, src, (size_t)take);
        out += take;
        a += take;
        n -= take;
        j++;
    }
    return 0;
}

static int segs_of(Segs *s, Held *so, Held *lo, Held *po, Held *buf) {
    s->n = so->view.len / 8;
    if (lo->view.len / 8 != s->n || po->view.len / 8 != s->n || s->n == 0) {
        PyErr_SetString(PyExc_ValueError, "segment arrays of different lengths, or none");
        return -1;
    }
    s->so = so->view.buf;
    s->lo = lo->view.buf;
    s->po = po->view.buf;
    s->buf = buf->view.buf;
    s->buflen = buf->view.len;
    return 0;
}

/* hot_run(buf, so, lo, po, heads, send, pos, j, hot, low, limit) -> (end, starts, segs, big)
 *
 * From stream offset `pos` (in or after segment j), the hot frames one after the other:
 * a frame whose key is hot (hot: 65,536 bytes, one a key, nonzero when hot), whole before
 * `send`, 4 <= size <= low; or, within the frame limit (size <= limit), one above `low`
 * (its index in `big`). `heads`: each segment's first 8 bytes as the packet parser read them
 * (packet_columns.Parsed.phead): a frame at a segment's start is read there, not from the
 * block, whose bytes are a cache miss away (hot_block reads them once, at the block's end).
 * `starts` and `segs` (int64 bytes): each frame's stream offset and the segment it starts
 * in. `end`: where the first other frame (or the stream) starts. */
static PyObject *hot_run(PyObject *self, PyObject *args) {
    PyObject *obuf, *oso, *olo, *opo, *oheads, *ohot;
    long long send, pos, jj, low, limit;
    if (!PyArg_ParseTuple(args, "OOOOOLLLOLL", &obuf, &oso, &olo, &opo, &oheads, &send, &pos,
                          &jj, &ohot, &low, &limit))
        return NULL;
    Held buf = {0}, so = {0}, lo = {0}, po = {0}, heads = {0}, hot = {0};
    Ints starts = {0}, segs = {0};
    PyObject *big = NULL, *result = NULL;
    if (hold(obuf, &buf, 0, "buf", 0) < 0 || hold(oso, &so, 8, "so", 0) < 0 ||
        hold(olo, &lo, 8, "lo", 0) < 0 || hold(opo, &po, 8, "po", 0) < 0 ||
        hold(oheads, &heads, 8, "heads", 0) < 0 || hold(ohot, &hot, 0, "hot", 0) < 0)
        goto done;
    Segs s;
    if (segs_of(&s, &so, &lo, &po, &buf) < 0)
        goto done;
    if (heads.view.len != s.n * HEADER) {
        PyErr_SetString(PyExc_ValueError, "heads: one a segment expected");
        goto done;
    }
    const uint8_t *seg_heads = heads.view.buf;
    if (hot.view.len != 65536) {
        PyErr_SetString(PyExc_ValueError, "hot: one byte a key expected");
        goto done;
    }
    if (jj < 0 || jj >= s.n) {
        PyErr_SetString(PyExc_ValueError, "segment number out of range");
        goto done;
    }
    big = PyList_New(0);
    if (big == NULL)
        goto done;
    const uint8_t *is_hot = hot.view.buf;
    Py_ssize_t last = s.n - 1, j = (Py_ssize_t)jj;
    int64_t p = pos, seg_end = s.so[j] + s.lo[j], shift = s.po[j] - s.so[j];
    uint8_t header[HEADER];
    for (;;) {
        const uint8_t *h;
        if (p == s.so[j] && p + HEADER <= seg_end) {
            h = seg_heads + j * HEADER;
        } else if (p + HEADER <= seg_end) {
            h = at_buffer(&s, shift + p, HEADER);
            if (h == NULL)
                goto done;
        } else if (p + HEADER > send) {
            break;
        } else if (p >= seg_end) { /* the next segment (they follow each other) */
            j = (p == seg_end && j < last) ? j + 1 : bisect_right(&s, p, j) - 1;
            if (j < 0 || j >= s.n) {
                PyErr_SetString(PyExc_ValueError, "stream offset outside the segments");
                goto done;
            }
            seg_end = s.so[j] + s.lo[j];
            shift = s.po[j] - s.so[j];
            if (p < s.so[j] || p >= seg_end) { /* (in-order segments leave no gap) */
                PyErr_SetString(PyExc_ValueError, "stream offset outside the segments");
                goto done;
            }
            continue;
        } else { /* a header across two segments */
            if (read_stream(&s, p, HEADER, header) < 0)
                goto done;
            h = header;
        }
        int64_t size = be32(h);
        unsigned key = be16(h + 4);
        int64_t end = p + 4 + size;
        if (!is_hot[key] || size < 4 || end > send || size > limit)
            break;
        if (size > low) { /* within this limit; LimitCheck learns of it */
            PyObject *index = PyLong_FromSsize_t(starts.n);
            if (index == NULL || PyList_Append(big, index) < 0) {
                Py_XDECREF(index);
                goto done;
            }
            Py_DECREF(index);
        }
        if (push(&starts, p) < 0 || push(&segs, j) < 0)
            goto done;
        p = end;
    }
    PyObject *b1 = ints_bytes(&starts), *b2 = ints_bytes(&segs);
    if (b1 != NULL && b2 != NULL)
        result = Py_BuildValue("LNNO", (long long)p, b1, b2, big);
    else {
        Py_XDECREF(b1);
        Py_XDECREF(b2);
    }
done:
    Py_XDECREF(big);
    PyMem_Free(starts.v);
    PyMem_Free(segs.v);
    release(&buf);
    release(&so);
    release(&lo);
    release(&po);
    release(&heads);
    release(&hot);
    return result;
}


/* --- hot_decode: hot.decode's per-frame gathers and checks ------------------------------ */

/* The plan (hot_native.plan, from the protocol table's layouts), int64 words: */
enum {
    P_HEARTBEAT, P_CREDIT, P_CONFIRM, P_PUBLISH, P_DELIVER, /* the kinds' keys */
    P_CREDIT_SIZE,                                         /* a Credit's size field */
    P_CONFIRM_COUNT, P_FIRST_ID, P_ID_WIDTH,               /* a PublishConfirm's */
    P_PUBLISH_HEAD, P_PUBLISH_COUNT, P_PUBLISH_WORD,       /* a v1 Publish's */
    P_MESSAGE, P_MESSAGE_ID, P_MESSAGE_WORD,               /* one of its messages' */
    P_DELIVERS,                                            /* Deliver versions that follow */
    P_FIXED
};
/* per Deliver version: version, need, magic, entries (offset, width), records (offset,
 * width), data_length, crc; then the field lists (credit, confirm, publish, each Deliver
 * version): a count, then (column, offset, width, signed, shift, or) each */
#define DELIVER_WORDS 9
#define FIELD_WORDS 6

typedef struct {
    const uint8_t *data;
    Py_ssize_t len;
} Data;

/* A big-endian integer of `width` bytes at `at`, sign-extended when `is_signed`. */
static inline uint64_t read_int(const uint8_t *at, int64_t width, int64_t is_signed) {
    uint64_t v;
    switch (width) {
    case 1:
        return is_signed ? (uint64_t)(int64_t)(int8_t)at[0] : at[0];
    case 2:
        return is_signed ? (uint64_t)(int64_t)(int16_t)be16(at) : be16(at);
    case 4:
        return is_signed ? (uint64_t)(int64_t)(int32_t)be32(at) : be32(at);
    case 8:
        return ((uint64_t)be32(at) << 32) | be32(at + 4);
    }
    v = 0;
    for (int64_t i = 0; i < width; i++)
        v = (v << 8) | at[i];
    if (is_signed && width < 8 && (v >> (8 * width - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * width);
    return v;
}

/* Are bytes [at, at + n) in the data? */
static inline int inside(const Data *d, int64_t at, int64_t n) {
    return at >= 0 && n >= 0 && at <= d->len - n;
}

typedef struct {
    Held values, valid;
} Column;

/* The fields of a field list (checked_lists: inside the head) put for frame `row`. */
static inline void put_fields(const int64_t *list, Column *cols, Py_ssize_t row,
                              const uint8_t *h) {
    int64_t count = list[0];
    const int64_t *f = list + 1;
    for (int64_t i = 0; i < count; i++, f += FIELD_WORDS) {
        uint64_t v = read_int(h + f[1], f[2], f[3]) << f[4];
        uint64_t *values = cols[f[0]].values.view.buf;
        ((uint8_t *)cols[f[0]].valid.view.buf)[row] = 1;
        values[row] = f[5] ? (values[row] | v) : v;
    }
}

/* The field lists' words from `at` on: where each starts (nlists of them), each field
 * inside its kind's head (heads[i] bytes) and of a column there is. */
static int checked_lists(const int64_t *plan, Py_ssize_t words, Py_ssize_t at,
                         const int64_t **lists, const int64_t *heads, int nlists,
                         Py_ssize_t ncols) {
    for (int i = 0; i < nlists; i++) {
        if (at >= words || plan[at] < 0 || plan[at] > 64 ||
            at + 1 + plan[at] * FIELD_WORDS > words) {
            PyErr_SetString(PyExc_ValueError, "a plan cut short");
            return -1;
        }
        lists[i] = plan + at;
        const int64_t *f = plan + at + 1;
        for (int64_t k = 0; k < plan[at]; k++, f += FIELD_WORDS)
            if (f[0] < 0 || f[0] >= ncols || f[1] < 0 || f[2] < 1 || f[2] > 8 ||
                f[1] + f[2] > heads[i] || f[4] < 0 || f[4] > 56) {
                PyErr_SetString(PyExc_ValueError, "a field outside its head, or no such column");
                return -1;
            }
        at += 1 + plan[at] * FIELD_WORDS;
    }
    return 0;
}

/* The message positions given for a Publish (row) that crosses segments, or NULL. */
static const int64_t *given_messages(const int64_t *rows, const int64_t *counts,
                                     const int64_t *firsts, Py_ssize_t n, int64_t row,
                                     int64_t count) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (rows[mid] < row)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && rows[lo] == row && counts[lo] == count)
        return firsts + lo;
    return NULL;
}

static PyObject *pool(Ints *a) {
    return PyByteArray_FromStringAndSize((const char *)a->v, a->n * (Py_ssize_t)sizeof(int64_t));
}

/* hot_decode(data, starts, plan, columns, key, version, size, accepted, id_counts, id_starts,
 *            crc_limit, message_rows, message_counts, message_starts, message_at)
 *     -> (id_values, crc_checks)
 *
 * hot.decode for the frames whose heads are at `starts` in `data`: their header (key,
 * version, size: int64), `accepted` (bool), the fields of each kind into `columns` (a list
 * of (values, valid): 8-byte and 1-byte items, zeroed), the publishing ids of PublishConfirm
 * and Publish frames (id_counts, filled with -1; id_starts, zeroed) in one pool (bytes of
 * uint64: the PublishConfirms' in frame order, then the Publishes'). `message_*`: the Publish
 * frames (sorted rows) whose messages are elsewhere: their counts, where their positions
 * start in message_at. `crc_checks` (int64 quads): row, data start, length, header CRC of
 * each Deliver whose chunk CRC is to be checked (size <= crc_limit): the caller computes it.
 * A frame whose bytes would be outside the data is declined (the record path explains it). */
static PyObject *hot_decode(PyObject *self, PyObject *args) {
    PyObject *odata, *ostarts, *oplan, *ocolumns, *okey, *oversion, *osize, *oaccepted, *ocounts,
        *oidstarts, *omrows, *omcounts, *omstarts, *omat;
    long long crc_limit;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOLOOOO", &odata, &ostarts, &oplan, &ocolumns, &okey,
                          &oversion, &osize, &oaccepted, &ocounts, &oidstarts, &crc_limit,
                          &omrows, &omcounts, &omstarts, &omat))
        return NULL;
    if (!PyList_Check(ocolumns)) {
        PyErr_SetString(PyExc_TypeError, "columns: a list of (values, valid)");
        return NULL;
    }
    Held data = {0}, starts = {0}, plan = {0}, key = {0}, version = {0}, size = {0},
         accepted = {0}, counts = {0}, idstarts = {0}, mrows = {0}, mcounts = {0},
         mstarts = {0}, mat = {0};
    Ints confirm_ids = {0}, publish_ids = {0}, checks = {0};
    PyObject *result = NULL;
    Py_ssize_t ncols = PyList_GET_SIZE(ocolumns);
    Column *cols = PyMem_Calloc(ncols ? (size_t)ncols : 1, sizeof(Column));
    if (cols == NULL)
        return PyErr_NoMemory();
    if (hold(odata, &data, 0, "data", 0) < 0 || hold(ostarts, &starts, 8, "starts", 0) < 0 ||
        hold(oplan, &plan, 8, "plan", 0) < 0 || hold(okey, &key, 8, "key", 1) < 0 ||
        hold(oversion, &version, 8, "version", 1) < 0 || hold(osize, &size, 8, "size", 1) < 0 ||
        hold(oaccepted, &accepted, 1, "accepted", 1) < 0 ||
        hold(ocounts, &counts, 8, "id_counts", 1) < 0 ||
        hold(oidstarts, &idstarts, 8, "id_starts", 1) < 0 ||
        hold(omrows, &mrows, 8, "message_rows", 0) < 0 ||
        hold(omcounts, &mcounts, 8, "message_counts", 0) < 0 ||
        hold(omstarts, &mstarts, 8, "message_starts", 0) < 0 ||
        hold(omat, &mat, 8, "message_at", 0) < 0)
        goto done;
    Py_ssize_t n = starts.view.len / 8;
    if (key.view.len / 8 != n || version.view.len / 8 != n || size.view.len / 8 != n ||
        accepted.view.len != n || counts.view.len / 8 != n || idstarts.view.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "output columns of another length than starts");
        goto done;
    }
    for (Py_ssize_t c = 0; c < ncols; c++) {
        PyObject *pair = PyList_GET_ITEM(ocolumns, c);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "columns: a list of (values, valid)");
            goto done;
        }
        if (hold(PyTuple_GET_ITEM(pair, 0), &cols[c].values, 8, "values", 1) < 0)
            goto done;
        if (hold(PyTuple_GET_ITEM(pair, 1), &cols[c].valid, 1, "valid", 1) < 0)
            goto done;
        if (cols[c].values.view.len / 8 != n || cols[c].valid.view.len != n) {
            PyErr_SetString(PyExc_ValueError, "a column of another length than starts");
            goto done;
        }
    }
    Py_ssize_t nmsg = mrows.view.len / 8, nat = mat.view.len / 8;
    if (mcounts.view.len / 8 != nmsg || mstarts.view.len / 8 != nmsg) {
        PyErr_SetString(PyExc_ValueError, "message arrays of different lengths");
        goto done;
    }
    const int64_t *m_rows = mrows.view.buf, *m_counts = mcounts.view.buf,
                  *m_starts = mstarts.view.buf, *m_at = mat.view.buf;
    for (Py_ssize_t i = 0; i < nmsg; i++)
        if (m_counts[i] < 0 || m_starts[i] < 0 || m_starts[i] > nat - m_counts[i] ||
            (i && m_rows[i] <= m_rows[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "message positions out of range or unsorted");
            goto done;
        }
    const int64_t *P = plan.view.buf;
    Py_ssize_t words = plan.view.len / 8;
    if (words < P_FIXED || P[P_DELIVERS] < 0 || P[P_DELIVERS] > 8 ||
        words < P_FIXED + P[P_DELIVERS] * DELIVER_WORDS) {
        PyErr_SetString(PyExc_ValueError, "a plan cut short");
        goto done;
    }
    int ndeliver = (int)P[P_DELIVERS];
    const int64_t *dv = P + P_FIXED; /* the Deliver versions' words */
    const int64_t *lists[3 + 8];
    int64_t heads[3 + 8] = {P[P_CREDIT_SIZE] + 4, P[P_FIRST_ID], P[P_PUBLISH_HEAD]};
    for (int i = 0; i < ndeliver; i++)
        heads[3 + i] = dv[i * DELIVER_WORDS + 1];
    int plan_ok = P[P_CONFIRM_COUNT] >= 0 && P[P_CONFIRM_COUNT] + 4 <= P[P_FIRST_ID] &&
                  P[P_PUBLISH_COUNT] >= 0 && P[P_PUBLISH_COUNT] + 4 <= P[P_PUBLISH_HEAD] &&
                  P[P_PUBLISH_WORD] >= 0 && P[P_PUBLISH_WORD] + 4 <= P[P_PUBLISH_HEAD] &&
                  P[P_CREDIT_SIZE] >= 4;
    for (int i = 0; i < ndeliver; i++) {
        const int64_t *w = dv + i * DELIVER_WORDS;
        plan_ok = plan_ok && w[1] >= HEADER && w[2] >= 0 && w[2] < w[1] && w[3] >= 0 &&
                  w[4] >= 1 && w[4] <= 8 && w[3] + w[4] <= w[1] && w[5] >= 0 && w[6] >= 1 &&
                  w[6] <= 8 && w[5] + w[6] <= w[1] && w[7] >= 0 && w[7] + 4 <= w[1] &&
                  w[8] >= 0 && w[8] + 4 <= w[1];
    }
    if (!plan_ok) {
        PyErr_SetString(PyExc_ValueError, "a plan reading outside the heads");
        goto done;
    }
    if (checked_lists(P, words, P_FIXED + ndeliver * DELIVER_WORDS, lists, heads, 3 + ndeliver,
                      ncols) < 0)
        goto done;
    Data d = {data.view.buf, data.view.len};
    const int64_t *at = starts.view.buf;
    int64_t *k_out = key.view.buf, *v_out = version.view.buf, *s_out = size.view.buf;
    int64_t *id_counts = counts.view.buf, *id_starts = idstarts.view.buf;
    uint8_t *ok_out = accepted.view.buf;
    int64_t first_id = P[P_FIRST_ID], id_width = P[P_ID_WIDTH];
    int64_t message = P[P_MESSAGE], publish_head = P[P_PUBLISH_HEAD];
    if (id_width != 8 || message < P[P_MESSAGE_ID] + 8 || message < P[P_MESSAGE_WORD] + 4 ||
        P[P_MESSAGE_ID] < 0 || P[P_MESSAGE_WORD] < 0 || first_id < 0) {
        PyErr_SetString(PyExc_ValueError, "a plan of other widths than the ids' and words'");
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t a = at[r];
        if (r + PREFETCH < n && inside(&d, at[r + PREFETCH], PREFETCH_BYTES)) {
            __builtin_prefetch(d.data + at[r + PREFETCH]);
            __builtin_prefetch(d.data + at[r + PREFETCH] + PREFETCH_BYTES / 2);
        }
        id_counts[r] = -1;
        k_out[r] = v_out[r] = s_out[r] = 0;
        ok_out[r] = 0;
        if (!inside(&d, a, HEADER)) {
            k_out[r] = -1; /* (no frame there: declined) */
            continue;
        }
        const uint8_t *h = d.data + a;
        int64_t sz = be32(h), k = be16(h + 4), v = be16(h + 6);
        k_out[r] = k, v_out[r] = v, s_out[r] = sz;
        int64_t room = d.len - a; /* bytes of the data from the frame's start */
        if (k == P[P_HEARTBEAT]) {
            ok_out[r] = v == 1 && sz == 4;
        } else if (k == P[P_CREDIT]) {
            if (v == 1 && sz == P[P_CREDIT_SIZE] && sz + 4 <= room) {
                put_fields(lists[0], cols, r, h);
                ok_out[r] = 1;
            }
        } else if (k == P[P_CONFIRM]) {
            if (v != 1 || P[P_CONFIRM_COUNT] + 4 > room)
                continue;
            int64_t count = (int32_t)be32(h + P[P_CONFIRM_COUNT]);
            if (count < 0 || first_id + id_width * count != sz + 4 || sz + 4 > room)
                continue;
            put_fields(lists[1], cols, r, h);
            id_counts[r] = count;
            id_starts[r] = confirm_ids.n;
            for (int64_t i = 0; i < count; i++)
                if (push(&confirm_ids, (int64_t)read_int(h + first_id + 8 * i, 8, 0)) < 0)
                    goto done;
            ok_out[r] = 1;
        } else if (k == P[P_PUBLISH]) {
            if (v != 1 || sz + 4 < publish_head || publish_head > room)
                continue;
            int64_t count = (int32_t)be32(h + P[P_PUBLISH_COUNT]);
            int64_t word = be32(h + P[P_PUBLISH_WORD]);
            int64_t stride = message + word;
            if (count <= 0 || word >= 0x80000000LL || first_id + count * stride != 4 + sz)
                continue;
            const int64_t *given = nmsg ? given_messages(m_rows, m_counts, m_starts, nmsg, r,
                                                         count)
                                        : NULL;
            if (given == NULL && sz + 4 > room)
                continue;
            Py_ssize_t before = publish_ids.n;
            int good = 1;
            for (int64_t i = 0; i < count; i++) {
                int64_t m = given ? m_at[*given + i] : a + first_id + i * stride;
                if (!inside(&d, m, message)) {
                    good = 0;
                    break;
                }
                const uint8_t *mh = d.data + m;
                if ((int64_t)be32(mh + P[P_MESSAGE_WORD]) + message != stride) {
                    good = 0;
                    break;
                }
                if (push(&publish_ids, (int64_t)read_int(mh + P[P_MESSAGE_ID], 8, 0)) < 0)
                    goto done;
            }
            if (!good) {
                publish_ids.n = before;
                continue;
            }
            put_fields(lists[2], cols, r, h);
            id_counts[r] = count;
            id_starts[r] = before; /* (the Confirms' count added below) */
            ok_out[r] = 1;
        } else if (k == P[P_DELIVER]) {
            for (int i = 0; i < ndeliver; i++) {
                const int64_t *w = dv + i * DELIVER_WORDS;
                int64_t need = w[1];
                if (v != w[0] || sz + 4 < need || need > room)
                    continue;
                int64_t magic = h[w[2]], entries = (int64_t)read_int(h + w[3], w[4], 0);
                int64_t records = (int64_t)read_int(h + w[5], w[6], 0);
                int64_t length = be32(h + w[7]);
                if (magic >> 4 != 5 || entries * 4 > length || records > entries * 0xFFFF ||
                    4 + sz - need < length)
                    break;
                put_fields(lists[3 + i], cols, r, h);
                if (sz <= crc_limit)
                    if (push(&checks, r) < 0 || push(&checks, a + need) < 0 ||
                        push(&checks, length) < 0 || push(&checks, be32(h + w[8])) < 0)
                        goto done;
                ok_out[r] = 1;
                break;
            }
        }
    }
    if (confirm_ids.n) /* (the pool: the Confirms' ids, then the Publishes') */
        for (Py_ssize_t r = 0; r < n; r++)
            if (ok_out[r] && k_out[r] == P[P_PUBLISH])
                id_starts[r] += confirm_ids.n;
    for (Py_ssize_t i = 0; i < publish_ids.n; i++)
        if (push(&confirm_ids, publish_ids.v[i]) < 0)
            goto done;
    PyObject *ids = pool(&confirm_ids), *quads = ints_bytes(&checks);
    if (ids != NULL && quads != NULL)
        result = Py_BuildValue("NN", ids, quads);
    else {
        Py_XDECREF(ids);
        Py_XDECREF(quads);
    }
done:
    for (Py_ssize_t c = 0; c < ncols; c++) {
        release(&cols[c].values);
        release(&cols[c].valid);
    }
    PyMem_Free(cols);
    PyMem_Free(confirm_ids.v);
    PyMem_Free(publish_ids.v);
    PyMem_Free(checks.v);
    Held *all[] = {&data, &starts, &plan, &key, &version, &size, &accepted, &counts, &idstarts,
                   &mrows, &mcounts, &mstarts, &mat};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        release(all[i]);
    return result;
}

/* copy_ranges(buf, so, lo, po, starts, ends, dest)
 *
 * HotBlock._patch's copies: the stream bytes [starts[i], ends[i]) of a walk's segments, one
 * range after the other into buf from position `dest` (the block buffer's patch area, after
 * its data: no range overlaps it). Every byte read and written is checked inside buf. */
static PyObject *copy_ranges(PyObject *self, PyObject *args) {
    PyObject *obuf, *oso, *olo, *opo, *ostarts, *oends;
    long long dest;
    if (!PyArg_ParseTuple(args, "OOOOOOL", &obuf, &oso, &olo, &opo, &ostarts, &oends, &dest))
        return NULL;
    Held buf = {0}, so = {0}, lo = {0}, po = {0}, starts = {0}, ends = {0};
    PyObject *result = NULL;
    if (hold(obuf, &buf, 0, "buf", 1) < 0 || hold(oso, &so, 8, "so", 0) < 0 ||
        hold(olo, &lo, 8, "lo", 0) < 0 || hold(opo, &po, 8, "po", 0) < 0 ||
        hold(ostarts, &starts, 8, "starts", 0) < 0 || hold(oends, &ends, 8, "ends", 0) < 0)
        goto done;
    Segs s;
    if (segs_of(&s, &so, &lo, &po, &buf) < 0)
        goto done;
    Py_ssize_t n = starts.view.len / 8;
    if (ends.view.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "starts and ends of different lengths");
        goto done;
    }
    const int64_t *a = starts.view.buf, *b = ends.view.buf;
    uint8_t *out = buf.view.buf;
    int64_t to = dest;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t length = b[i] - a[i];
        if (length < 0 || to < 0 || to > s.buflen - length) {
            PyErr_SetString(PyExc_ValueError, "a range past the buffer's end");
            goto done;
        }
        /* (read_stream checks every source byte; the patch area lies after the data) */
        if (read_stream(&s, a[i], length, out + to) < 0)
            goto done;
        to += length;
    }
    result = Py_NewRef(Py_None);
done:
    release(&buf);
    release(&so);
    release(&lo);
    release(&po);
    release(&starts);
    release(&ends);
    return result;
}

static PyMethodDef methods[] = {
    {"hot_run", hot_run, METH_VARARGS, "A run of hot frames walked (HotWalk.run)."},
    {"hot_decode", hot_decode, METH_VARARGS, "A block's hot frames decoded (hot.decode)."},
    {"copy_ranges", copy_ranges, METH_VARARGS, "Stream ranges copied (HotBlock._patch)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The Stream fast path's hottest loops, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
