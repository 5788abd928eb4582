/* The JSON report's rows, written by compiled code (optional: _text_report.py loads it; its
 * Python writer of the rows is the fallback and the reference).
 *
 * json_rows(pieces, specs, columns, n) -> str or None: n rows joined by ",", row r being
 * pieces[0] + text(columns[0][r]) + pieces[1] + ... + text(columns[k-1][r]) + pieces[k],
 * a value's text as json.dumps writes it (ensure_ascii), by its column's spec:
 *   'i' an int or None          (an int column: int.__repr__, or null)
 *   'f' a finite float or None  (a float column: float.__repr__, or null)
 *   't' a str or None           (a string column: encode_basestring_ascii, or null)
 *   'b' a bool or None          (true, false, null)
 *   'v' any of these            (a column without a schema: by the value's type)
 *   's' an ASCII str            (a text made already, written as it is: a map's JSON)
 * A column is a list or tuple, or a buffer of int64 ('i', 'v') or float64 ('f', 'v') items.
 * None when a value is of another kind (a bool in an int column, a NaN, an int subclass,
 * ...) or a piece not ASCII: the caller's Python writer then writes the rows, casting the
 * values as pandas would.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Text written: in a str of ASCII being made (`str`: the rows' text, returned without a
 * copy once cut to its length) or in memory of its own (str NULL: a scratch text) */
typedef struct {
    char *v;
    Py_ssize_t n, cap;
    PyObject *str;
    int in_str;
} Text;

/* (the rare part of grow, kept out of the callers so that put stays inlined) */
static int __attribute__((noinline)) regrow(Text *t, Py_ssize_t more);

static inline int grow(Text *t, Py_ssize_t more) {
    return t->n + more <= t->cap ? 0 : regrow(t, more);
}

static int regrow(Text *t, Py_ssize_t more) {
    Py_ssize_t cap = t->cap * 2 > 256 ? t->cap * 2 : 256;
    if (cap < t->n + more)
        cap = t->n + more;
    if (t->in_str) {
        /* (a str made here, held by nothing else, never hashed: resizable) */
        if (t->str == NULL ? (t->str = PyUnicode_New(cap, 127)) == NULL
                           : PyUnicode_Resize(&t->str, cap) < 0)
            return -1;
        t->v = (char *)PyUnicode_DATA(t->str);
    } else {
        char *v = PyMem_Realloc(t->v, (size_t)cap);
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->v = v;
    }
    t->cap = cap;
    return 0;
}

/* The text written, as a str (a new reference; t's str then taken) */
static PyObject *text_str(Text *t) {
    if (t->str == NULL)
        return PyUnicode_New(0, 127);
    if (PyUnicode_Resize(&t->str, t->n) < 0)
        return NULL;
    PyObject *out = t->str;
    t->str = NULL;
    return out;
}

static inline int put(Text *t, const char *s, Py_ssize_t len) {
    if (grow(t, len) < 0)
        return -1;
    memcpy(t->v + t->n, s, (size_t)len);
    t->n += len;
    return 0;
}

static const char PAIRS[] = /* "00" to "99": two digits a division */
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* u's decimal digits, ending at `end` (the first is returned) */
static char *digits_of(uint64_t u, char *end) {
    while (u >= 100) {
        end -= 2;
        memcpy(end, PAIRS + 2 * (u % 100), 2);
        u /= 100;
    }
    if (u >= 10) {
        end -= 2;
        memcpy(end, PAIRS + 2 * u, 2);
    } else {
        *--end = (char)('0' + u);
    }
    return end;
}

/* int.__repr__ of an int64 */
static int put_int(Text *t, int64_t x) {
    char digits[24];
    char *at = digits_of(x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x, digits + 24);
    if (x < 0)
        *--at = '-';
    return put(t, at, digits + 24 - at);
}

/* An ASCII str's characters (0: not ASCII, -1: an error) */
static int put_ascii(Text *t, PyObject *s) {
    if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s))
        return 0;
    return put(t, (const char *)PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s)) < 0 ? -1 : 1;
}

