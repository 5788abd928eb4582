/* send_runs._frames compiled (part of the _native extension, setup.py builds it with
 * _native.c): a run of light sends and their answers taken by the collectors, the Python
 * loop's twin (send_runs.py says what it does; tests/test_rocketmq_send_runs.py holds both
 * loops to the collectors taking each frame, in both modes). Its counts and last times (a
 * frame's two or three dict writes) are kept pending and written once a run, and before
 * any Python code the loop calls (a new call group, the unusual cases): what Python reads
 * of the dicts is what the frame-by-frame writes leave (`Pending`). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "_native.h"

static PyObject *N_RECORD, *N_CONNECTION, *N_DIRECTION;
static PyObject *S_REQUESTS_C2S, *S_REQUESTS_S2C, *S_ONEWAY, *S_RESPONSES, *S_FIRST, *S_LAST,
    *S_CALLS, *S_ANSWERED, *S_DUPLICATES, *S_C2S, *S_S2C, *S_REQUESTS_, *N_KEPT, *N_KEEPER,
    *N_TS_NS, *N_ORPHAN, *N_ERROR, *N_ANSWERED_CALL, *ZERO, *ONE, *MILLION, *COMMA;

/* A frame event's field (its slot when its class keeps it in one: event_slot); a new
 * reference. */
static PyObject *field(PyObject *ev, int k, PyObject *name) {
    PyObject *v = event_slot(ev, k);
    return v != NULL ? Py_NewRef(v) : PyObject_GetAttr(ev, name);
}

/* d[key] += 1 */
static int bump(PyObject *d, PyObject *key) {
    PyObject *v = PyObject_GetItem(d, key), *w;
    if (v == NULL) return -1;
    w = PyNumber_Add(v, ONE);
    Py_DECREF(v);
    if (w == NULL) return -1;
    int r = PyObject_SetItem(d, key, w);
    Py_DECREF(w);
    return r;
}

/* slot_offset(type, name), remembered for the type as it is now (its version tag: a class
 * changed since has another) in a small table by the type's and the name's identity (the
 * loop reads a few names of a few classes, each a frame). */
#define SLOTS_KNOWN 128
static struct {
    PyTypeObject *type;
    PyObject *name;
    unsigned int tag;
    Py_ssize_t at;
} SLOT_AT[SLOTS_KNOWN];

static Py_ssize_t slot_at(PyTypeObject *type, PyObject *name) {
    uint64_t mixed = (uint64_t)(uintptr_t)type * 0x9E3779B97F4A7C15u ^
                     (uint64_t)(uintptr_t)name * 0xC2B2AE3D27D4EB4Fu;
    size_t k = (size_t)(mixed >> 57) % SLOTS_KNOWN; /* (its high bits: all of both mixed) */
    if (SLOT_AT[k].type == type && SLOT_AT[k].name == name && SLOT_AT[k].tag != 0 &&
        SLOT_AT[k].tag == type->tp_version_tag) /* (a changed class's tag is 0, then new) */
        return SLOT_AT[k].at;
    Py_ssize_t at = slot_offset(type, name); /* (its look-up gives the type a version tag) */
    if (type->tp_version_tag != 0) {
        /* (the type and name not held: a freed one's address matches only with its tag) */
        SLOT_AT[k].type = type, SLOT_AT[k].name = name;
        SLOT_AT[k].tag = type->tp_version_tag, SLOT_AT[k].at = at;
    }
    return at;
}

/* obj.name, read from its slot when its class keeps it in one (as the member descriptor
 * reads it), else the generic way; a new reference. */
static PyObject *get(PyObject *obj, PyObject *name) {
    Py_ssize_t at = slot_at(Py_TYPE(obj), name);
    if (at < 0) return PyObject_GetAttr(obj, name);
    PyObject *v = *(PyObject **)((char *)obj + at);
    if (v == NULL) return PyObject_GetAttr(obj, name); /* (unset: its AttributeError) */
    return Py_NewRef(v);
}

