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
 * in_time_order: the block's items of the connection sorted for it (sorted(filter(None,
 * ...)), by their rows and slots as numbers), or None where Python's sort must decide.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <structmember.h>

#include "_native.h"

static PyObject *N_CALLS, *N_GROWN, *N_FLAG, *N_ONEWAY, *N_LIGHT_FOR, *N_COMMAND, *N_RECORD,
    *N_DIRECTION;

/* How one class's instances give a name, found once for the call as the generic lookup
 * finds it: from a slot (at >= 0), as the class's attribute that is no descriptor on
 * instances without a dict (`constant`, held), or else by getattr. */
typedef struct {
    Py_ssize_t at;
    PyObject *constant;
} Way;

static Way way_of(PyTypeObject *type, PyObject *name) {
    Way way = {-1, NULL};
    if (type->tp_getattro != PyObject_GenericGetAttr) return way;
    PyObject *d = _PyType_Lookup(type, name);
    if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)d)->d_member;
        if (member->type == T_OBJECT_EX) way.at = member->offset;
    } else if (d != NULL && Py_TYPE(d)->tp_descr_get == NULL && type->tp_dictoffset == 0 &&
               !(type->tp_flags & Py_TPFLAGS_MANAGED_DICT)) {
        way.constant = Py_NewRef(d);
    }
    return way;
}

/* obj.name read its class's way (a new reference; NULL: an error). */
static PyObject *read_way(PyObject *obj, Way way, PyObject *name) {
    if (way.constant != NULL) return Py_NewRef(way.constant);
    PyObject *value = way.at >= 0 ? *(PyObject **)((char *)obj + way.at) : NULL;
    return value != NULL ? Py_NewRef(value) : PyObject_GetAttr(obj, name); /* (unset: its error) */
}