/* int.__repr__ of an exact int, int64 or past it */
static int put_long(Text *t, PyObject *v) {
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

/* x's digits, `places` of them after a point, trailing zeros cut (one kept): 337.242 */
static int put_fixed(Text *t, int negative, uint64_t whole, uint64_t fraction, int places) {
    char s[48];
    int at = 0;
    if (negative)
        s[at++] = '-';
    char digits[24];
    char *first = digits_of(whole, digits + 24);
    memcpy(s + at, first, (size_t)(digits + 24 - first));
    at += (int)(digits + 24 - first);
    s[at++] = '.';
    char frac[24];
    for (int i = places - 1; i >= 0; i--) {
        frac[i] = (char)('0' + fraction % 10);
        fraction /= 10;
    }
    int keep = places;
    while (keep > 1 && frac[keep - 1] == '0')
        keep--;
    memcpy(s + at, frac, (size_t)keep);
    at += keep;
    return put(t, s, at);
}

/* float.__repr__ of a finite float. Two kinds of value the report has most of are written
 * without the shortest-digits search (dtoa), each where its text is provably repr's:
 * - x = m / 1e6 for an integer m, 1e-4 <= |x| < 2**33 (a latency in ms from ns): the
 *   decimal m * 1e-6 rounds to x (the division is correctly rounded); decimals of at most
 *   6 fractional digits are 1e-6 apart, more than x's float spacing (<= 2**-20 below
 *   2**33), so it is the only one of them that rounds to x, and any decimal as short as it
 *   near x has at most 6 fractional digits: repr gives its digits, positional (1e-4 <= x
 *   < 1e16).
 * - a multiple of 2**-12 in [0, 2**16), not -0.0: _float_texts.py's case (its note). */
static int put_float(Text *t, double x) {
    double a = fabs(x);
    if (a >= 1e-4 && a < 8589934592.0) {
        double scaled = nearbyint(a * 1e6);
        if (scaled / 1e6 == a) {
            uint64_t m = (uint64_t)scaled;
            return put_fixed(t, x < 0, m / 1000000, m % 1000000, 6) < 0 ? -1 : 1;
        }
    }
    if (x >= 0 && !signbit(x) && x < 65536.0) {
        double quarter = x * 4096.0; /* (exact: a power of two) */
        if (quarter == floor(quarter)) {
            uint64_t q = (uint64_t)quarter;
            /* k * 2**-12 == k * 5**12 * 10**-12 */
            return put_fixed(t, 0, q >> 12, (q & 4095) * 244140625ULL, 12) < 0 ? -1 : 1;
        }
    }
    char *s = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (s == NULL)
        return -1;
    int done = put(t, s, (Py_ssize_t)strlen(s)) < 0 ? -1 : 1;
    PyMem_Free(s);
    return done;
}

static const char HEX[] = "0123456789abcdef";

/* One character as encode_basestring_ascii escapes it (c not printable ASCII, or " or \) */
static int put_escaped(Text *t, Py_UCS4 c) {
    char s[12];
    int at = 0;
    s[at++] = '\\';
    switch (c) {
    case '\\': s[at++] = '\\'; break;
    case '"': s[at++] = '"'; break;
    case '\b': s[at++] = 'b'; break;
    case '\f': s[at++] = 'f'; break;
    case '\n': s[at++] = 'n'; break;
    case '\r': s[at++] = 'r'; break;
    case '\t': s[at++] = 't'; break;
    default:
        if (c >= 0x10000) { /* a UTF-16 surrogate pair */
            Py_UCS4 high = 0xd800 | ((c - 0x10000) >> 10);
            s[at++] = 'u';
            s[at++] = HEX[(high >> 12) & 0xf];
            s[at++] = HEX[(high >> 8) & 0xf];
            s[at++] = HEX[(high >> 4) & 0xf];
            s[at++] = HEX[high & 0xf];
            c = 0xdc00 | ((c - 0x10000) & 0x3ff);
            s[at++] = '\\';
        }
        s[at++] = 'u';
        s[at++] = HEX[(c >> 12) & 0xf];
        s[at++] = HEX[(c >> 8) & 0xf];
        s[at++] = HEX[(c >> 4) & 0xf];
        s[at++] = HEX[c & 0xf];
    }
    return put(t, s, at);
}

#define PLAIN(c) ((c) >= ' ' && (c) <= '~' && (c) != '\\' && (c) != '"')

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
/* Whether an 8-byte word of ASCII holds a byte that is not PLAIN: one below ' ', or '"',
 * '\\' or DEL (a zero byte after the xor; bytes below 0x80, so no false alarm) */
static int word_escapes(uint64_t w) {
    uint64_t quote = w ^ (ONES * '"'), backslash = w ^ (ONES * '\\'), del = w ^ (ONES * 0x7f);
    uint64_t low = w - ONES * ' ';
    uint64_t zero = (quote - ONES) & ~quote;
    zero |= (backslash - ONES) & ~backslash;
    zero |= (del - ONES) & ~del;
    return ((zero | low) & ~w & HIGHS) != 0;
}

/* encode_basestring_ascii(s): the str quoted, every character not printable ASCII (and
 * " and \) escaped */
static int put_string(Text *t, PyObject *s) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(s);
    if (put(t, "\"", 1) < 0)
        return -1;
    if (PyUnicode_IS_ASCII(s)) {
        const char *c = (const char *)PyUnicode_DATA(s);
        Py_ssize_t run = 0; /* the start of the characters not yet written */
        for (Py_ssize_t i = 0; i < len; i++) {
            uint64_t w;
            while (i + 8 <= len && (memcpy(&w, c + i, 8), !word_escapes(w)))
                i += 8; /* (eight plain characters at a time) */
            if (i == len)
                break;
            if (PLAIN(c[i]))
                continue;
            if (put(t, c + run, i - run) < 0 || put_escaped(t, (unsigned char)c[i]) < 0)
                return -1;
            run = i + 1;
        }
        if (put(t, c + run, len - run) < 0)
            return -1;
    } else {
        int kind = PyUnicode_KIND(s);
        const void *data = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < len; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            char one = (char)c;
            if ((PLAIN(c) ? put(t, &one, 1) : put_escaped(t, c)) < 0)
                return -1;
        }
    }
    return put(t, "\"", 1) < 0 ? -1 : 1;
}

