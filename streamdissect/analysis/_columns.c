/* CompactRows' chunk of rows made columns by compiled code (optional: compact.py loads it;
 * its Python `_column` over `zip(*rows)` is the fallback and the reference).
 *
 * columns(rows, array) -> [(values, None mask or None)] by column, or None: rows being a
 * list of tuples or lists of one length (else None: the caller's Python way; a list that
 * changes meanwhile is an error, not a crash), each column as
 * compact._column makes it of the column's values: an array('q') (`array` is the array
 * type) when every value is an int (exactly: a bool is not) or None and fits int64, an
 * array('d') when every one is a float or None, with a mask (bytes, 1 where None) when
 * there is a None, None in the array's place; else the values as a tuple, no mask.
 *
 * packed(values) / unpacked(*parts): a column's tuple made cheaper to spill, and made again
 * (compact._spilled, _Packed; without them the tuple is pickled as it is: the reference).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* What a column's values are: of one kind, with or without None (CHANGED: a row too short). */
enum { EMPTY, INTS, FLOATS, OTHER, CHANGED };

/* Row r's value c (borrowed), or NULL with an error: a list row cut short meanwhile (the
 * rows are held in a tuple; a tuple row's length was checked). */
static inline PyObject *cell(PyObject *rows, Py_ssize_t r, Py_ssize_t c) {
    PyObject *row = PyTuple_GET_ITEM(rows, r);
    if (PyTuple_CheckExact(row)) return PyTuple_GET_ITEM(row, c);
    if (c < PyList_GET_SIZE(row)) return PyList_GET_ITEM(row, c);
    PyErr_SetString(PyExc_RuntimeError, "columns: a row changed while it was read");
    return NULL;
}

