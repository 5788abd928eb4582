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
    if (pos < 0 || end < pos || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "record walk: pos and end outside the buffer");
        goto done;
    }
    /* at most one record a RECORD_HEADER bytes */
    Py_ssize_t room = (end - pos) / RECORD_HEADER + 1;
    starts = PyMem_Malloc((size_t)room * sizeof(int64_t));
    if (starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *b = view.buf;
    Py_ssize_t n = 0;
    int bad = 0;
    while (end - pos >= RECORD_HEADER) {
        const uint8_t *c = b + pos + CAPLEN_AT;
        uint32_t cap = big_endian ? ((uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 |
                                     (uint32_t)c[2] << 8 | c[3])
                                  : ((uint32_t)c[3] << 24 | (uint32_t)c[2] << 16 |
                                     (uint32_t)c[1] << 8 | c[0]);
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

static PyMethodDef methods[] = {
    {"record_starts", record_starts, METH_VARARGS,
     "record_starts(buf, pos, end, big_endian, max_packet) -> (starts, position, bad)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records", "A classic pcap block's record walk, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