/* A value's text by its column's spec (0: not of a kind the spec takes, -1: an error) */
static int put_value(Text *t, char spec, PyObject *v) {
    if (v == Py_None)
        return spec == 's' ? 0 : put(t, "null", 4) < 0 ? -1 : 1;
    if (spec == 's')
        return PyUnicode_CheckExact(v) ? put_ascii(t, v) : 0;
    if (PyLong_CheckExact(v))
        return spec == 'i' || spec == 'v' ? put_long(t, v) : 0;
    if (PyUnicode_CheckExact(v))
        return spec == 't' || spec == 'v' ? put_string(t, v) : 0;
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        return (spec == 'f' || spec == 'v') && isfinite(x) ? put_float(t, x) : 0;
    }
    if (v == Py_True || v == Py_False) {
        if (spec != 'b' && spec != 'v')
            return 0;
        return (v == Py_True ? put(t, "true", 4) : put(t, "false", 5)) < 0 ? -1 : 1;
    }
    return 0;
}

typedef struct {
    PyObject *fast;    /* a list or tuple's items (PySequence_Fast), or NULL */
    Py_buffer view;    /* else a buffer of 8-byte items */
    int held, is_float;
    /* the str written last in this column and where its text is in the output: the same
     * object again (a row's connection, topic, group, status: most rows') is copied from
     * there, not escaped again */
    PyObject *last;
    Py_ssize_t last_at, last_len;
} Column;

/* A str value's text (put_value's, spec 't' or 'v'), copied when it is the column's last */
static int put_str_value(Text *t, Column *col, PyObject *v) {
    if (v == col->last) {
        if (grow(t, col->last_len) < 0)
            return -1;
        memcpy(t->v + t->n, t->v + col->last_at, (size_t)col->last_len);
        t->n += col->last_len;
        return 1;
    }
    Py_ssize_t at = t->n;
    if (put_string(t, v) < 0)
        return -1;
    col->last = v, col->last_at = at, col->last_len = t->n - at;
    return 1;
}

