/* The plain walk's loop over a run of whole JSON frames, compiled (part of the _native
 * extension, setup.py builds it with _native.c): walk._frames' noting of deferred frames
 * (key 0: a JSON header under 64 KiB) of one direction's segments, the frames plain_walk's
 * RocketMQDirection then reads (tests/test_rocketmq_plain_walk.py holds it to the loop). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_native.h"

int hold(PyObject *obj, Held *h, Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(obj, &h->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    h->held = 1;
    if (itemsize > 1 && h->view.len % itemsize != 0) {
        PyErr_SetString(PyExc_ValueError, "segment arrays of 8-byte items expected");
        return -1;
    }
    return 0;
}

void release(Held *h) {
    if (h->held) PyBuffer_Release(&h->view);
    h->held = 0;
}

/* The last of the n sorted offsets so[] at or before a (bisect_right(so, a) - 1). */
static Py_ssize_t segment_of(const int64_t *so, Py_ssize_t n, long long a) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (a < so[mid]) hi = mid;
        else lo = mid + 1;
    }
    return lo - 1;
}

/* Whether [p, p + n) lies in a buffer of `size` bytes (a slice of it, not clamped). */
static int inside(long long p, long long n, Py_ssize_t size) {
    return p >= 0 && n >= 0 && p + n <= size;
}

/* The stream bytes [a, b) of a frame across segments, joined as InOrder.read joins them
 * (tcp/vectorized.py: the first segment's rest, the ones between whole, the last's start);
 * NULL without an error: not the usual case (read it the Python way). */
PyObject *joined_frame(const char *buf, Py_ssize_t size, const int64_t *so, const int64_t *lo,
                       const int64_t *po, Py_ssize_t n, long long a, long long b) {
    Py_ssize_t j = segment_of(so, n, a), jj = segment_of(so, n, b - 1);
    if (j < 0 || jj <= j || b <= so[j] + lo[j]) return NULL;
    long long at = po[j] + a - so[j], first = po[j] + lo[j] - at, last = b - so[jj], total;
    if (!inside(at, first, size) || !inside(po[jj], last, size)) return NULL;
    total = first + last;
    for (Py_ssize_t k = j + 1; k < jj; k++) {
        if (!inside(po[k], lo[k], size)) return NULL;
        total += lo[k];
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) return NULL;
    char *to = PyBytes_AS_STRING(out);
    memcpy(to, buf + at, first), to += first;
    for (Py_ssize_t k = j + 1; k < jj; k++) memcpy(to, buf + po[k], lo[k]), to += lo[k];
    memcpy(to, buf + po[jj], last);
    return out;
}

/* (buf, so, lo, po, rows, times, send, pos, jj, low, limit, slot) -> (pos, jj, packed):
 * _frames' walk from `pos` (jj: the segment the last frame ended in) while the next frame
 * is a deferred one (key 0) whose header is within its segment, 4 <= size <= low (no limit
 * to note: _frames notes sizes over `low`), size <= limit, and which ends by `send`; each
 * an item (start, end, size, ts, row, slot, at, seg_end) as _frames defers it, `slot` on
 * from the one given, written as 8 native int64 (`packed`: bytes, for an array('q'), not a
 * tuple of 8 ints a frame). Every position is checked against its array or the buffer. */
PyObject *json_run(PyObject *self, PyObject *args) {
    PyObject *bo, *soo, *loo, *poo, *rowso, *timeso;
    long long send, pos, low, limit;
    Py_ssize_t jj, slot;
    Held hb = {0}, hs = {0}, hl = {0}, hp = {0}, hr = {0}, ht = {0};
    PyObject *result = NULL;
    int64_t *out = NULL;
    Py_ssize_t used = 0, room = 0; /* (items written, and room for) */
    if (!PyArg_ParseTuple(args, "OOOOOOLLnLLn", &bo, &soo, &loo, &poo, &rowso, &timeso, &send,
                          &pos, &jj, &low, &limit, &slot))
        return NULL;
    if (hold(bo, &hb, 1) < 0 || hold(soo, &hs, 8) < 0 || hold(loo, &hl, 8) < 0 ||
        hold(poo, &hp, 8) < 0 || hold(rowso, &hr, 8) < 0 || hold(timeso, &ht, 8) < 0)
        goto done;
    const unsigned char *buf = hb.view.buf;
    Py_ssize_t nbuf = hb.view.len, n = hs.view.len / 8;
    const int64_t *so = hs.view.buf, *lo = hl.view.buf, *po = hp.view.buf, *rows = hr.view.buf,
                  *times = ht.view.buf;
    if (hl.view.len / 8 != n || hp.view.len / 8 != n || hr.view.len / 8 != n ||
        ht.view.len / 8 != n || jj < 0 || jj >= n) {
        PyErr_SetString(PyExc_ValueError, "json_run: segment arrays of one length expected");
        goto done;
    }
    while (send - pos >= 8) {
        Py_ssize_t j = jj;
        int64_t seg_end = so[j] + lo[j];
        if (!(so[j] <= pos && pos < seg_end)) {
            if (pos == seg_end && j + 1 < n) {
                j = j + 1;
            } else {
                while (j + 1 < n && so[j + 1] <= pos) j++;
            }
            if (!(so[j] <= pos)) break;
            seg_end = so[j] + lo[j];
        }
        int64_t at = po[j] + pos - so[j];
        if (pos + 8 > seg_end || at < 0 || at + 8 > nbuf) break;
        const unsigned char *h = buf + at;
        int64_t size = (int64_t)((uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                                 (uint32_t)h[2] << 8 | h[3]);
        if (h[4] != 0 || h[5] != 0 || size > low || size > limit || size < 4) break;
        int64_t end = pos + 4 + size;
        if (end > send) break;
        Py_ssize_t k = j;
        if (end > seg_end)
            while (k + 1 < n && so[k + 1] <= end - 1) k++;
        if (used == room) {
            room = room ? 2 * room : 64;
            int64_t *grown = PyMem_Realloc(out, (size_t)room * 8 * sizeof(int64_t));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            out = grown;
        }
        int64_t *item = out + 8 * used++;
        item[0] = pos, item[1] = end, item[2] = size, item[3] = times[k], item[4] = rows[k];
        item[5] = slot, item[6] = at, item[7] = seg_end;
        slot++;
        jj = k;
        pos = end;
    }
    result = Py_BuildValue("(Lny#)", pos, jj, out == NULL ? "" : (const char *)out,
                           used * 8 * (Py_ssize_t)sizeof(int64_t));
done:
    PyMem_Free(out);
    release(&hb);
    release(&hs);
    release(&hl);
    release(&hp);
    release(&hr);
    release(&ht);
    return result;
}
