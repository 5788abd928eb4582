/* What _native.c, _native_runs.c and _native_naming.c share: one extension module (setup.py
 * builds them together). */
#ifndef STREAMDISSECT_ROCKETMQ_NATIVE_H
#define STREAMDISSECT_ROCKETMQ_NATIVE_H

#include <Python.h>
#include <stdint.h>

/* The frame event class place makes by its slots (plain_event), where its fields are. */
extern PyObject *EVENT_CLASS;
extern Py_ssize_t EVENT_AT[5];

/* The light record classes that are their own frame events where place makes them (a
 * light send and a light answer: self_events), where each keeps the first four fields of
 * an event (EVENT_AT's order; its `record` is itself). */
#define SELF_EVENTS 2
extern PyObject *SELF_EVENT[SELF_EVENTS];
extern Py_ssize_t SELF_AT[SELF_EVENTS][4];

/* A frame event's field k (EVENT_AT's order), borrowed, read where its class keeps it (the
 * registered event class, or a light record that is its own event); NULL: read it by name
 * (another class, or a slot not set). */
static inline PyObject *event_slot(PyObject *ev, int k) {
    PyObject *type = (PyObject *)Py_TYPE(ev);
    if (type == EVENT_CLASS) return *(PyObject **)((char *)ev + EVENT_AT[k]);
    for (int j = 0; j < SELF_EVENTS; j++)
        if (type == SELF_EVENT[j])
            return k == 4 ? ev : *(PyObject **)((char *)ev + SELF_AT[j][k]);
    return NULL;
}

/* _native_events.c: EVENT_CLASS(*fields) (the five of an event), written into its slots;
 * make(*fields), a light record of a SELF_EVENT class its own event; the index of a
 * record's class among SELF_EVENT (-1: none); the classes registered (plain_event,
 * self_events: native.py). */
PyObject *frame_event(PyObject *const *fields);
PyObject *event_of(PyObject *make, PyObject *const *fields);
int self_event_of(PyObject *record);
PyObject *plain_event(PyObject *self, PyObject *cls);
PyObject *self_events(PyObject *self, PyObject *args);
/* (events, send_class, answer_class, send_codes, run_class) -> hot.joined_runs(events)
 * (_native_events.c). */
PyObject *joined(PyObject *self, PyObject *args);

/* The light records' field names (interned at the module's start). */
extern PyObject *N_FRAME, *N_OPAQUE, *N_GROUP, *N_TOPIC, *N_QUEUE_ID, *N_MSG_ID, *N_TAGS,
    *N_KEYS, *N_WIRE, *N_CODE, *N_REMARK, *N_REQUEST_CODE, *N_QUEUE_OFFSET, *N_MESSAGES,
    *N_BYTES, *N_NEXT, *N_MIN, *N_MAX, *N_OFFSET, *N_BROKER;

/* Where a class's __slots__ keeps `name` in its instances, or -1 (_native.c). */
Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name);

/* _native_walk.c: a run of deferred JSON frames walked (walk._frames), compiled; a frame
 * across segments joined (NULL without an error: the Python way); an int64 array held. */
PyObject *json_run(PyObject *self, PyObject *args);
PyObject *joined_frame(const char *buf, Py_ssize_t size, const int64_t *so, const int64_t *lo,
                       const int64_t *po, Py_ssize_t n, long long a, long long b);
typedef struct {
    Py_buffer view;
    int held;
} Held;
int hold(PyObject *obj, Held *h, Py_ssize_t itemsize);
void release(Held *h);

/* _native_runs.c: send_runs._frames compiled, and the names it uses made (-1: an error). */
PyObject *send_run(PyObject *self, PyObject *args);
int runs_names(void);

/* _native_naming.c: plain_walk.named_in_order and in_time_order's sort compiled, and the
 * names they use made. */
PyObject *named(PyObject *self, PyObject *args);
/* dict.pop(key, None) (a new reference; NULL: an error), the dict looked up once. */
PyObject *dict_popped(PyObject *d, PyObject *key);
PyObject *in_time_order(PyObject *self, PyObject *args);
int naming_names(void);

#endif