/* Column c for spec: 0 taken, 1 a column the compiled rows do not take, -1 an error */
static int open_column(Column *col, PyObject *given, char spec, Py_ssize_t n) {
    if (PyList_Check(given) || PyTuple_Check(given)) {
        col->fast = PySequence_Fast(given, "a column");
        if (col->fast == NULL)
            return -1;
        return PySequence_Fast_GET_SIZE(col->fast) < n;
    }
    if (!PyObject_CheckBuffer(given))
        return 1;
    if (PyObject_GetBuffer(given, &col->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    col->held = 1;
    const char *f = col->view.format ? col->view.format : "B";
    char last = f[strlen(f) - 1];
    int native = f[0] != '>' && f[0] != '!';
    int ints = (last == 'q' || last == 'l') && native;
    int floats = last == 'd' && native;
    col->is_float = floats;
    return col->view.itemsize != 8 || col->view.len / 8 < n ||
           !((ints && (spec == 'i' || spec == 'v')) || (floats && (spec == 'f' || spec == 'v')));
}

#define ROOM_GUESS ((Py_ssize_t)1 << 24)

/* Row r's value of column c (put_value's result) */
static int put_cell(Text *t, Column *col, char spec, Py_ssize_t r) {
    if (col->fast != NULL) {
        PyObject *v = PySequence_Fast_GET_ITEM(col->fast, r);
        return PyUnicode_CheckExact(v) && (spec == 't' || spec == 'v') ? put_str_value(t, col, v)
                                                                     : put_value(t, spec, v);
    }
    if (col->is_float) {
        double x = ((const double *)col->view.buf)[r];
        return isfinite(x) ? put_float(t, x) : 0;
    }
    return put_int(t, ((const int64_t *)col->view.buf)[r]) < 0 ? -1 : 1;
}

/* Whether each of the column's n (> 0) values is its first: the same object, or the same 8
 * bytes (so the same text) */
static int constant(const Column *col, Py_ssize_t n) {
    if (col->fast != NULL) {
        PyObject **items = PySequence_Fast_ITEMS(col->fast), *first = items[0];
        for (Py_ssize_t r = 1; r < n; r++)
            if (items[r] != first)
                return 0;
        return 1;
    }
    const char *bytes = (const char *)col->view.buf;
    for (Py_ssize_t r = 1; r < n; r++)
        if (memcmp(bytes + 8 * r, bytes, 8) != 0)
            return 0;
    return 1;
}

static PyObject *json_rows(PyObject *self, PyObject *args) {
    PyObject *opieces, *ocolumns;
    const char *specs;
    Py_ssize_t nspecs, n;
    if (!PyArg_ParseTuple(args, "O!y#O!n", &PyList_Type, &opieces, &specs, &nspecs,
                          &PyList_Type, &ocolumns, &n))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(ocolumns);
    if (nspecs != k || PyList_GET_SIZE(opieces) != k + 1 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "json_rows: k specs, k columns, k + 1 pieces");
        return NULL;
    }
    for (Py_ssize_t i = 0; i <= k; i++) {
        PyObject *p = PyList_GET_ITEM(opieces, i);
        if (!PyUnicode_Check(p) || !PyUnicode_IS_ASCII(p))
            Py_RETURN_NONE;
    }
    for (Py_ssize_t c = 0; c < k; c++) {
        if (!strchr("iftbvs", specs[c]) || specs[c] == '\0') {
            PyErr_Format(PyExc_ValueError, "json_rows: no spec '%c'", specs[c]);
            return NULL;
        }
    }
    Column *cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    const char **piece = PyMem_Malloc((size_t)(k + 1) * sizeof(char *));
    /* piece_len, seg_at, seg_len: k + 1 each; var: k */
    Py_ssize_t *piece_len = PyMem_Malloc((size_t)(4 * k + 3) * sizeof(Py_ssize_t));
    if (cols == NULL || piece == NULL || piece_len == NULL) {
        PyMem_Free(cols);
        PyMem_Free(piece);
        PyMem_Free(piece_len);
        return PyErr_NoMemory();
    }
    Py_ssize_t *seg_at = piece_len + k + 1, *seg_len = seg_at + k + 1, *var = seg_len + k + 1;
    Text t = {0}, fixed = {0};
    t.in_str = 1;
    PyObject *result = NULL;
    for (Py_ssize_t c = 0; c < k; c++) {
        int other = open_column(&cols[c], PyList_GET_ITEM(ocolumns, c), specs[c], n);
        if (other < 0)
            goto done;
        if (other) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    /* the pieces' characters (ASCII, checked above; the list holds them meanwhile) */
    for (Py_ssize_t c = 0; c <= k; c++) {
        PyObject *p = PyList_GET_ITEM(opieces, c);
        piece[c] = (const char *)PyUnicode_DATA(p), piece_len[c] = PyUnicode_GET_LENGTH(p);
    }
    /* A row's text between two columns whose values differ from row to row (`fixed`:
     * segment i at seg_at[i], seg_len[i] characters, before column var[i]): the pieces
     * and the text of every column of one value in these rows, made once (a send's
     * connection, server, group, topic, size, status: half its columns) */
    Py_ssize_t nvar = 0;
    seg_at[0] = 0;
    if (put(&fixed, piece[0], piece_len[0]) < 0)
        goto done;
    for (Py_ssize_t c = 0; c < k; c++) {
        if (n > 0 && constant(&cols[c], n)) {
            int done_value = put_cell(&fixed, &cols[c], specs[c], 0);
            cols[c].last = NULL; /* (its text is in `fixed`, not the rows' text) */
            if (done_value < 0)
                goto done;
            if (done_value == 0) {
                result = Py_NewRef(Py_None);
                goto done;
            }
        } else {
            seg_len[nvar] = fixed.n - seg_at[nvar];
            var[nvar++] = c;
            seg_at[nvar] = fixed.n;
        }
        if (put(&fixed, piece[c + 1], piece_len[c + 1]) < 0)
            goto done;
    }
    seg_len[nvar] = fixed.n - seg_at[nvar];
    for (Py_ssize_t r = 0; r < n; r++) {
        /* room for the rest as long as the first row and an eighth more: one allocation
         * for most calls, not a copy each doubling of a chunk's megabyte or two (at most
         * ROOM_GUESS: a first row of a huge text does not ask for n times it) */
        if (r == 1) {
            Py_ssize_t each = t.n + 1;
            Py_ssize_t room = each > ROOM_GUESS / n ? ROOM_GUESS : each * (n - 1) * 9 / 8;
            if (grow(&t, room < ROOM_GUESS ? room : ROOM_GUESS) < 0)
                goto done;
        }
        if (r && put(&t, ",", 1) < 0)
            goto done;
        for (Py_ssize_t i = 0; i <= nvar; i++) {
            if (put(&t, fixed.v + seg_at[i], seg_len[i]) < 0)
                goto done;
            if (i == nvar)
                break;
            Py_ssize_t c = var[i];
            int done_value = put_cell(&t, &cols[c], specs[c], r);
            if (done_value < 0)
                goto done;
            if (done_value == 0) {
                result = Py_NewRef(Py_None);
                goto done;
            }
        }
    }
    result = text_str(&t);
done:
    for (Py_ssize_t c = 0; c < k; c++) {
        Py_XDECREF(cols[c].fast);
        if (cols[c].held)
            PyBuffer_Release(&cols[c].view);
    }
    PyMem_Free(cols);
    PyMem_Free(piece);
    PyMem_Free(piece_len);
    Py_XDECREF(t.str);
    PyMem_Free(fixed.v);
    return result;
}

static PyMethodDef methods[] = {
    {"json_rows", json_rows, METH_VARARGS,
     "json_rows(pieces, specs, columns, n) -> the rows' JSON text, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_json_rows", "The JSON report's rows, compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__json_rows(void) { return PyModule_Create(&module); }
