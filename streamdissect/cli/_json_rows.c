/* The JSON report's rows of numbers, written by compiled code (optional: _text_report.py
 * loads it; its %-format of the rows is the fallback and the reference).
 *
 * numeric_rows(pieces, specs, columns, n) -> str or None: n rows joined by ",", row r being
 * pieces[0] + text(columns[0][r]) + pieces[1] + ... + text(columns[k-1][r]) + pieces[k],
 * where specs[c] says the text: 'd' int.__repr__ (ints), 'r' float.__repr__ (floats), 's'
 * the str itself. A column is a list or tuple (of exact ints, floats or str), or a buffer of
 * int64 ('d' only) or float64 ('r' only) items; every piece and 's' text ASCII. None when a
 * value is of another kind or a text not ASCII: the caller's %-format then writes the rows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *v;
    Py_ssize_t n, cap;
} Text;

static int grow(Text *t, Py_ssize_t more) {
    if (t->n + more <= t->cap)
        return 0;
    Py_ssize_t cap = t->cap ? t->cap : 1 << 16;
    while (cap < t->n + more)
        cap *= 2;
    char *v = PyMem_Realloc(t->v, (size_t)cap);
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->v = v;
    t->cap = cap;
    return 0;
}

static int put(Text *t, const char *s, Py_ssize_t len) {
    if (grow(t, len) < 0)
        return -1;
    memcpy(t->v + t->n, s, (size_t)len);
    t->n += len;
    return 0;
}

/* int.__repr__ of an int64 */
static int put_int(Text *t, int64_t x) {
    char digits[24];
    int at = 24;
    uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    do {
        digits[--at] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        digits[--at] = '-';
    return put(t, digits + at, 24 - at);
}

/* An ASCII str's characters (0: not ASCII, -1: an error) */
static int put_ascii(Text *t, PyObject *s) {
    if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s))
        return 0;
    return put(t, (const char *)PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s)) < 0 ? -1 : 1;
}

/* A value's text by its spec (0: not of the kind the spec takes, -1: an error) */
static int put_value(Text *t, char spec, PyObject *v) {
    if (spec == 'd') {
        if (!PyLong_CheckExact(v))
            return 0;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) { /* beyond int64: int.__repr__ itself */
            PyObject *r = PyObject_Repr(v);
            if (r == NULL)
                return -1;
            int done = put_ascii(t, r);
            Py_DECREF(r);
            return done;
        }
        if (x == -1 && PyErr_Occurred())
            return -1;
        return put_int(t, (int64_t)x) < 0 ? -1 : 1;
    }
    if (spec == 'r') {
        if (!PyFloat_CheckExact(v))
            return 0;
        char *s = PyOS_double_to_string(PyFloat_AS_DOUBLE(v), 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (s == NULL)
            return -1;
        int done = put(t, s, (Py_ssize_t)strlen(s)) < 0 ? -1 : 1;
        PyMem_Free(s);
        return done;
    }
    if (spec == 's')
        return PyUnicode_CheckExact(v) ? put_ascii(t, v) : 0;
    return 0;
}

typedef struct {
    PyObject *fast;    /* a list or tuple's items (PySequence_Fast), or NULL */
    Py_buffer view;    /* else a buffer of 8-byte items */
    int held, is_float;
} Column;

static PyObject *numeric_rows(PyObject *self, PyObject *args) {
    PyObject *opieces, *ocolumns;
    const char *specs;
    Py_ssize_t nspecs, n;
    if (!PyArg_ParseTuple(args, "O!y#O!n", &PyList_Type, &opieces, &specs, &nspecs,
                          &PyList_Type, &ocolumns, &n))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(ocolumns);
    if (nspecs != k || PyList_GET_SIZE(opieces) != k + 1 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "numeric_rows: k specs, k columns, k + 1 pieces");
        return NULL;
    }
    for (Py_ssize_t i = 0; i <= k; i++) {
        PyObject *p = PyList_GET_ITEM(opieces, i);
        if (!PyUnicode_Check(p) || !PyUnicode_IS_ASCII(p))
            Py_RETURN_NONE;
    }
    Column *cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    if (cols == NULL)
        return PyErr_NoMemory();
    Text t = {0};
    PyObject *result = NULL;
    int other = 0; /* a column or value the compiled rows do not take */
    for (Py_ssize_t c = 0; c < k && !other; c++) {
        PyObject *col = PyList_GET_ITEM(ocolumns, c);
        if (PyList_Check(col) || PyTuple_Check(col)) {
            cols[c].fast = PySequence_Fast(col, "a column");
            if (cols[c].fast == NULL)
                goto done;
            if (PySequence_Fast_GET_SIZE(cols[c].fast) < n)
                other = 1;
        } else if (PyObject_CheckBuffer(col)) {
            if (PyObject_GetBuffer(col, &cols[c].view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
                goto done;
            cols[c].held = 1;
            const char *f = cols[c].view.format ? cols[c].view.format : "B";
            char last = f[strlen(f) - 1];
            int ints = (last == 'q' || last == 'l') && (f[0] != '>' && f[0] != '!');
            int floats = last == 'd' && (f[0] != '>' && f[0] != '!');
            cols[c].is_float = floats;
            if (cols[c].view.itemsize != 8 || cols[c].view.len / 8 < n ||
                !((ints && specs[c] == 'd') || (floats && specs[c] == 'r')))
                other = 1;
        } else {
            other = 1;
        }
    }
    if (other) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        if (r && put(&t, ",", 1) < 0)
            goto done;
        for (Py_ssize_t c = 0; c <= k; c++) {
            if (put_ascii(&t, PyList_GET_ITEM(opieces, c)) < 0)
                goto done;
            if (c == k)
                break;
            int done_value;
            if (cols[c].fast != NULL) {
                done_value = put_value(&t, specs[c], PySequence_Fast_GET_ITEM(cols[c].fast, r));
            } else if (cols[c].is_float) {
                double x = ((const double *)cols[c].view.buf)[r];
                char *s = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
                if (s == NULL)
                    goto done;
                done_value = put(&t, s, (Py_ssize_t)strlen(s)) < 0 ? -1 : 1;
                PyMem_Free(s);
            } else {
                done_value = put_int(&t, ((const int64_t *)cols[c].view.buf)[r]) < 0 ? -1 : 1;
            }
            if (done_value < 0)
                goto done;
            if (done_value == 0) {
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
    }
    result = PyUnicode_DecodeASCII(t.v ? t.v : "", t.n, NULL);
done:
    for (Py_ssize_t c = 0; c < k; c++) {
        Py_XDECREF(cols[c].fast);
        if (cols[c].held)
            PyBuffer_Release(&cols[c].view);
    }
    PyMem_Free(cols);
    PyMem_Free(t.v);
    return result;
}

static PyMethodDef methods[] = {
    {"numeric_rows", numeric_rows, METH_VARARGS,
     "numeric_rows(pieces, specs, columns, n) -> the rows' text, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_json_rows", "The JSON report's rows of numbers, compiled.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__json_rows(void) { return PyModule_Create(&module); }
