/* The naming of a connection's block in time order, compiled (plain_walk.named_in_order:
 * the Python loop is the reference, the fallback, and what tests/test_rocketmq_naming.py
 * holds this to).
 *
 * named: over a block's (row, slot, event) items in time order, a command's request
 * (RemotingCommand, HotSend, HotPull without the response flag) remembered by its
 * direction's open requests, a response named by the other direction's
 * (framing.OpenRequests' asked and answered, step for step: oneway requests not remembered,
 * a request popped then set so the order is the newest, the oldest forgotten past
 * MAX_OPEN_CALLS, the dict copied once a grown one holds SHRUNK_CALLS or fewer); a light
 * answer (HotAnswer, HotPulled) named too, and made a command (its `command()`) when its
 * request's code is not in its class's `light_for`. Each OpenRequests' `calls` and `grown`
 * are read at the start and written back at the end (on an error too).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include "_native.h"

static PyObject *N_CALLS, *N_GROWN, *N_FLAG, *N_ONEWAY, *N_LIGHT_FOR, *N_COMMAND, *N_RECORD,
    *N_DIRECTION;

/* obj.name as the generic lookup finds it, without its calls where that is plain: a slot's
 * value, or a class's attribute that is no descriptor on an instance without a dict (the
 * records' fields and constants); anything else by getattr. */
static PyObject *field(PyObject *obj, PyObject *name) {
    PyTypeObject *type = Py_TYPE(obj);
    if (type->tp_getattro == PyObject_GenericGetAttr) {
        PyObject *d = _PyType_Lookup(type, name);
        if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)d)->d_member;
            PyObject *value = member->type == T_OBJECT_EX
                                  ? *(PyObject **)((char *)obj + member->offset) : NULL;
            if (value != NULL) return Py_NewRef(value);
        } else if (d != NULL && Py_TYPE(d)->tp_descr_get == NULL && type->tp_dictoffset == 0 &&
                   !(type->tp_flags & Py_TPFLAGS_MANAGED_DICT)) {
            return Py_NewRef(d);
        }
    }
    return PyObject_GetAttr(obj, name);
}

/* obj.name = value: a slot written as its member descriptor writes it, else by setattr. */
static int set_field(PyObject *obj, PyObject *name, PyObject *value) {
    PyTypeObject *type = Py_TYPE(obj);
    Py_ssize_t at = type->tp_setattro == PyObject_GenericSetAttr ? slot_offset(type, name) : -1;
    if (at < 0) return PyObject_SetAttr(obj, name, value);
    Py_XSETREF(*(PyObject **)((char *)obj + at), Py_NewRef(value));
    return 0;
}

/* One OpenRequests of the connection: the object, its dict and its grown flag now. */
typedef struct {
    PyObject *obj, *calls;
    int grown;
} Open;

typedef struct {
    Open open[4];
    int n;
    Py_ssize_t max_calls, grown_calls, shrunk_calls;
    long response_flag, oneway_flag;
} Naming;

int naming_names(void) {
#define NAME(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    NAME(N_CALLS, "calls") NAME(N_GROWN, "grown") NAME(N_FLAG, "flag") NAME(N_ONEWAY, "oneway")
    NAME(N_LIGHT_FOR, "light_for") NAME(N_COMMAND, "command") NAME(N_RECORD, "record")
    NAME(N_DIRECTION, "direction")
#undef NAME
    return 0;
}

/* The OpenRequests of each value of `directions` (own or peer) read into the state. */
static int read_open(Naming *s, PyObject *directions) {
    Py_ssize_t pos = 0;
    PyObject *key, *obj;
    while (PyDict_Next(directions, &pos, &key, &obj)) {
        int k = 0;
        while (k < s->n && s->open[k].obj != obj) k++;
        if (k < s->n) continue;
        if (s->n == 4) {
            PyErr_SetString(PyExc_ValueError, "named: two directions' open requests");
            return -1;
        }
        PyObject *calls = PyObject_GetAttr(obj, N_CALLS), *grown;
        if (calls == NULL) return -1;
        if (!PyDict_CheckExact(calls)) {
            Py_DECREF(calls);
            PyErr_SetString(PyExc_TypeError, "named: an OpenRequests' calls not a dict");
            return -1;
        }
        if ((grown = PyObject_GetAttr(obj, N_GROWN)) == NULL) {
            Py_DECREF(calls);
            return -1;
        }
        int truth = PyObject_IsTrue(grown);
        Py_DECREF(grown);
        if (truth < 0) {
            Py_DECREF(calls);
            return -1;
        }
        s->open[s->n++] = (Open){Py_NewRef(obj), calls, truth};
    }
    return 0;
}

