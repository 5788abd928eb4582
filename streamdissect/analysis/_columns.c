/* CompactRows' chunk of rows made columns by compiled code (optional: compact.py loads it;
 * its Python `_column` over `zip(*rows)` is the fallback and the reference).
 *
 * columns(rows, array) -> [(values, None mask or None)] by column, or None: rows being a
 * list of tuples of one length (else None: the caller's Python way), each column as
 * compact._column makes it of the column's values: an array('q') (`array` is the array
 * type) when every value is an int (exactly: a bool is not) or None and fits int64, an
 * array('d') when every one is a float or None, with a mask (bytes, 1 where None) when
 * there is a None, None in the array's place; else the values as a tuple, no mask.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* What a column's values are: of one kind, with or without None. */
enum { EMPTY, INTS, FLOATS, OTHER };

static int kind_of(PyObject *rows, Py_ssize_t c, Py_ssize_t n, int *has_none) {
    int kind = EMPTY;
    *has_none = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(rows, r), c);
        int k;
        if (v == Py_None) {
            *has_none = 1;
            continue;
        }
        if (PyLong_CheckExact(v)) k = INTS;
        else if (PyFloat_CheckExact(v)) k = FLOATS;
        else return OTHER;
        if (kind == EMPTY) kind = k;
        else if (kind != k) return OTHER;
    }
    return kind;
}

/* The column's values as a tuple (compact._column's "as given"). */
static PyObject *as_tuple(PyObject *rows, Py_ssize_t c, Py_ssize_t n) {
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t r = 0; out != NULL && r < n; r++)
        PyTuple_SET_ITEM(out, r, Py_NewRef(PyTuple_GET_ITEM(PyList_GET_ITEM(rows, r), c)));
    return out;
}

/* (array of the values, mask or None), or NULL with no error set: an int past int64. */
static PyObject *as_array(PyObject *rows, Py_ssize_t c, Py_ssize_t n, int kind, int has_none,
                          PyObject *array_type) {
    PyObject *data = PyBytes_FromStringAndSize(NULL, n * 8), *mask = NULL, *arr, *out;
    if (data == NULL) return NULL;
    if (has_none && (mask = PyBytes_FromStringAndSize(NULL, n)) == NULL) goto error;
    char *bytes = PyBytes_AS_STRING(data), *nones = mask ? PyBytes_AS_STRING(mask) : NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(rows, r), c);
        if (nones != NULL) nones[r] = v == Py_None;
        if (kind == INTS) {
            int64_t value = 0;
            if (v != Py_None) {
                int overflow;
                long long got = PyLong_AsLongLongAndOverflow(v, &overflow);
                if (overflow) {
                    Py_DECREF(data);
                    Py_XDECREF(mask);
                    return NULL; /* (no error: as a tuple) */
                }
                value = got;
            }
            memcpy(bytes + 8 * r, &value, 8);
        } else {
            double value = v == Py_None ? 0.0 : PyFloat_AS_DOUBLE(v);
            memcpy(bytes + 8 * r, &value, 8);
        }
    }
    arr = PyObject_CallFunction(array_type, "sO", kind == INTS ? "q" : "d", data);
    Py_DECREF(data);
    if (arr == NULL) {
        Py_XDECREF(mask);
        return NULL;
    }
    out = PyTuple_Pack(2, arr, mask ? mask : Py_None);
    Py_DECREF(arr);
    Py_XDECREF(mask);
    return out;
error:
    Py_DECREF(data);
    return NULL;
}

static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *rows, *array_type;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &rows, &array_type)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows), width = 0;
    if (n == 0) Py_RETURN_NONE;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyTuple_CheckExact(row)) Py_RETURN_NONE;
        if (r == 0) width = PyTuple_GET_SIZE(row);
        else if (PyTuple_GET_SIZE(row) != width) Py_RETURN_NONE;
    }
    PyObject *out = PyList_New(width);
    for (Py_ssize_t c = 0; out != NULL && c < width; c++) {
        int has_none, kind = kind_of(rows, c, n, &has_none);
        PyObject *column = NULL;
        if (kind == INTS || kind == FLOATS) {
            column = as_array(rows, c, n, kind, has_none, array_type);
            if (column == NULL && PyErr_Occurred()) goto error;
        }
        if (column == NULL) {
            PyObject *values = as_tuple(rows, c, n);
            if (values == NULL) goto error;
            column = PyTuple_Pack(2, values, Py_None);
            Py_DECREF(values);
            if (column == NULL) goto error;
        }
        PyList_SET_ITEM(out, c, column);
    }
    return out;
error:
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "A chunk of rows as CompactRows' columns (compact._column)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns", "CompactRows' chunks made columns, compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