/* obj.name (a new reference; NULL: an error), for an object of any class. */
static PyObject *field(PyObject *obj, PyObject *name) {
    Way way = way_of(Py_TYPE(obj), name);
    PyObject *value = read_way(obj, way, name);
    Py_XDECREF(way.constant);
    return value;
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

/* How the records of one of the five classes are read and named, for the call. */
typedef struct {
    PyObject *type;
    Way opaque, flag, code, oneway, light_for;
    Py_ssize_t request_code_at; /* (the slot written as its descriptor writes it; -1: setattr) */
    Py_ssize_t frame_at;        /* (its frame's slot, let go when it is its own event; -1) */
} Kind;

/* The open requests a direction's events go to, by direction: the last two seen (held). */
typedef struct {
    PyObject *direction[2];
    Open *open[2];
} Seen;

typedef struct {
    Open open[4];
    int n;
    Py_ssize_t max_calls, grown_calls, shrunk_calls;
    long response_flag, oneway_flag;
    Kind kinds[5]; /* RemotingCommand, HotSend, HotPull, HotAnswer, HotPulled */
    Seen own_seen, peer_seen;
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

/* The state's OpenRequests that `directions[direction]` is (KeyError as a dict says it),
 * the last two directions' remembered in `seen`. */
static Open *open_of(Naming *s, Seen *seen, PyObject *directions, PyObject *direction) {
    for (int k = 0; k < 2; k++)
        if (seen->direction[k] == direction) return seen->open[k];
    PyObject *obj = PyDict_GetItemWithError(directions, direction);
    if (obj == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, direction);
        return NULL;
    }
    for (int k = 0; k < s->n; k++)
        if (s->open[k].obj == obj) {
            Py_XSETREF(seen->direction[1], seen->direction[0]);
            seen->open[1] = seen->open[0];
            seen->direction[0] = Py_NewRef(direction);
            return seen->open[0] = &s->open[k];
        }
    PyErr_SetString(PyExc_RuntimeError, "named: open requests changed");
    return NULL;
}

/* calls.pop(key, None) (a new reference; NULL: an error), by the call dict.pop makes
 * (shared: _native.h). */
PyObject *dict_popped(PyObject *calls, PyObject *key) {
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
    PyObject *code = dict_popped(o->calls, opaque);
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
static int asked(Naming *s, Open *o, Kind *kind, PyObject *record) {
    PyObject *opaque = read_way(record, kind->opaque, N_OPAQUE), *code = NULL, *old = NULL;
    int r = -1;
    if (opaque == NULL || (old = dict_popped(o->calls, opaque)) == NULL ||
        (code = read_way(record, kind->code, N_CODE)) == NULL ||
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
static int oneway_of(Naming *s, Kind *kind, PyObject *record, PyObject *flag) {
    if (kind == &s->kinds[0] && PyLong_CheckExact(flag)) return flag_has(flag, s->oneway_flag);
    PyObject *oneway = read_way(record, kind->oneway, N_ONEWAY);
    if (oneway == NULL) return -1;
    int truth = PyObject_IsTrue(oneway);
    Py_DECREF(oneway);
    return truth;
}

/* event.`name` (a new reference; NULL: an error): the slot of a registered frame event. */
static PyObject *event_field(PyObject *event, PyObject *name, int at) {
    PyObject *value = event_slot(event, at);
    return value != NULL ? Py_NewRef(value) : field(event, name);
}

/* A light answer that was its own event made a command (its item in `items`, the block's
 * slots, then (row, slot, frame event of the command): plain_walk.as_command_event). */
static int own_event_replaced(PyObject *item, PyObject *items, PyObject *event,
                              PyObject *command) {
    PyObject *fields[5], *slot = PyTuple_GET_ITEM(item, 1);
    for (int k = 0; k < 4; k++)
        if (EVENT_CLASS == NULL || (fields[k] = event_slot(event, k)) == NULL) {
            PyErr_SetString(PyExc_TypeError, "named: a light answer its own event, but the "
                                             "event classes not registered (native.py)");
            return -1;
        }
    fields[4] = command;
    Py_ssize_t at = PyLong_AsSsize_t(slot);
    if (at == -1 && PyErr_Occurred()) return -1;
    if (items == NULL || at < 0 || at >= PyList_GET_SIZE(items) ||
        PyList_GET_ITEM(items, at) != item) {
        PyErr_SetString(PyExc_ValueError, "named: a light answer's item not in its slot");
        return -1;
    }
    PyObject *made = frame_event(fields), *placed;
    if (made == NULL) return -1;
    placed = PyTuple_Pack(3, PyTuple_GET_ITEM(item, 0), slot, made);
    Py_DECREF(made);
    if (placed == NULL) return -1;
    return PyList_SetItem(items, at, placed); /* (steals placed) */
}

/* A light record that is its own event, named and left light: its frame (kept for its
 * `command()`, which only the naming asks) let go now, while it is warm, not with the
 * block's other objects (plain_walk.named_in_order). */
static void own_frame_let_go(PyObject *record, Py_ssize_t at) {
    Py_XSETREF(*(PyObject **)((char *)record + at), Py_NewRef(Py_None));
}

/* One event named (0; -1: an error). */
static int name_event(Naming *s, PyObject *item, PyObject *items, PyObject *own,
                      PyObject *peer) {
    PyObject *event = PyTuple_GET_ITEM(item, 2);
    PyObject *record = event_field(event, N_RECORD, 4), *flag = NULL, *direction = NULL,
             *opaque = NULL, *code = NULL, *light = NULL, *command = NULL;
    if (record == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear(); /* (getattr(event, "record", None): no record, nothing named) */
        return 0;
    }
    Kind *kind = NULL;
    for (int k = 0; k < 5; k++)
        if ((PyObject *)Py_TYPE(record) == s->kinds[k].type) kind = &s->kinds[k];
    if (kind == NULL) {
        Py_DECREF(record);
        return 0;
    }
    int r = -1, answer = kind >= &s->kinds[3], response = 1;
    if (!answer) {
        if ((flag = read_way(record, kind->flag, N_FLAG)) == NULL ||
            (response = flag_has(flag, s->response_flag)) < 0)
            goto done;
    }
    if ((direction = event_field(event, N_DIRECTION, 2)) == NULL) goto done;
    if (!response) {
        Open *o = open_of(s, &s->own_seen, own, direction);
        int oneway = o == NULL ? -1 : oneway_of(s, kind, record, flag);
        r = oneway < 0 ? -1 : oneway ? 0 : asked(s, o, kind, record);
        goto done;
    }
    Open *o = open_of(s, &s->peer_seen, peer, direction);
    if (o == NULL || (opaque = read_way(record, kind->opaque, N_OPAQUE)) == NULL ||
        (code = answered(s, o, opaque)) == NULL)
        goto done;
    if (kind->request_code_at >= 0)
        Py_XSETREF(*(PyObject **)((char *)record + kind->request_code_at), Py_NewRef(code));
    else if (PyObject_SetAttr(record, N_REQUEST_CODE, code) < 0)
        goto done;
    if (answer) { /* light only for its request's collectors */
        int light_here;
        if ((light = read_way(record, kind->light_for, N_LIGHT_FOR)) == NULL ||
            (light_here = PyFrozenSet_CheckExact(light) ? PySet_Contains(light, code)
                                                        : PySequence_Contains(light, code)) < 0)
            goto done;
        if (!light_here &&
            ((command = PyObject_CallMethodNoArgs(record, N_COMMAND)) == NULL ||
             (record == event ? own_event_replaced(item, items, event, command)
                              : set_field(event, N_RECORD, command)) < 0))
            goto done;
    }
    r = 0;
done:
    if (r == 0 && record == event && command == NULL && kind->frame_at >= 0)
        own_frame_let_go(record, kind->frame_at);
    Py_DECREF(record);
    Py_XDECREF(flag);
    Py_XDECREF(direction);
    Py_XDECREF(opaque);
    Py_XDECREF(code);
    Py_XDECREF(light);
    Py_XDECREF(command);
    return r;
}

/* How each of the five classes' records are read (0; -1: not classes). */
static int kinds_of(Naming *s, PyObject *classes) {
    for (int k = 0; k < 5; k++) {
        PyObject *cls = PyTuple_GET_ITEM(classes, k);
        if (!PyType_Check(cls)) {
            PyErr_SetString(PyExc_TypeError, "named: the five record classes");
            return -1;
        }
        PyTypeObject *type = (PyTypeObject *)cls;
        s->kinds[k] = (Kind){Py_NewRef(cls), way_of(type, N_OPAQUE), way_of(type, N_FLAG),
                             way_of(type, N_CODE), way_of(type, N_ONEWAY),
                             way_of(type, N_LIGHT_FOR),
                             type->tp_setattro == PyObject_GenericSetAttr
                                 ? slot_offset(type, N_REQUEST_CODE) : -1,
                             type->tp_setattro == PyObject_GenericSetAttr
                                 ? slot_offset(type, N_FRAME) : -1};
    }
    return 0;
}

/* What the call held of the classes and directions, let go. */
static void release_naming(Naming *s) {
    for (int k = 0; k < 5; k++) {
        Kind *kind = &s->kinds[k];
        Py_CLEAR(kind->type);
        Py_CLEAR(kind->opaque.constant);
        Py_CLEAR(kind->flag.constant);
        Py_CLEAR(kind->code.constant);
        Py_CLEAR(kind->oneway.constant);
        Py_CLEAR(kind->light_for.constant);
    }
    for (int k = 0; k < 2; k++) {
        Py_CLEAR(s->own_seen.direction[k]);
        Py_CLEAR(s->peer_seen.direction[k]);
    }
}

#if defined(__GNUC__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)(address))
#endif

/* What the loop reads a few items on asked of the memory now (a block's objects are cold by
 * its end, and each item is a chain of them): the item 16 on, the event of the one 8 on, the
 * record of the one 4 on (pointers read only where the types say where they are). */
static void ahead(PyObject *in_order, Py_ssize_t k) {
    PyObject **items = ((PyListObject *)in_order)->ob_item, *item, *event;
    Py_ssize_t n = PyList_GET_SIZE(in_order);
    if (k + 16 < n) PREFETCH(items[k + 16]);
    if (k + 8 < n && PyTuple_CheckExact(item = items[k + 8]) && PyTuple_GET_SIZE(item) == 3)
        PREFETCH(PyTuple_GET_ITEM(item, 2));
    if (k + 4 < n && PyTuple_CheckExact(item = items[k + 4]) && PyTuple_GET_SIZE(item) == 3 &&
        EVENT_CLASS != NULL && (PyObject *)Py_TYPE(event = PyTuple_GET_ITEM(item, 2)) == EVENT_CLASS)
        PREFETCH(*(PyObject **)((char *)event + EVENT_AT[4]));
}

/* (in_order, own, peer, classes, (max, grown, shrunk), (response flag, oneway flag)[,
 * items]) -> None: plain_walk.named_in_order(in_order, own, peer, items), with framing's
 * bounds and the spec's flags given (classes: RemotingCommand, HotSend, HotPull,
 * HotAnswer, HotPulled; items: the block's slots, where a light answer that was its own
 * event is replaced when it is made a command). */
PyObject *named(PyObject *self, PyObject *args) {
    PyObject *in_order, *own, *peer, *classes, *items = NULL;
    Naming s = {.n = 0};
    if (!PyArg_ParseTuple(args, "O!O!O!O!(nnn)(ll)|O!", &PyList_Type, &in_order, &PyDict_Type,
                          &own, &PyDict_Type, &peer, &PyTuple_Type, &classes, &s.max_calls,
                          &s.grown_calls, &s.shrunk_calls, &s.response_flag, &s.oneway_flag,
                          &PyList_Type, &items))
        return NULL;
    if (PyTuple_GET_SIZE(classes) != 5) {
        PyErr_SetString(PyExc_ValueError, "named: the five record classes");
        return NULL;
    }
    if (kinds_of(&s, classes) < 0 || read_open(&s, own) < 0 || read_open(&s, peer) < 0) {
        release_naming(&s);
        write_open(&s);
        return NULL;
    }
    Py_INCREF(in_order);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(in_order); k++) {
        ahead(in_order, k);
        PyObject *item = PyList_GET_ITEM(in_order, k);
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "named: (row, slot, event) items");
            break;
        }
        Py_INCREF(item);
        int r = name_event(&s, item, items, own, peer);
        Py_DECREF(item);
        if (r < 0) break;
    }
    Py_DECREF(in_order);
    release_naming(&s);
    if (write_open(&s) < 0) return NULL;
    Py_RETURN_NONE;
}

/* An item and its (row, slot) as one number: row in the high half. */
typedef struct {
    uint64_t key;
    PyObject *item;
} Keyed;

/* The item's key (1), or 0: not a (row, slot, event) tuple of ints in [0, 2**32). */
static int key_of(PyObject *item, uint64_t *key) {
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3) return 0;
    PyObject *row = PyTuple_GET_ITEM(item, 0), *slot = PyTuple_GET_ITEM(item, 1);
    if (!PyLong_CheckExact(row) || !PyLong_CheckExact(slot)) return 0;
    int overflow_row, overflow_slot;
    long long r = PyLong_AsLongLongAndOverflow(row, &overflow_row),
              s = PyLong_AsLongLongAndOverflow(slot, &overflow_slot);
    if (overflow_row || overflow_slot || r < 0 || s < 0 || r > UINT32_MAX || s > UINT32_MAX)
        return 0;
    *key = (uint64_t)r << 32 | (uint64_t)s;
    return 1;
}