static int kind_of(PyObject *rows, Py_ssize_t c, Py_ssize_t n, int *has_none) {
    int kind = EMPTY;
    *has_none = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *v = cell(rows, r, c);
        int k;
        if (v == NULL) return CHANGED;
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
    for (Py_ssize_t r = 0; out != NULL && r < n; r++) {
        PyObject *v = cell(rows, r, c);
        if (v == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, r, Py_NewRef(v));
    }
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
        PyObject *v = cell(rows, r, c);
        if (v == NULL || (v != Py_None && kind == FLOATS && !PyFloat_CheckExact(v))) {
            if (v != NULL) PyErr_SetString(PyExc_RuntimeError, "columns: a value changed");
            Py_DECREF(data);
            Py_XDECREF(mask);
            return NULL;
        }
        if (nones != NULL) nones[r] = v == Py_None;
        if (kind == INTS) {
            int64_t value = 0;
            if (v != Py_None) {
                int overflow;
                long long got = PyLong_AsLongLongAndOverflow(v, &overflow);
                if (got == -1 && PyErr_Occurred()) { /* (not an int now) */
                    Py_DECREF(data);
                    Py_XDECREF(mask);
                    return NULL;
                }
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
    PyObject *given, *array_type, *rows;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &given, &array_type)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(given), width = 0;
    if (n == 0) Py_RETURN_NONE;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PyList_GET_ITEM(given, r);
        Py_ssize_t size;
        if (PyTuple_CheckExact(row)) size = PyTuple_GET_SIZE(row);
        else if (PyList_CheckExact(row)) size = PyList_GET_SIZE(row);
        else Py_RETURN_NONE;
        if (r == 0) width = size;
        else if (size != width) Py_RETURN_NONE;
    }
    /* (the rows held: `array` is called between the columns) */
    if ((rows = PyList_AsTuple(given)) == NULL) return NULL;
    PyObject *out = PyList_New(width);
    for (Py_ssize_t c = 0; out != NULL && c < width; c++) {
        int has_none, kind = kind_of(rows, c, n, &has_none);
        PyObject *column = NULL;
        if (kind == CHANGED) goto error;
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
    Py_DECREF(rows);
    return out;
error:
    Py_DECREF(rows);
    Py_XDECREF(out);
    return NULL;
}

/* A chunk's column of values kept as a tuple, made cheaper to spill (pickle writes every
 * value of a tuple one by one, looked up in its memo):
 *
 * packed(values) -> (distinct, text, lengths, codes, size) or None: the tuple's distinct
 * objects (by identity, in the order first met) and each value's code among them (`size`
 * bytes each, little-endian: 1 up to 256 distinct, else 2; codes None when every value is
 * its own: code i for value i); the distinct objects as a tuple (`distinct`), or, when every
 * one is an exact str of ASCII characters, as their characters one after the other (`text`,
 * bytes) and their lengths (`lengths`: 4 bytes each), distinct None. None: not an exact
 * tuple, empty, or of more than 65,536 values (pickled as it is).
 * unpacked(distinct, text, lengths, codes, size) -> the tuple again: the same objects where
 * `distinct` was kept, equal exact strs made anew where `text` was (as pickle makes them).
 */
#define MAX_PACKED 65536

static inline size_t pointer_slot(PyObject *v, int bits) {
    return (size_t)((((uintptr_t)v >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

static PyObject *packed(PyObject *self, PyObject *values) {
    if (!PyTuple_CheckExact(values)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_GET_SIZE(values), found = 0;
    if (n == 0 || n > MAX_PACKED) Py_RETURN_NONE;
    int bits = 1;
    while (((Py_ssize_t)1 << bits) < 2 * n) bits++;
    size_t slots = (size_t)1 << bits;
    PyObject **keys = PyMem_Calloc(slots, sizeof(PyObject *)), **distinct = NULL;
    uint16_t *slot_code = PyMem_Malloc(slots * sizeof(uint16_t)), *codes = NULL;
    PyObject *out = NULL, *kept = NULL, *text = NULL, *lengths = NULL, *coded = NULL;
    distinct = PyMem_Malloc((size_t)n * sizeof(PyObject *));
    codes = PyMem_Malloc((size_t)n * sizeof(uint16_t));
    if (keys == NULL || slot_code == NULL || distinct == NULL || codes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int ascii = 1;
    Py_ssize_t chars = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *v = PyTuple_GET_ITEM(values, r);
        size_t at = pointer_slot(v, bits);
        while (keys[at] != NULL && keys[at] != v) at = (at + 1) & (slots - 1);
        if (keys[at] == NULL) {
            keys[at] = v, slot_code[at] = (uint16_t)found;
            distinct[found++] = v;
            if (ascii && PyUnicode_CheckExact(v) && PyUnicode_READY(v) == 0 &&
                PyUnicode_IS_ASCII(v))
                chars += PyUnicode_GET_LENGTH(v);
            else
                ascii = 0;
        }
        codes[r] = slot_code[at];
    }
    if (ascii && chars > 0xFFFFFFFFll) ascii = 0;
    if (ascii) {
        if ((text = PyBytes_FromStringAndSize(NULL, chars)) == NULL ||
            (lengths = PyBytes_FromStringAndSize(NULL, found * 4)) == NULL)
            goto done;
        char *to = PyBytes_AS_STRING(text);
        unsigned char *length = (unsigned char *)PyBytes_AS_STRING(lengths);
        for (Py_ssize_t d = 0; d < found; d++) {
            Py_ssize_t size = PyUnicode_GET_LENGTH(distinct[d]);
            memcpy(to, PyUnicode_DATA(distinct[d]), (size_t)size);
            to += size;
            for (int b = 0; b < 4; b++) length[4 * d + b] = (unsigned char)(size >> (8 * b));
        }
    } else {
        if ((kept = PyTuple_New(found)) == NULL) goto done;
        for (Py_ssize_t d = 0; d < found; d++)
            PyTuple_SET_ITEM(kept, d, Py_NewRef(distinct[d]));
    }
    int size = found <= 256 ? 1 : 2;
    if (found < n) {
        if ((coded = PyBytes_FromStringAndSize(NULL, n * size)) == NULL) goto done;
        unsigned char *to = (unsigned char *)PyBytes_AS_STRING(coded);
        for (Py_ssize_t r = 0; r < n; r++) {
            to[size * r] = (unsigned char)codes[r];
            if (size == 2) to[2 * r + 1] = (unsigned char)(codes[r] >> 8);
        }
    }
    out = Py_BuildValue("(OOOOi)", kept ? kept : Py_None, text ? text : Py_None,
                        lengths ? lengths : Py_None, coded ? coded : Py_None, size);
done:
    Py_XDECREF(kept); Py_XDECREF(text); Py_XDECREF(lengths); Py_XDECREF(coded);
    PyMem_Free(keys); PyMem_Free(slot_code); PyMem_Free(distinct); PyMem_Free(codes);
    return out;
}

/* The distinct strs of `text` and `lengths` (packed's), made anew; a new tuple. */
static PyObject *texts(PyObject *text, PyObject *lengths) {
    if (!PyBytes_Check(text) || !PyBytes_Check(lengths) || PyBytes_GET_SIZE(lengths) % 4) {
        PyErr_SetString(PyExc_ValueError, "unpacked: not packed texts");
        return NULL;
    }
    Py_ssize_t found = PyBytes_GET_SIZE(lengths) / 4, left = PyBytes_GET_SIZE(text);
    const unsigned char *length = (const unsigned char *)PyBytes_AS_STRING(lengths);
    const char *from = PyBytes_AS_STRING(text);
    PyObject *out = PyTuple_New(found);
    for (Py_ssize_t d = 0; out != NULL && d < found; d++) {
        Py_ssize_t size = 0;
        for (int b = 0; b < 4; b++) size |= (Py_ssize_t)length[4 * d + b] << (8 * b);
        PyObject *v = size <= left ? PyUnicode_New(size, 127) : NULL;
        if (v == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "unpacked: texts cut short");
            Py_CLEAR(out);
            break;
        }
        memcpy(PyUnicode_DATA(v), from, (size_t)size);
        from += size, left -= size;
        PyTuple_SET_ITEM(out, d, v);
    }
    if (out != NULL && left != 0) {
        PyErr_SetString(PyExc_ValueError, "unpacked: texts left over");
        Py_CLEAR(out);
    }
    return out;
}

static PyObject *unpacked(PyObject *self, PyObject *args) {
    PyObject *distinct, *text, *lengths, *coded;
    int size;
    if (!PyArg_ParseTuple(args, "OOOOi", &distinct, &text, &lengths, &coded, &size)) return NULL;
    if (text != Py_None) {
        if ((distinct = texts(text, lengths)) == NULL) return NULL;
    } else if (PyTuple_CheckExact(distinct)) {
        Py_INCREF(distinct);
    } else {
        PyErr_SetString(PyExc_ValueError, "unpacked: no distinct values");
        return NULL;
    }
    if (coded == Py_None) return distinct; /* (every value its own) */
    Py_ssize_t found = PyTuple_GET_SIZE(distinct), n;
    if (!PyBytes_Check(coded) || (size != 1 && size != 2) || PyBytes_GET_SIZE(coded) % size) {
        PyErr_SetString(PyExc_ValueError, "unpacked: not packed codes");
        Py_DECREF(distinct);
        return NULL;
    }
    n = PyBytes_GET_SIZE(coded) / size;
    const unsigned char *code = (const unsigned char *)PyBytes_AS_STRING(coded);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t r = 0; out != NULL && r < n; r++) {
        Py_ssize_t d = size == 1 ? code[r] : code[2 * r] | (code[2 * r + 1] << 8);
        if (d >= found) {
            PyErr_SetString(PyExc_ValueError, "unpacked: a code past the values");
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, r, Py_NewRef(PyTuple_GET_ITEM(distinct, d)));
    }
    Py_DECREF(distinct);
    return out;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "A chunk of rows as CompactRows' columns (compact._column)."},
    {"packed", packed, METH_O, "A column's tuple made cheaper to spill (or None)."},
    {"unpacked", unpacked, METH_VARARGS, "The tuple of packed()'s parts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_columns",
    "CompactRows' chunks made columns (and packed to spill), compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
