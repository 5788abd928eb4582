/* The frame events the compiled reader makes (part of the _native extension, setup.py
 * builds it with _native.c): the engine's frame event class, whose instances `place` makes
 * by writing their slots (plain_event), and the light record classes that are their own
 * events (self_events: hot.OwnEvent), their fields written into them instead; and a
 * block's runs of light sends and answers joined as one event each (joined). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <string.h>

#include "_native.h"

/* The frame event class whose instances place makes itself (plain_event: its __init__ only
 * assigns its five fields, in their order), and where each field is kept in them. */
PyObject *EVENT_CLASS = NULL; /* (shared with _native_runs.c: _native.h) */
Py_ssize_t EVENT_AT[5];

/* plain_event(cls): place makes cls's events by writing their fields' slots (ts_ns,
 * connection, direction, stream_offset, record), as its __init__ would assign them. */
PyObject *plain_event(PyObject *self, PyObject *cls) {
    static const char *names[5] = {"ts_ns", "connection", "direction", "stream_offset", "record"};
    Py_ssize_t at[5];
    if (!PyType_Check(cls) || ((PyTypeObject *)cls)->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_SetString(PyExc_TypeError, "plain_event: a slots class made by object.__new__");
        return NULL;
    }
    for (int k = 0; k < 5; k++) {
        PyObject *name = PyUnicode_InternFromString(names[k]);
        if (name == NULL) return NULL;
        at[k] = slot_offset((PyTypeObject *)cls, name);
        Py_DECREF(name);
        if (at[k] < 0) {
            PyErr_Format(PyExc_TypeError, "plain_event: no slot %s", names[k]);
            return NULL;
        }
    }
    memcpy(EVENT_AT, at, sizeof(at));
    Py_XSETREF(EVENT_CLASS, Py_NewRef(cls));
    Py_RETURN_NONE;
}

PyObject *SELF_EVENT[SELF_EVENTS] = {NULL, NULL}; /* (shared: _native.h) */
Py_ssize_t SELF_AT[SELF_EVENTS][4];

/* self_events(send_class, answer_class): place makes an instance of these classes (exactly)
 * its own frame event, its first four fields written into its slots (their `record` a
 * property giving the instance itself), when it makes EVENT_CLASS's events. */
PyObject *self_events(PyObject *self, PyObject *args) {
    static const char *names[4] = {"ts_ns", "connection", "direction", "stream_offset"};
    PyObject *classes[SELF_EVENTS];
    Py_ssize_t at[SELF_EVENTS][4];
    if (!PyArg_ParseTuple(args, "OO", &classes[0], &classes[1])) return NULL;
    for (int j = 0; j < SELF_EVENTS; j++) {
        if (!PyType_Check(classes[j])) {
            PyErr_SetString(PyExc_TypeError, "self_events: two slots classes");
            return NULL;
        }
        for (int k = 0; k < 4; k++) {
            PyObject *name = PyUnicode_InternFromString(names[k]);
            if (name == NULL) return NULL;
            at[j][k] = slot_offset((PyTypeObject *)classes[j], name);
            Py_DECREF(name);
            if (at[j][k] < 0) {
                PyErr_Format(PyExc_TypeError, "self_events: no slot %s", names[k]);
                return NULL;
            }
        }
    }
    memcpy(SELF_AT, at, sizeof(at));
    for (int j = 0; j < SELF_EVENTS; j++) Py_XSETREF(SELF_EVENT[j], Py_NewRef(classes[j]));
    Py_RETURN_NONE;
}

/* The index of the record's class among SELF_EVENT, or -1. */
int self_event_of(PyObject *record) {
    for (int j = 0; j < SELF_EVENTS; j++)
        if ((PyObject *)Py_TYPE(record) == SELF_EVENT[j]) return j;
    return -1;
}

PyObject *frame_event(PyObject *const *fields) {
    PyTypeObject *type = (PyTypeObject *)EVENT_CLASS;
    PyObject *event = type->tp_alloc(type, 0);
    if (event != NULL)
        for (int k = 0; k < 5; k++) *(PyObject **)((char *)event + EVENT_AT[k]) = Py_NewRef(fields[k]);
    return event;
}

/* make(*fields) (the five of an event), written into the slots for EVENT_CLASS; a light
 * record of a SELF_EVENT class made its own event then (its fields in its slots). */
PyObject *event_of(PyObject *make, PyObject *const *fields) {
    if (make != EVENT_CLASS) return PyObject_Vectorcall(make, fields, 5, NULL);
    int j = self_event_of(fields[4]);
    if (j < 0) return frame_event(fields);
    PyObject *event = fields[4];
    for (int k = 0; k < 4; k++)
        Py_XSETREF(*(PyObject **)((char *)event + SELF_AT[j][k]), Py_NewRef(fields[k]));
    return Py_NewRef(event);
}

/* (events, send_class, answer_class, send_codes, run_class) -> hot.joined_runs(events):
 * each run of two or more consecutive frame events (of the class plain_event registered,
 * or light records that are their own events: self_events) whose records are of send_class, or of answer_class with a request_code in send_codes, as
 * one run_class(list of them); the other events as they are. */
PyObject *joined(PyObject *self, PyObject *args) {
    PyObject *events, *send_class, *answer_class, *send_codes, *run_class;
    if (!PyArg_ParseTuple(args, "O!OOO!O", &PyList_Type, &events, &send_class, &answer_class,
                          &PyFrozenSet_Type, &send_codes, &run_class))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(events), first = -1;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (Py_ssize_t k = 0; k <= n; k++) {
        int hot = 0;
        PyObject *ev = k < n ? PyList_GET_ITEM(events, k) : NULL;
        if (ev != NULL && EVENT_CLASS != NULL &&
            ((PyObject *)Py_TYPE(ev) == EVENT_CLASS || self_event_of(ev) >= 0)) {
            PyObject *record = event_slot(ev, 4);
            PyObject *cls = record == NULL ? NULL : (PyObject *)Py_TYPE(record);
            if (cls == send_class) {
                hot = 1;
            } else if (cls == answer_class) {
                PyObject *code = PyObject_GetAttr(record, N_REQUEST_CODE);
                if (code == NULL) goto error;
                hot = PySet_Contains(send_codes, code);
                Py_DECREF(code);
                if (hot < 0) goto error;
            }
        }
        if (hot) {
            if (first < 0) first = k;
            continue;
        }
        if (first >= 0) { /* (the run before this event) */
            PyObject *part;
            if (k - first > 1) {
                PyObject *run = PyList_GetSlice(events, first, k);
                part = run == NULL ? NULL : PyObject_CallOneArg(run_class, run);
                Py_XDECREF(run);
            } else {
                part = Py_NewRef(PyList_GET_ITEM(events, first));
            }
            if (part == NULL || PyList_Append(out, part) < 0) {
                Py_XDECREF(part);
                goto error;
            }
            Py_DECREF(part);
            first = -1;
        }
        if (ev != NULL && PyList_Append(out, ev) < 0) goto error;
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}