/* a[:n] sorted by key (b: as much room): its ascending runs (a direction's walk each)
 * merged two by two until one is left; the buffer that holds it returned. */
static Keyed *runs_merged(Keyed *a, Keyed *b, Py_ssize_t n) {
    for (;;) {
        Py_ssize_t i = 0, runs = 0;
        while (i < n) {
            Py_ssize_t mid = i + 1, end;
            while (mid < n && a[mid - 1].key <= a[mid].key) mid++;
            for (end = mid < n ? mid + 1 : n; end < n && a[end - 1].key <= a[end].key;) end++;
            Py_ssize_t x = i, y = mid, o = i;
            while (x < mid && y < end) b[o++] = a[y].key < a[x].key ? a[y++] : a[x++];
            while (x < mid) b[o++] = a[x++];
            while (y < end) b[o++] = a[y++];
            runs++;
            i = end;
        }
        Keyed *t = a;
        a = b;
        b = t;
        if (runs <= 1) return a;
    }
}

/* (items, start) -> sorted(filter(None, items[start:])) where every item kept is a (row,
 * slot, event) tuple of a row and a slot in [0, 2**32), no two of the same row and slot
 * (their order is then their keys' alone: the one Python's sort gives); else None (the
 * Python sort decides: a float slot, equal keys whose events it compares, another item). */