/* Each OpenRequests' dict and grown flag written back (an error pending kept). */
static int write_open(Naming *s) {
    int failed = 0;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    for (int k = 0; k < s->n; k++) {
        Open *o = &s->open[k];
        if (!failed && (PyObject_SetAttr(o->obj, N_CALLS, o->calls) < 0 ||
                        PyObject_SetAttr(o->obj, N_GROWN, o->grown ? Py_True : Py_False) < 0))
            failed = 1;
        Py_DECREF(o->obj);
        Py_DECREF(o->calls);
    }
    s->n = 0;
    if (type != NULL) {
        if (failed) PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        return -1;
    }
    return failed ? -1 : 0;
}

/* The state's OpenRequests that `directions[direction]` is (KeyError as a dict says it). */
static Open *open_of(Naming *s, PyObject *directions, PyObject *direction) {
    PyObject *obj = PyDict_GetItemWithError(directions, direction);
    if (obj == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, direction);
        return NULL;
    }
    for (int k = 0; k < s->n; k++)
        if (s->open[k].obj == obj) return &s->open[k];
    PyErr_SetString(PyExc_RuntimeError, "named: open requests changed");
    return NULL;
}

/* calls.pop(key, None) (a new reference; NULL: an error), by the call dict.pop makes. */
static PyObject *popped(PyObject *calls, PyObject *key) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *value;
    int found = PyDict_Pop(calls, key, &value);
    return found < 0 ? NULL : found ? value : Py_NewRef(Py_None);
#else
    return _PyDict_Pop(calls, key, Py_None);
#endif
}

/* OpenRequests.answered(opaque): the code of the request `opaque` answers, forgotten now
 * (a new reference; NULL: an error). */
static PyObject *answered(Naming *s, Open *o, PyObject *opaque) {
    PyObject *code = popped(o->calls, opaque);
    if (code != NULL && o->grown && PyDict_GET_SIZE(o->calls) <= s->shrunk_calls) {
        /* dict(calls): sized to its items, in the same order */
        PyObject *fresh = PyObject_CallOneArg((PyObject *)&PyDict_Type, o->calls);
        if (fresh == NULL) {
            Py_DECREF(code);
            return NULL;
        }
        Py_SETREF(o->calls, fresh);
        o->grown = 0;
    }
    return code;
}

/* OpenRequests.asked(record), its `oneway` already known false. */
static int asked(Naming *s, Open *o, PyObject *record) {
    PyObject *opaque = field(record, N_OPAQUE), *code = NULL, *old = NULL;
    int r = -1;
    if (opaque == NULL || (old = popped(o->calls, opaque)) == NULL ||
        (code = field(record, N_CODE)) == NULL ||
        PyDict_SetItem(o->calls, opaque, code) < 0)
        goto done;
    r = 0;
    if (PyDict_GET_SIZE(o->calls) > s->grown_calls) {
        o->grown = 1;
        if (PyDict_GET_SIZE(o->calls) > s->max_calls) { /* the oldest forgotten */
            Py_ssize_t pos = 0;
            PyObject *first, *value;
            if (PyDict_Next(o->calls, &pos, &first, &value)) {
                Py_INCREF(first);
                r = PyDict_DelItem(o->calls, first);
                Py_DECREF(first);
            }
        }
    }
done:
    Py_XDECREF(opaque);
    Py_XDECREF(old);
    Py_XDECREF(code);
    return r;
}

/* flag & mask (1, 0; -1: an error), as Python computes it (`!= 0` to the same truth). */
static int flag_has(PyObject *flag, long mask) {
    if (PyLong_CheckExact(flag)) {
        int overflow;
        long value = PyLong_AsLongAndOverflow(flag, &overflow);
        if (!overflow && !(value == -1 && PyErr_Occurred())) return (value & mask) != 0;
        PyErr_Clear();
    }
    PyObject *m = PyLong_FromLong(mask), *anded = m == NULL ? NULL : PyNumber_And(flag, m);
    Py_XDECREF(m);
    if (anded == NULL) return -1;
    int truth = PyObject_IsTrue(anded);
    Py_DECREF(anded);
    return truth;
}

