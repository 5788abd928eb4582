/* The record walk of a classic pcap block, compiled (optional: capture/native.py loads it;
 * blocks.walk_records' Python code is the fallback and the reference).
 *
 * record_starts(buf, pos, end, big_endian, max_packet) -> (starts, position, bad): the
 * start of every whole record from `pos` in buf[:end] (int64 bytes), the position after the
 * last one, and whether the walk stopped at a record whose captured length is above
 * max_packet (the caller reports it). A record's header is 16 bytes, its captured length
 * the u32 at byte 8 in the file's byte order. Reads only inside buf[pos:end]; the starts
 * grow by 8 bytes a record of at least 16 bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define RECORD_HEADER 16
#define CAPLEN_AT 8

static inline uint32_t u32_at(const uint8_t *c, int big_endian) {
    return big_endian ? ((uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 | (uint32_t)c[2] << 8 | c[3])
                      : ((uint32_t)c[3] << 24 | (uint32_t)c[2] << 16 | (uint32_t)c[1] << 8 | c[0]);
}

/* The starts of a walk over buf[pos:end] of a buffer of `len` bytes: room for one an `step`
 * bytes (the least a record or block takes), or NULL with the error set, when pos and end
 * lie outside the buffer (`what` names the walk) or memory is short. */
static int64_t *starts_room(Py_ssize_t pos, Py_ssize_t end, Py_ssize_t len, Py_ssize_t step,
                            const char *what) {
    if (pos < 0 || end < pos || end > len) {
        PyErr_Format(PyExc_ValueError, "%s: pos and end outside the buffer", what);
        return NULL;
    }
    int64_t *starts = PyMem_Malloc((size_t)((end - pos) / step + 1) * sizeof(int64_t));
    if (starts == NULL)
        PyErr_NoMemory();
    return starts;
}

static PyObject *record_starts(PyObject *self, PyObject *args) {
    PyObject *obuf;
    Py_ssize_t pos, end;
    int big_endian;
    long long max_packet;
    if (!PyArg_ParseTuple(args, "OnnpL", &obuf, &pos, &end, &big_endian, &max_packet))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obuf, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    PyObject *result = NULL;
    int64_t *starts = NULL;
    starts = starts_room(pos, end, view.len, RECORD_HEADER, "record walk");
    if (starts == NULL)
        goto done;
    const uint8_t *b = view.buf;
    Py_ssize_t n = 0;
    int bad = 0;
    while (end - pos >= RECORD_HEADER) {
        const uint8_t *c = b + pos + CAPLEN_AT;
        uint32_t cap = u32_at(c, big_endian);
        if ((long long)cap > max_packet) {
            bad = 1;
            break;
        }
        if ((Py_ssize_t)cap > end - pos - RECORD_HEADER) /* not whole before end */
            break;
        starts[n++] = pos;
        pos += RECORD_HEADER + (Py_ssize_t)cap;
    }
    PyObject *noted =
        PyBytes_FromStringAndSize((const char *)starts, n * (Py_ssize_t)sizeof(int64_t));
    if (noted != NULL)
        result = Py_BuildValue("NnO", noted, pos, bad ? Py_True : Py_False);
done:
    PyMem_Free(starts);
    PyBuffer_Release(&view);
    return result;
}

/* epb_run(buf, pos, end, big_endian, max_block, regular, scale, offset_ns, units_min,
 * units_max) -> (starts, position, last_ns): pcapng_walk.PcapngWalk's run of ordinary
 * Enhanced Packet Blocks from `pos` in buf[:end] (the reference: its _run and _times).
 * A block is taken while it is whole before `end`, of type 6, on an interface i with
 * regular[i] != 0 (one byte an interface), 32 <= its length <= max_block, a multiple of 4,
 * its captured length <= its length - 32 and its time in units within
 * [units_min[i], units_max[i]]; its time is then rewritten in place (the buffer must be
 * writable) as u32 seconds and nanoseconds of units * scale[i] + offset_ns[i], in the
 * section's byte order. starts: the record starts (block + 12) as int64 bytes; position:
 * the first block not taken; last_ns: the last block's time, or -1 when none was taken.
 * The interface tables (int64, uint64) are as long as `regular`; reads only inside
 * buf[pos:end] and the tables; the starts grow by 8 bytes a block of at least 32 bytes.
 */