/* (ts_ns - request_ts) / 1e6, as Python computes it. */
static PyObject *latency(PyObject *ts_ns, PyObject *request_ts) {
    PyObject *lag = PyNumber_Subtract(ts_ns, request_ts), *out;
    if (lag == NULL) return NULL;
    out = PyNumber_TrueDivide(lag, MILLION);
    Py_DECREF(lag);
    return out;
}

static int set_item(PyObject *row, Py_ssize_t at, PyObject *value) {
    if (value == NULL) return -1;
    return PyList_SetItem(row, at, value); /* (steals value; checks the index) */
}

/* A write to a counts dict kept until Python code may read it (flushed): the loop's
 * counts (calls, answered, a connection's requests and responses) and last times, a
 * frame each, written once a run. `added` > 0: value + added; 0: value set. */
#define PENDING 128
typedef struct {
    PyObject *dict, *key, *value;
    Py_ssize_t added;
} Pending;

typedef struct {
    PyObject *open_calls, *of_connection, *group_of, *seen_of, *base, *begun, *done, *paired,
        *latencies, *server_of, *message_row, *unusual, *sends, *send_class, *code, *name,
        *hot_status, *send_ok, *left;
    Py_ssize_t at[8];      /* the columns a SEND_OK's answer sets */
    Py_ssize_t width;      /* a send row's length */
    Py_ssize_t row_at[16]; /* where message_row puts each of its values */
    PyObject *last_connection, *last_server; /* (server_of's last answer, held) */
    PyObject *group_connection, *group_direction, *group_pair; /* (the last send's group) */
    Pending pending[PENDING];
    int pending_count;
    unsigned char used[PENDING / 2]; /* the slots taken, in order (flushed: those alone) */
} RunState;

/* The pending writes let go of the dicts (after an error: their references dropped). */
static void pending_dropped(RunState *st) {
    for (int k = 0; k < st->pending_count; k++) {
        Pending *p = &st->pending[st->used[k]];
        Py_CLEAR(p->dict);
        Py_CLEAR(p->key);
        Py_CLEAR(p->value);
    }
    st->pending_count = 0;
}

/* Every pending write made, in the dicts (before Python code runs, and at the run's end):
 * a count's value plus what was added to it, a set value; 0, or -1 (an error: the writes
 * not made dropped). */
static int flushed(RunState *st) {
    int r = 0;
    for (int k = 0; k < st->pending_count; k++) {
        Pending *p = &st->pending[st->used[k]];
        if (r == 0) {
            PyObject *value = p->value;
            if (p->added) {
                PyObject *added = PyLong_FromSsize_t(p->added);
                value = added == NULL ? NULL : PyNumber_Add(p->value, added);
                Py_XDECREF(added);
            } else {
                Py_INCREF(value);
            }
            if (value == NULL || PyDict_SetItem(p->dict, p->key, value) < 0) r = -1;
            Py_XDECREF(value);
        }
        Py_CLEAR(p->dict);
        Py_CLEAR(p->key);
        Py_CLEAR(p->value);
    }
    st->pending_count = 0;
    return r;
}

/* The pending write of d[key] (its slot: found, or free), or NULL: the table too full
 * (flush it). Found by the dict's and the key's identity (the keys are the loop's own
 * constant strings). */
static Pending *pending_of(RunState *st, PyObject *d, PyObject *key) {
    if (st->pending_count >= PENDING / 2) return NULL;
    size_t at = (((uintptr_t)d >> 4) ^ ((uintptr_t)key >> 3) * 31) % PENDING;
    for (;;) {
        Pending *p = &st->pending[at];
        if (p->dict == NULL || (p->dict == d && p->key == key)) return p;
        at = (at + 1) % PENDING;
    }
}

/* d[key] += 1, the write kept pending (d an exact dict holding an exact int there, key one
 * of the loop's constants); else at once, as Python does it (after the pending writes). */