/* record.oneway (1, 0; -1: an error): a command's from its flag (its property's way). */
static int oneway_of(Naming *s, PyObject *record, PyObject *flag, int is_command) {
    if (is_command && PyLong_CheckExact(flag)) return flag_has(flag, s->oneway_flag);
    PyObject *oneway = field(record, N_ONEWAY);
    if (oneway == NULL) return -1;
    int truth = PyObject_IsTrue(oneway);
    Py_DECREF(oneway);
    return truth;
}

/* getattr(event, "record", None) (a new reference). */
static PyObject *record_of(PyObject *event) {
    PyObject *record = field(event, N_RECORD);
    if (record == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    return record;
}

/* One event named (0; -1: an error). classes: RemotingCommand, HotSend, HotPull,
 * HotAnswer, HotPulled. */
static int name_event(Naming *s, PyObject *event, PyObject *own, PyObject *peer,
                      PyObject *const *classes) {
    PyObject *record = record_of(event), *flag = NULL, *direction = NULL, *opaque = NULL,
             *code = NULL, *light = NULL, *command = NULL;
    if (record == NULL) return -1;
    PyObject *cls = (PyObject *)Py_TYPE(record);
    int r = -1, answer = cls == classes[3] || cls == classes[4];
    if (!answer && cls != classes[0] && cls != classes[1] && cls != classes[2]) {
        Py_DECREF(record);
        return 0;
    }
    int response = 1;
    if (!answer) {
        if ((flag = field(record, N_FLAG)) == NULL ||
            (response = flag_has(flag, s->response_flag)) < 0)
            goto done;
    }
    if ((direction = field(event, N_DIRECTION)) == NULL) goto done;
    if (!response) {
        Open *o = open_of(s, own, direction);
        int oneway = o == NULL ? -1 : oneway_of(s, record, flag, cls == classes[0]);
        r = oneway < 0 ? -1 : oneway ? 0 : asked(s, o, record);
        goto done;
    }
    Open *o = open_of(s, peer, direction);
    if (o == NULL || (opaque = field(record, N_OPAQUE)) == NULL ||
        (code = answered(s, o, opaque)) == NULL ||
        set_field(record, N_REQUEST_CODE, code) < 0)
        goto done;
    if (answer) { /* light only for its request's collectors */
        int light_here;
        if ((light = field(record, N_LIGHT_FOR)) == NULL ||
            (light_here = PyFrozenSet_CheckExact(light) ? PySet_Contains(light, code)
                                                        : PySequence_Contains(light, code)) < 0)
            goto done;
        if (!light_here && ((command = PyObject_CallMethodNoArgs(record, N_COMMAND)) == NULL ||
                            set_field(event, N_RECORD, command) < 0))
            goto done;
    }
    r = 0;
done:
    Py_DECREF(record);
    Py_XDECREF(flag);
    Py_XDECREF(direction);
    Py_XDECREF(opaque);
    Py_XDECREF(code);
    Py_XDECREF(light);
    Py_XDECREF(command);
    return r;
}

/* (in_order, own, peer, classes, (max, grown, shrunk), (response flag, oneway flag)) ->
 * None: plain_walk.named_in_order(in_order, own, peer), with framing's bounds and the
 * spec's flags given. */
PyObject *named(PyObject *self, PyObject *args) {
    PyObject *in_order, *own, *peer, *classes;
    Naming s = {.n = 0};
    if (!PyArg_ParseTuple(args, "O!O!O!O!(nnn)(ll)", &PyList_Type, &in_order, &PyDict_Type,
                          &own, &PyDict_Type, &peer, &PyTuple_Type, &classes, &s.max_calls,
                          &s.grown_calls, &s.shrunk_calls, &s.response_flag, &s.oneway_flag))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != 5) {
        PyErr_SetString(PyExc_ValueError, "named: the five record classes");
        return NULL;
    }
    if (read_open(&s, own) < 0 || read_open(&s, peer) < 0) {
        write_open(&s);
        return NULL;
    }
    Py_INCREF(in_order);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(in_order); k++) {
        PyObject *item = PyList_GET_ITEM(in_order, k);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "named: (row, slot, event) items");
            break;
        }
        PyObject *event = Py_NewRef(PyTuple_GET_ITEM(item, 2));
        int r = name_event(&s, event, own, peer, &PyTuple_GET_ITEM(classes, 0));
        Py_DECREF(event);
        if (r < 0) break;
    }
    Py_DECREF(in_order);
    if (write_open(&s) < 0) return NULL;
    Py_RETURN_NONE;
}
