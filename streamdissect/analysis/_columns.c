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

/* What a column's values are: of one kind, with or without None. */
enum { EMPTY, INTS, FLOATS, OTHER };

/* Each row's values (items[r]: its tuple's or list's item array), or -1 with an error: a
 * list row no longer of the width (the rows are held in a tuple, a tuple row's length was
 * checked; a list's array may move when Python code runs: taken again after allocations). */
static int row_items(PyObject *rows, Py_ssize_t n, Py_ssize_t width, PyObject ***items) {
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *row = PyTuple_GET_ITEM(rows, r);
        if (PyTuple_CheckExact(row)) {
            items[r] = ((PyTupleObject *)row)->ob_item;
        } else if (PyList_GET_SIZE(row) == width) {
            items[r] = ((PyListObject *)row)->ob_item;
        } else {
            PyErr_SetString(PyExc_RuntimeError, "columns: a row changed while it was read");
            return -1;
        }
    }
    return 0;
}

static int kind_of(PyObject ***items, Py_ssize_t c, Py_ssize_t n, int *has_none) {
    int kind = EMPTY;
    *has_none = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *v = items[r][c];
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

/* The column's values into `out` (a new tuple: compact._column's "as given"). */
static void fill_tuple(PyObject ***items, Py_ssize_t c, Py_ssize_t n, PyObject *out) {
    for (Py_ssize_t r = 0; r < n; r++) PyTuple_SET_ITEM(out, r, Py_NewRef(items[r][c]));
}

/* The column's values into `data` (8 bytes each) and `mask` (1 where None, or NULL): 1, or
 * 0 for an int past int64 (then a tuple), or -1 with an error (a value no longer of the
 * column's kind). No allocation: nothing can change the rows meanwhile. */
static int fill_array(PyObject ***items, Py_ssize_t c, Py_ssize_t n, int kind, PyObject *data,
                      PyObject *mask) {
    char *bytes = PyBytes_AS_STRING(data), *nones = mask ? PyBytes_AS_STRING(mask) : NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *v = items[r][c];
        if (nones != NULL) nones[r] = v == Py_None;
        if (kind == INTS) {
            int64_t value = 0;
            if (v != Py_None) {
                int overflow;
                long long got;
                if (!PyLong_CheckExact(v)) goto changed;
                got = PyLong_AsLongLongAndOverflow(v, &overflow);
                if (overflow) return 0;
                value = got;
            }
            memcpy(bytes + 8 * r, &value, 8);
        } else {
            double value = 0.0;
            if (v != Py_None) {
                if (!PyFloat_CheckExact(v)) goto changed;
                value = PyFloat_AS_DOUBLE(v);
            }
            memcpy(bytes + 8 * r, &value, 8);
        }
    }
    return 1;
changed:
    PyErr_SetString(PyExc_RuntimeError, "columns: a value changed while it was read");
    return -1;
}

/* columns(): the kinds read first, every column's buffer made, the values written (with no
 * allocation between: items stay valid), then the arrays and pairs made of them. */
static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *given, *array_type, *rows, *out = NULL;
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
    if ((rows = PyList_AsTuple(given)) == NULL) return NULL; /* (the rows held) */
    PyObject ***items = PyMem_Malloc((size_t)n * sizeof(PyObject **));
    int *kinds = PyMem_Calloc((size_t)(2 * width + 1), sizeof(int)), *nones = kinds + width;
    PyObject **data = PyMem_Calloc((size_t)(2 * width + 1), sizeof(PyObject *)),
             **masks = data + width;
    if (items == NULL || kinds == NULL || data == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (row_items(rows, n, width, items) < 0) goto done;
    for (Py_ssize_t c = 0; c < width; c++) kinds[c] = kind_of(items, c, n, &nones[c]);
    for (Py_ssize_t c = 0; c < width; c++) {
        int arrays = kinds[c] == INTS || kinds[c] == FLOATS;
        if ((data[c] = arrays ? PyBytes_FromStringAndSize(NULL, n * 8) : PyTuple_New(n)) == NULL)
            goto done;
        if (arrays && nones[c] && (masks[c] = PyBytes_FromStringAndSize(NULL, n)) == NULL)
            goto done;
    }
    if (row_items(rows, n, width, items) < 0) goto done;
    for (Py_ssize_t c = 0; c < width; c++) {
        if (kinds[c] != INTS && kinds[c] != FLOATS) {
            fill_tuple(items, c, n, data[c]);
            continue;
        }
        int filled = fill_array(items, c, n, kinds[c], data[c], masks[c]);
        if (filled < 0) goto done;
        if (filled == 0) kinds[c] = OTHER; /* (an int past int64: a tuple, made below) */
    }
    for (Py_ssize_t c = 0; c < width; c++) {
        if (PyBytes_CheckExact(data[c]) && kinds[c] == OTHER) {
            Py_CLEAR(masks[c]);
            Py_SETREF(data[c], PyTuple_New(n));
            if (data[c] == NULL || row_items(rows, n, width, items) < 0) goto done;
            fill_tuple(items, c, n, data[c]);
        }
    }
    if ((out = PyList_New(width)) == NULL) goto done;
    for (Py_ssize_t c = 0; c < width; c++) {
        PyObject *values = data[c], *column;
        if (kinds[c] == INTS || kinds[c] == FLOATS) {
            values = PyObject_CallFunction(array_type, "sO", kinds[c] == INTS ? "q" : "d", data[c]);
            if (values == NULL) {
                Py_CLEAR(out);
                goto done;
            }
        } else {
            Py_INCREF(values);
        }
        column = PyTuple_Pack(2, values, masks[c] ? masks[c] : Py_None);
        Py_DECREF(values);
        if (column == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, c, column);
    }
done:
    if (data != NULL)
        for (Py_ssize_t c = 0; c < 2 * width; c++) Py_XDECREF(data[c]);
    PyMem_Free(data);
    PyMem_Free(kinds);
    PyMem_Free(items);
    Py_DECREF(rows);
    return out;
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