static int bump_pending(RunState *st, PyObject *d, PyObject *key) {
    Pending *p = PyDict_CheckExact(d) ? pending_of(st, d, key) : NULL;
    if (p != NULL && p->dict != NULL && p->added) {
        p->added++;
        return 0;
    }
    PyObject *v = p != NULL && p->dict == NULL ? PyDict_GetItemWithError(d, key) : NULL;
    if (v == NULL || !PyLong_CheckExact(v)) {
        if (PyErr_Occurred() || flushed(st) < 0) return -1;
        return bump(d, key);
    }
    *p = (Pending){Py_NewRef(d), Py_NewRef(key), Py_NewRef(v), 1};
    st->used[st->pending_count++] = (unsigned char)(p - st->pending);
    return 0;
}

/* d[key] = value, the write kept pending (d an exact dict); else at once. */
static int set_pending(RunState *st, PyObject *d, PyObject *key, PyObject *value) {
    Pending *p = PyDict_CheckExact(d) ? pending_of(st, d, key) : NULL;
    if (p == NULL || (p->dict != NULL && p->added)) {
        if (flushed(st) < 0) return -1;
        return PyDict_SetItem(d, key, value);
    }
    if (p->dict != NULL) {
        Py_SETREF(p->value, Py_NewRef(value));
        return 0;
    }
    *p = (Pending){Py_NewRef(d), Py_NewRef(key), Py_NewRef(value), 0};
    st->used[st->pending_count++] = (unsigned char)(p - st->pending);
    return 0;
}

/* "requests_" + direction (the two usual ones made once); a new reference. */
static PyObject *requests_of(PyObject *direction) {
    int c2s = PyUnicode_Compare(direction, S_C2S);
    if (c2s == 0) return Py_NewRef(S_REQUESTS_C2S);
    if (c2s == -1 && PyErr_Occurred()) return NULL;
    if (PyUnicode_Compare(direction, S_S2C) == 0) return Py_NewRef(S_REQUESTS_S2C);
    return PyErr_Occurred() ? NULL : PyUnicode_Concat(S_REQUESTS_, direction);
}

/* server_of(connection), asked again only when the connection is not the last one's. */
static PyObject *server_for(RunState *st, PyObject *connection) {
    if (connection == st->last_connection) return Py_NewRef(st->last_server);
    PyObject *server = PyObject_CallOneArg(st->server_of, connection);
    if (server != NULL) {
        Py_XSETREF(st->last_connection, Py_NewRef(connection));
        Py_XSETREF(st->last_server, Py_NewRef(server));
    }
    return server;
}

