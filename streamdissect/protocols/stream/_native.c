/* The RabbitMQ Stream fast path's hottest loops, compiled (optional: native.py loads it,
 * the pure-Python code in hot_walk.py and hot.py is the fallback and the reference).
 *
 * hot_run: HotWalk.run's walk over one direction's in-order segments of a block, a frame
 * at a time, noting the hot frames' stream offsets and segments.
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

static int push(Ints *a, int64_t x) {
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

/* The stream bytes [a, a + n) into out, segment by segment as InOrder.read does. */
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
        memcpy(out, src, (size_t)take);
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
 * block, whose bytes are a cache miss away (hot_block reads them once, at the block's end). `starts` and `segs` (int64 bytes): each frame's stream offset and
 * the segment it starts in. `end`: where the first other frame (or the stream) starts. */
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

static PyMethodDef methods[] = {
    {"hot_run", hot_run, METH_VARARGS, "A run of hot frames walked (HotWalk.run)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The Stream fast path's hottest loops, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