#define EPB_TYPE 6
#define EPB_MIN 32
#define EPB_HEAD 12
#define NS_PER_S 1000000000LL

static inline void u32_put(uint8_t *c, uint32_t v, int big_endian) {
    for (int k = 0; k < 4; k++)
        c[big_endian ? 3 - k : k] = (uint8_t)(v >> (8 * k));
}

/* the interface table `view` as `n` items of 8 bytes, or an error */
static int table_of(PyObject *obj, Py_buffer *view, Py_ssize_t n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len != n * 8) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "epb run: an interface table of another length");
        return -1;
    }
    return 0;
}

static PyObject *epb_run(PyObject *self, PyObject *args) {
    PyObject *obuf, *oregular, *otables[4];
    Py_ssize_t pos, end;
    int big_endian;
    long long max_block;
    if (!PyArg_ParseTuple(args, "OnnpLOOOOO", &obuf, &pos, &end, &big_endian, &max_block,
                          &oregular, &otables[0], &otables[1], &otables[2], &otables[3]))
        return NULL;
    Py_buffer view, regular, tables[4];
    if (PyObject_GetBuffer(obuf, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(oregular, &regular, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int got = 0;
    PyObject *result = NULL;
    int64_t *starts = NULL;
    for (; got < 4; got++)
        if (table_of(otables[got], &tables[got], regular.len) < 0)
            goto done;
    starts = starts_room(pos, end, view.len, EPB_MIN, "epb run");
    if (starts == NULL)
        goto done;
    uint8_t *b = view.buf;
    const uint8_t *is_regular = regular.buf;
    const int64_t *scale = tables[0].buf, *offset_ns = tables[1].buf;
    const uint64_t *units_min = tables[2].buf, *units_max = tables[3].buf;
    Py_ssize_t n = 0;
    long long last_ns = -1;
    while (end - pos >= EPB_HEAD) {
        uint8_t *c = b + pos;
        uint32_t block_len = u32_at(c + 4, big_endian);
        uint32_t iface = u32_at(c + 8, big_endian);
        if (u32_at(c, big_endian) != EPB_TYPE || (Py_ssize_t)iface >= regular.len ||
            !is_regular[iface] || block_len < EPB_MIN || (long long)block_len > max_block ||
            (block_len & 3) || end - pos < (Py_ssize_t)block_len)
            break;
        uint64_t units = (uint64_t)u32_at(c + 12, big_endian) << 32 | u32_at(c + 16, big_endian);
        if (u32_at(c + 20, big_endian) > block_len - EPB_MIN || units < units_min[iface] ||
            units > units_max[iface])
            break;
        /* (units_max keeps this within int64: pcapng_walk._interfaces_changed) */
        int64_t ns = (int64_t)units * scale[iface] + offset_ns[iface];
        u32_put(c + 12, (uint32_t)(ns / NS_PER_S), big_endian);
        u32_put(c + 16, (uint32_t)(ns % NS_PER_S), big_endian);
        last_ns = ns;
        starts[n++] = pos + EPB_HEAD;
        pos += block_len;
    }
    PyObject *noted =
        PyBytes_FromStringAndSize((const char *)starts, n * (Py_ssize_t)sizeof(int64_t));
    if (noted != NULL)
        result = Py_BuildValue("NnL", noted, pos, last_ns);
done:
    PyMem_Free(starts);
    while (got-- > 0)
        PyBuffer_Release(&tables[got]);
    PyBuffer_Release(&regular);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"record_starts", record_starts, METH_VARARGS,
     "record_starts(buf, pos, end, big_endian, max_packet) -> (starts, position, bad)"},
    {"epb_run", epb_run, METH_VARARGS,
     "epb_run(buf, pos, end, big_endian, max_block, regular, scale, offset_ns, units_min, "
     "units_max) -> (starts, position, last_ns)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records", "A classic pcap block's record walk, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