/* A light send (send_runs._frames' first branch). */
static int run_send(RunState *st, PyObject *ev, PyObject *rec, PyObject *connection,
                    PyObject *direction, PyObject *ts_ns, PyObject *seen) {
    int r = -1;
    PyObject *at = NULL, *pair = NULL, *opaque = NULL, *key = NULL, *previous = NULL,
             *count = NULL, *server = NULL, *row = NULL, *index = NULL, *entry = NULL;
    PyObject *wire = NULL, *group_ = NULL, *topic = NULL, *queue = NULL, *msg = NULL,
             *tags = NULL, *keys = NULL;
    if (connection == st->group_connection && direction == st->group_direction) {
        /* (the last send's: a group once made for its key is never replaced) */
        pair = Py_NewRef(st->group_pair);
    } else {
        if ((at = PyTuple_Pack(3, st->code, connection, direction)) == NULL) goto done;
        pair = PyDict_GetItemWithError(st->of_connection, at);
        if (pair != NULL) {
            Py_INCREF(pair);
        } else {
            if (PyErr_Occurred()) goto done;
            PyObject *args[3] = {st->code, connection, direction};
            if (flushed(st) < 0 ||
                (pair = PyObject_Vectorcall(st->group_of, args, 3, NULL)) == NULL)
                goto done;
        }
        Py_XSETREF(st->group_connection, Py_NewRef(connection));
        Py_XSETREF(st->group_direction, Py_NewRef(direction));
        Py_XSETREF(st->group_pair, Py_NewRef(pair));
    }
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "send_run: a call group is (counts, sample)");
        goto done;
    }
    PyObject *group = PyTuple_GET_ITEM(pair, 0), *sample = PyTuple_GET_ITEM(pair, 1);
    if (bump_pending(st, group, S_CALLS) < 0) goto done;
    if ((opaque = get(rec, N_OPAQUE)) == NULL) goto done;
    if ((key = PyTuple_Pack(3, connection, direction, opaque)) == NULL) goto done;
    if ((previous = dict_popped(st->paired, key)) == NULL) goto done;
    if (previous != Py_None) { /* (a send of the run: its row never answered) */
        if (PyList_Append(st->left, PyTuple_GET_ITEM(previous, 1)) < 0) goto done;
    } else {
        Py_DECREF(previous);
        if ((previous = dict_popped(st->open_calls, key)) == NULL) goto done;
    }
    if (previous != Py_None) {
        if (!PyTuple_Check(previous) || PyTuple_GET_SIZE(previous) != 5) {
            PyErr_SetString(PyExc_TypeError, "send_run: an open call is a 5-tuple");
            goto done;
        }
        if (bump_pending(st, PyTuple_GET_ITEM(previous, 3), S_DUPLICATES) < 0) goto done;
    }
    if ((count = requests_of(direction)) == NULL) goto done;
    if ((count == S_REQUESTS_C2S || count == S_REQUESTS_S2C ? bump_pending(st, seen, count)
                                                             : flushed(st) < 0 ? -1
                                                             : bump(seen, count)) < 0)
        goto done;
    if ((server = server_for(st, connection)) == NULL) goto done;
    if ((wire = get(rec, N_WIRE)) == NULL ||
        (group_ = get(rec, N_GROUP)) == NULL ||
        (topic = get(rec, N_TOPIC)) == NULL ||
        (queue = get(rec, N_QUEUE_ID)) == NULL ||
        (msg = get(rec, N_MSG_ID)) == NULL ||
        (tags = get(rec, N_TAGS)) == NULL ||
        (keys = get(rec, N_KEYS)) == NULL)
        goto done;
    PyObject *values[16] = {connection, server, ts_ns, opaque, st->name, ZERO, st->hot_status,
                            group_, topic, queue, msg, tags, keys, Py_False, wire, wire};
    /* (message_row(*values): Nones, each value at its column) */
    if ((row = PyList_New(st->width)) == NULL) goto done;
    for (Py_ssize_t k = 0; k < st->width; k++) PyList_SET_ITEM(row, k, Py_NewRef(Py_None));
    for (int k = 0; k < 16; k++)
        if (set_item(row, st->row_at[k], Py_NewRef(values[k])) < 0) goto done;
    if ((index = PyLong_FromSsize_t(PyList_GET_SIZE(st->begun))) == NULL) goto done;
    Py_SETREF(index, PyNumber_Add(st->base, index));
    if (index == NULL) goto done;
    if ((entry = PyTuple_Pack(5, ev, index, row, group, sample)) == NULL) goto done;
    if (PyDict_SetItem(st->paired, key, entry) < 0 || PyList_Append(st->begun, row) < 0)
        goto done;
    r = 0;
done:
    Py_XDECREF(at); Py_XDECREF(pair); Py_XDECREF(opaque); Py_XDECREF(key);
    Py_XDECREF(previous); Py_XDECREF(count); Py_XDECREF(server); Py_XDECREF(row);
    Py_XDECREF(index); Py_XDECREF(entry); Py_XDECREF(wire); Py_XDECREF(group_);
    Py_XDECREF(topic); Py_XDECREF(queue); Py_XDECREF(msg); Py_XDECREF(tags); Py_XDECREF(keys);
    return r;
}