PyObject *in_time_order(PyObject *self, PyObject *args) {
    PyObject *items, *out = NULL;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &items, &start)) return NULL;
    Py_ssize_t size = PyList_GET_SIZE(items), n = 0;
    if (start < 0 || start > size) Py_RETURN_NONE;
    Keyed *a = PyMem_Malloc(sizeof(Keyed) * (size - start + 1)),
          *b = PyMem_Malloc(sizeof(Keyed) * (size - start + 1));
    if (a == NULL || b == NULL) {
        PyMem_Free(a);
        PyMem_Free(b);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = start; k < size; k++) {
        PyObject *item = PyList_GET_ITEM(items, k);
        if (item == Py_None) continue;
        if (!key_of(item, &a[n].key)) goto python;
        a[n++].item = item;
    }
    Keyed *sorted = runs_merged(a, b, n);
    for (Py_ssize_t k = 1; k < n; k++)
        if (sorted[k].key == sorted[k - 1].key) goto python;
    if ((out = PyList_New(n)) != NULL)
        for (Py_ssize_t k = 0; k < n; k++) PyList_SET_ITEM(out, k, Py_NewRef(sorted[k].item));
    PyMem_Free(a);
    PyMem_Free(b);
    return out;
python:
    PyMem_Free(a);
    PyMem_Free(b);
    Py_RETURN_NONE;
}