/* A SEND_OK's answer to one light send's row (calls.answer and SendCollector.answered). */
static int answer_row(RunState *st, PyObject *row, PyObject *rec, PyObject *ts_ns,
                      PyObject *lag) {
    PyObject *remark = get(rec, N_REMARK), *v;
    if (remark == NULL) return -1;
    if (PyUnicode_CheckExact(remark)) PyUnicode_InternInPlace(&remark); /* (rows.shared) */
    if (set_item(row, st->at[0], Py_NewRef(ts_ns)) < 0 ||
        set_item(row, st->at[1], Py_NewRef(lag)) < 0 ||
        set_item(row, st->at[2], Py_NewRef(ZERO)) < 0 || set_item(row, st->at[3], remark) < 0 ||
        set_item(row, st->at[4], Py_NewRef(st->send_ok)) < 0)
        return -1;
    if ((v = get(rec, N_QUEUE_ID)) == NULL) return -1;
    if (v == Py_None) Py_DECREF(v);
    else if (set_item(row, st->at[5], v) < 0) return -1;
    if ((v = get(rec, N_QUEUE_OFFSET)) == NULL) return -1;
    if (v == Py_None) Py_DECREF(v);
    else if (set_item(row, st->at[6], v) < 0) return -1;
    if ((v = get(rec, N_MSG_ID)) == NULL) return -1;
    int truth = PyObject_IsTrue(v);
    if (truth < 0) {
        Py_DECREF(v);
        return -1;
    }
    if (truth && PyUnicode_CheckExact(v)) { /* (the same without a list: up to a comma) */
        Py_ssize_t comma = PyUnicode_FindChar(v, ',', 0, PyUnicode_GET_LENGTH(v), 1);
        PyObject *first = comma == -2 ? NULL
                          : comma == -1 ? Py_NewRef(v) : PyUnicode_Substring(v, 0, comma);
        Py_DECREF(v);
        if (first == NULL) return -1;
        if (PyUnicode_GET_LENGTH(first)) return set_item(row, st->at[7], first);
        Py_DECREF(first);
    } else if (truth) { /* msg_ids.split(",", 1)[0], when not empty */
        PyObject *parts = PyUnicode_Split(v, COMMA, 1), *first;
        Py_DECREF(v);
        if (parts == NULL) return -1;
        first = PyList_GET_ITEM(parts, 0);
        if (PyUnicode_GET_LENGTH(first) && set_item(row, st->at[7], Py_NewRef(first)) < 0) {
            Py_DECREF(parts);
            return -1;
        }
        Py_DECREF(parts);
    } else {
        Py_DECREF(v);
    }
    return 0;
}

/* latencies[sample] (a list, made at its first) gets `lag`. */
static int lag_kept(PyObject *latencies, PyObject *sample, PyObject *lag) {
    PyObject *lags = PyDict_GetItemWithError(latencies, sample);
    if (lags == NULL) {
        if (PyErr_Occurred() || (lags = PyList_New(0)) == NULL) return -1;
        int bad = PyDict_SetItem(latencies, sample, lags);
        Py_DECREF(lags);
        if (bad < 0) return -1;
    }
    return PyList_Append(lags, lag);
}

/* A light answer to a send (send_runs._frames' second branch). */
static int run_answer(RunState *st, PyObject *ev, PyObject *rec, PyObject *connection,
                      PyObject *direction, PyObject *ts_ns, PyObject *seen) {
    int r = -1;
    PyObject *other, *opaque = NULL, *key = NULL, *code = NULL, *found = NULL, *request,
                     *asked = Py_None, *group, *sample, *kept = NULL, *request_ts = NULL,
                     *lag = NULL, *row = NULL; /* (row: a send of the run's, borrowed) */
    if (bump_pending(st, seen, S_RESPONSES) < 0) return -1;
    other = PyUnicode_Compare(direction, S_C2S) == 0 ? S_S2C
            : PyUnicode_Compare(direction, S_S2C) == 0 ? S_C2S : direction;
    if (PyErr_Occurred()) return -1;
    if ((opaque = get(rec, N_OPAQUE)) == NULL ||
        (key = PyTuple_Pack(3, connection, other, opaque)) == NULL ||
        (code = get(rec, N_CODE)) == NULL || (found = dict_popped(st->paired, key)) == NULL)
        goto done;
    if (found != Py_None) { /* (a send of the run: its row, complete after this, not in done) */
        request = PyTuple_GET_ITEM(found, 0);
        group = PyTuple_GET_ITEM(found, 3), sample = PyTuple_GET_ITEM(found, 4);
        row = PyTuple_GET_ITEM(found, 2);
    } else {
        Py_DECREF(found);
        if ((found = dict_popped(st->open_calls, key)) == NULL) goto done;
        if (found == Py_None) {
            PyObject *res = flushed(st) < 0 ? NULL
                            : PyObject_CallMethodObjArgs(st->unusual, N_ORPHAN, ev, other, NULL);
            r = res == NULL ? -1 : 0;
            Py_XDECREF(res);
            goto done;
        }
        if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 5) {
            PyErr_SetString(PyExc_TypeError, "send_run: an open call is a 5-tuple");
            goto done;
        }
        request = asked = PyTuple_GET_ITEM(found, 2);
        group = PyTuple_GET_ITEM(found, 3), sample = PyTuple_GET_ITEM(found, 4);
        /* (PerCall.on_response: the sends' own rows only) */
        if ((kept = get(asked, N_KEPT)) == NULL) goto done;
        if (kept != Py_None) {
            PyObject *keeper = get(asked, N_KEEPER);
            if (keeper == NULL) goto done;
            int mine = keeper == st->sends;
            Py_DECREF(keeper);
            if (mine) {
                if (PyObject_SetAttr(asked, N_KEPT, Py_None) < 0) goto done;
            } else {
                Py_SETREF(kept, Py_NewRef(Py_None));
            }
        }
    }
    if (bump_pending(st, group, S_ANSWERED) < 0) goto done;
    if ((request_ts = get(request, N_TS_NS)) == NULL ||
        (lag = latency(ts_ns, request_ts)) == NULL)
        goto done;
    if (lag_kept(st->latencies, sample, lag) < 0) goto done;
    int error = PyObject_IsTrue(code);
    if (error < 0) goto done;
    if (error) {
        PyObject *res = flushed(st) < 0 ? NULL
                        : PyObject_CallMethodObjArgs(st->unusual, N_ERROR, ev, asked, request,
                                                     NULL);
        if (res == NULL) goto done;
        Py_DECREF(res);
    }
    if (row != NULL) {
        if (!error) {
            if (!PyList_CheckExact(row)) {
                PyErr_SetString(PyExc_TypeError, "send_run: a send's row is a list");
                goto done;
            }
            /* (the row's latency is the sample's: the same value, computed once) */
            r = answer_row(st, row, rec, ts_ns, lag);
            goto done;
        }
        PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(found, 1), row);
        if (pair == NULL || (kept = PyList_New(1)) == NULL) {
            Py_XDECREF(pair);
            goto done;
        }
        PyList_SET_ITEM(kept, 0, pair);
        PyObject *res = flushed(st) < 0 ? NULL
                        : PyObject_CallMethodObjArgs(st->unusual, N_ANSWERED_CALL, ev, asked,
                                                   request, kept, NULL);
        r = res == NULL ? -1 : 0;
        Py_XDECREF(res);
        goto done;
    }
    if (kept == Py_None) {
        r = 0;
        goto done;
    }
    if (error || !PyList_Check(kept) || PyList_GET_SIZE(kept) != 1) {
        PyObject *res = flushed(st) < 0 ? NULL
                        : PyObject_CallMethodObjArgs(st->unusual, N_ANSWERED_CALL, ev, asked,
                                                   request, kept, NULL);
        if (res == NULL) goto done;
        Py_DECREF(res);
    } else {
        PyObject *one = PyList_GET_ITEM(kept, 0);
        if (!PyTuple_Check(one) || PyTuple_GET_SIZE(one) != 2 ||
            !PyList_CheckExact(PyTuple_GET_ITEM(one, 1))) {
            PyErr_SetString(PyExc_TypeError, "send_run: a kept row is (index, list)");
            goto done;
        }
        /* (the row's latency is the sample's: the same value, computed once) */
        if (answer_row(st, PyTuple_GET_ITEM(one, 1), rec, ts_ns, lag) < 0) goto done;
    }
    PyObject *extended = PySequence_InPlaceConcat(st->done, kept);
    if (extended == NULL) goto done;
    Py_DECREF(extended);
    r = 0;
done:
    Py_XDECREF(opaque); Py_XDECREF(key); Py_XDECREF(code); Py_XDECREF(found);
    Py_XDECREF(kept); Py_XDECREF(request_ts); Py_XDECREF(lag);
    return r;
}

/* send_run(run, state): send_runs._frames (see there), compiled. */
PyObject *send_run(PyObject *self, PyObject *args) {
    PyObject *run, *state, *constants, *at, *row_at;
    RunState st;
    memset(st.pending, 0, sizeof(st.pending));
    st.pending_count = 0;
    st.last_connection = st.last_server = NULL;
    st.group_connection = st.group_direction = st.group_pair = NULL;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &run, &PyTuple_Type, &state)) return NULL;
    if (PyTuple_GET_SIZE(state) != 16) {
        PyErr_SetString(PyExc_ValueError, "send_run: a state of 16 parts");
        return NULL;
    }
    PyObject **parts[14] = {&st.open_calls, &st.of_connection, &st.group_of, &st.seen_of,
                            &st.base, &st.begun, &st.done, &st.paired, &st.latencies,
                            &st.server_of, &st.message_row, &st.unusual, &st.sends,
                            &st.send_class};
    for (int k = 0; k < 14; k++) *parts[k] = PyTuple_GET_ITEM(state, k);
    constants = PyTuple_GET_ITEM(state, 14);
    st.left = PyTuple_GET_ITEM(state, 15);
    if (!PyDict_CheckExact(st.open_calls) || !PyDict_CheckExact(st.of_connection) ||
        !PyDict_CheckExact(st.seen_of) || !PyList_CheckExact(st.begun) ||
        !PyList_CheckExact(st.done) || !PyDict_CheckExact(st.paired) ||
        !PyDict_CheckExact(st.latencies) || !PyList_CheckExact(st.left) ||
        !PyTuple_Check(constants) ||
        PyTuple_GET_SIZE(constants) != 7 || !PyTuple_Check(at = PyTuple_GET_ITEM(constants, 4)) ||
        PyTuple_GET_SIZE(at) != 8 || !PyTuple_Check(row_at = PyTuple_GET_ITEM(constants, 6)) ||
        PyTuple_GET_SIZE(row_at) != 16) {
        PyErr_SetString(PyExc_TypeError, "send_run: not send_runs.take_run's state");
        return NULL;
    }
    st.code = PyTuple_GET_ITEM(constants, 0), st.name = PyTuple_GET_ITEM(constants, 1);
    st.hot_status = PyTuple_GET_ITEM(constants, 2), st.send_ok = PyTuple_GET_ITEM(constants, 3);
    for (int k = 0; k < 8; k++)
        if ((st.at[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(at, k))) == -1 && PyErr_Occurred())
            return NULL;
    if ((st.width = PyLong_AsSsize_t(PyTuple_GET_ITEM(constants, 5))) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "send_run: a row's length");
        return NULL;
    }
    for (int k = 0; k < 16; k++) {
        st.row_at[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(row_at, k));
        if (st.row_at[k] < 0 || st.row_at[k] >= st.width) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "send_run: a column");
            return NULL;
        }
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(run); k++) {
        PyObject *ev = PyList_GET_ITEM(run, k), *rec = NULL, *connection = NULL,
                 *direction = NULL, *ts_ns = NULL, *seen = NULL;
        int bad = -1;
        Py_INCREF(ev); /* (the list may change in a call back) */
        if ((rec = field(ev, 4, N_RECORD)) == NULL ||
            (connection = field(ev, 1, N_CONNECTION)) == NULL ||
            (direction = field(ev, 2, N_DIRECTION)) == NULL ||
            (ts_ns = field(ev, 0, N_TS_NS)) == NULL)
            goto next;
        if (!PyUnicode_Check(direction)) {
            PyErr_SetString(PyExc_TypeError, "send_run: a direction is a str");
            goto next;
        }
        /* (ConnectionCollector.on_frame) */
        seen = PyDict_GetItemWithError(st.seen_of, connection);
        if (seen != NULL) {
            Py_INCREF(seen);
        } else {
            if (PyErr_Occurred()) goto next;
            seen = Py_BuildValue("{sisisisisO}", "requests_c2s", 0, "requests_s2c", 0,
                                 "oneway", 0, "responses", 0, "first_command_ns", ts_ns);
            if (seen == NULL || PyDict_SetItem(st.seen_of, connection, seen) < 0) goto next;
        }
        if (set_pending(&st, seen, S_LAST, ts_ns) < 0) goto next;
        if ((PyObject *)Py_TYPE(rec) == st.send_class)
            bad = run_send(&st, ev, rec, connection, direction, ts_ns, seen);
        else
            bad = run_answer(&st, ev, rec, connection, direction, ts_ns, seen);
    next:
        Py_DECREF(ev);
        Py_XDECREF(rec); Py_XDECREF(connection); Py_XDECREF(direction); Py_XDECREF(ts_ns);
        Py_XDECREF(seen);
        if (bad < 0) break;
    }
    Py_XDECREF(st.last_connection);
    Py_XDECREF(st.last_server);
    Py_XDECREF(st.group_connection);
    Py_XDECREF(st.group_direction);
    Py_XDECREF(st.group_pair);
    if (PyErr_Occurred()) { /* (the writes before the error made, as Python made them) */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (flushed(&st) < 0) {
            pending_dropped(&st);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(traceback);
            return NULL;
        }
        PyErr_Restore(type, value, traceback);
        return NULL;
    }
    if (flushed(&st) < 0) {
        pending_dropped(&st);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The names and numbers send_run uses, made at the module's start; -1: an error. */
int runs_names(void) {
#define NAME(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    NAME(S_REQUESTS_C2S, "requests_c2s") NAME(S_REQUESTS_S2C, "requests_s2c")
    NAME(S_ONEWAY, "oneway") NAME(S_RESPONSES, "responses") NAME(S_FIRST, "first_command_ns")
    NAME(S_LAST, "last_command_ns") NAME(S_CALLS, "calls") NAME(S_ANSWERED, "answered")
    NAME(S_DUPLICATES, "duplicate_ids") NAME(S_C2S, "c2s") NAME(S_S2C, "s2c")
    NAME(S_REQUESTS_, "requests_") NAME(N_KEPT, "kept") NAME(N_KEEPER, "keeper")
    NAME(N_TS_NS, "ts_ns") NAME(N_ORPHAN, "orphan") NAME(N_ERROR, "error")
    NAME(N_ANSWERED_CALL, "answered") NAME(N_RECORD, "record") NAME(N_CONNECTION, "connection")
    NAME(N_DIRECTION, "direction") NAME(COMMA, ",")
#undef NAME
    if ((ZERO = PyLong_FromLong(0)) == NULL || (ONE = PyLong_FromLong(1)) == NULL ||
        (MILLION = PyFloat_FromDouble(1e6)) == NULL)
        return -1;
    return 0;
}
