/* The native launch path of the CUDA target.
 *
 * One Launcher object per (compiled kernel, argument classes), made by overdub/targets/cuda.py. Calling it
 * with (args, blocks, threads, shmem, stream) does, without returning to Python: the validity check (the
 * kernel node's `valid` flag and the version tags of the module dicts it read), the guards that pin each
 * argument's numba type, the marshalling of every parameter into 8-byte slots on the C stack, and
 * cuLaunchKernel. It returns True when it launched, False when a check failed (the caller then takes the
 * slow path, which may recompile), and raises when the driver refuses the launch.
 *
 * How each kind of argument is checked and marshalled is one entry of the `kinds` table below; the CUDA
 * target's parameter ABI (overdub/targets/cuda/abi.py) hands each argument's spec over as a record whose fields
 * this table names and reads by name (SPEC_FIELDS). The slots of a launch live on the C stack; a Launcher whose
 * kernel takes more than MAX_SLOTS refuses to be made (OverflowError) and the Python launch path serves that
 * kernel instead. What Python must agree on is written here once and exported as module attributes -- MAX_SLOTS,
 * SCALAR_CODES, SPEC_FIELDS, OPTIONS and launch_key -- which tests/test_fastlaunch.py checks Python against.
 *
 * Built against the limited API (abi3): one binary serves every CPython from 3.11 on.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#define MAX_SLOTS 1024

typedef int (*cu_launch_kernel_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shmem, void *stream, void **params, void **extra);
typedef int (*cu_ctx_get_current_t)(void **ctx);
typedef int (*cu_kernel_get_function_t)(void **function, void *kernel);
typedef int (*cu_stream_get_ctx_t)(void *stream, void **ctx);
typedef int (*cu_ctx_push_current_t)(void *ctx);
typedef int (*cu_ctx_pop_current_t)(void **ctx);
typedef int (*cu_ctx_get_id_t)(void *ctx, unsigned long long *id);

/* The kernel's CUfunction in each CUDA context it was launched in (a CUkernel is context-independent, but
 * launching through it costs the driver a lookup per launch: 0.5-2 us on an H200, against ~20 ns here), by the
 * context's address and its ID (cuCtxGetId: unique in the process; a context destroyed and another made at
 * the same address has another, and its own functions). */
#define NCONTEXTS 8
typedef struct {
    void *context;
    unsigned long long id;
    void *function;
} Loaded;

enum kind { SCALAR = 's', POINTER = 'p', ARRAY = 'a', VALUE = 'v', HOST_ARRAY = 'n' };

typedef struct {
    char code;             /* SCALAR: struct code q Q i I h H b B f d ? */
    char layout;           /* ARRAY: 'C', 'F' or 'A' */
    char exact;            /* ARRAY: the dtype is this very object (a record dtype: == is blind to its struct) */
    char device;           /* POINTER: the pointer's device flag */
    char writeable;        /* HOST_ARRAY: whether the array is writeable (numba types a read-only one apart) */
    long long ndim;        /* ARRAY; VALUE: its slot count (nslots) */
    long long itemsize;    /* ARRAY */
    PyObject *dtype;       /* POINTER, ARRAY: the numpy dtype the guard expects */
    PyObject *definition;  /* VALUE: its class's definition node */
    PyObject *pack;        /* VALUE: value -> the bytes of its slots, called on its first launch */
    const struct Kind_ *ops;
} ArgSpec;

/* The CPU target's launch (a Launcher made by cpu_launcher): the arguments packed into the launch tuple the grid
 * body reads -- (gx, gy, gz, bx, by, bz: int64, parallel: a byte at 48, then each argument at its offset, as
 * numba lays the tuple out: overdub/targets/cpu/native.py) -- and the grid run by the runner's od_run
 * (overdub/targets/cpu/_cpugrid.c), without the GIL, on the workers the launch function's policy chooses. */
typedef int32_t (*cpu_run_t)(int64_t mode, int64_t nworkers, void *body, void *args, int64_t gx, int64_t gy,
                             int64_t gz, int64_t tx, int64_t ty, int64_t tz, int64_t shmem, int64_t stack,
                             int32_t *code, void **excinfo);
typedef struct {
    cpu_run_t run;          /* od_run; NULL: a CUDA target's launcher */
    void *body;             /* the kernel's grid body */
    long long mode, stack;  /* the runner's mode, a fiber's stack size */
    long long *offsets;     /* each argument's place in the launch tuple */
    PyObject *policy;       /* the launch function's workers.Workers */
    PyObject *target;       /* the CPU target: its `workers` */
    PyObject *raise_error;  /* raise_error(kernel): raises the failed grid's error */
    int flush;              /* fflush(NULL) after each launch: the kernel prints */
    int every_worker;       /* the kernel synchronizes its grid: every worker, whatever the policy */
} CPURun;
#define TUPLE_ARGS 49       /* the launch tuple's header: six int64 extents and the parallel byte */

typedef struct {
    PyObject_HEAD
    PyObject *kernel;          /* the compiler's Kernel node: its `valid` flag */
    PyObject **valid_word;     /* where a world.Node keeps that flag (its slot), or NULL: read the attribute */
    Py_ssize_t nchecks;
    uint64_t **versions;       /* the watched words: module dicts' version tags, cells' and functions' pointers */
    uint64_t **expected;       /* for each, the word holding the value the guard last saw */
    PyObject **keep;           /* what owns those words (kept alive) */
    Py_ssize_t nargs;
    Py_ssize_t nslots;         /* the kernel's parameter slots: at most MAX_SLOTS */
    ArgSpec *specs;
    void *kernel_handle;       /* the CUkernel (cuLibraryLoad: every context's) */
    Loaded loaded[NCONTEXTS];  /* its CUfunction per context launched in */
    int nloaded, evict;
    cu_launch_kernel_t launch;
    cu_ctx_get_current_t ctx_get_current;
    cu_kernel_get_function_t kernel_get_function;
    cu_stream_get_ctx_t stream_get_ctx;
    cu_ctx_push_current_t ctx_push_current;
    cu_ctx_pop_current_t ctx_pop_current;
    cu_ctx_get_id_t ctx_get_id;    /* NULL where the driver has none (before CUDA 12): the address alone */
    PyObject *stream_handle;   /* Python callable: stream object -> int handle */
    CPURun cpu;                /* the CPU target's (cpu.run NULL: the CUDA target's) */
} Launcher;

static PyObject *s_workers, *s_use, *s_timing, *s_valid, *s_usable, *s_dtype, *s_ndim, *s_c_contiguous, *s_f_contiguous, *s_size, *s_data, *s_ptr,
    *s_shape, *s_strides, *s_address, *s_device, *s_cuda_slots;
static unsigned long long launches = 0;
static PyObject *node_type = NULL; /* world.Node, whose instances keep `valid` at valid_offset (install()) */
static Py_ssize_t valid_offset = 0;

static int attr_is(PyObject *obj, PyObject *name, PyObject *expected) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) { PyErr_Clear(); return 0; }
    int same = value == expected || PyObject_RichCompareBool(value, expected, Py_EQ) == 1;
    Py_DECREF(value);
    return same;
}

static int attr_truth(PyObject *obj, PyObject *name) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) { PyErr_Clear(); return -1; }
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

static int attr_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Append a tuple of ints (shape or strides) to the slots. */
static int tuple_slots(PyObject *obj, PyObject *name, long ndim, uint64_t *slots, Py_ssize_t *n) {
    PyObject *tuple = PyObject_GetAttr(obj, name);
    if (tuple == NULL) return -1;
    for (long i = 0; i < ndim; i++) {
        PyObject *item = PySequence_GetItem(tuple, i);
        if (item == NULL) { Py_DECREF(tuple); return -1; }
        long long v = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if (v == -1 && PyErr_Occurred()) { Py_DECREF(tuple); return -1; }
        slots[(*n)++] = (uint64_t)v;
    }
    Py_DECREF(tuple);
    return 0;
}

/* --- the argument kinds -------------------------------------------------------------------------------
 * Each has: how many 8-byte slots an argument takes, and `pack`, which checks the argument's guard and
 * writes its slots in one pass over its attributes: 1 when packed, 0 when the guard does not hold (take
 * the slow path; slots already written are simply not used), -1 on error. */

static Py_ssize_t one_slot(const ArgSpec *spec) { return 1; }

/* For each struct code, the numpy scalar type of that code whose value lies in the object at a known offset
 * (set_scalar_layouts: found and checked by overdub/targets/cuda/arraylayout.py): a scalar of exactly that type is
 * copied from there, not converted through a Python float or int. */
typedef struct {
    PyTypeObject *type; /* NULL: none known */
    Py_ssize_t offset;
} ScalarLayout;
static ScalarLayout scalar_layouts[128];

/* The width of each scalar code this path converts (0: none), in bytes of its slot: the one list of them
 * (SCALAR_CODES exports it; scalar_pack converts each). */
static size_t code_size(char code) {
    switch (code) {
    case 'q': case 'Q': case 'd': return 8;
    case 'i': case 'I': case 'f': return 4;
    case 'h': case 'H': return 2;
    case 'b': case 'B': case '?': return 1;
    default: return 0;
    }
}

static int scalar_pack(const ArgSpec *spec, PyObject *value, uint64_t *slot) {
    char code = spec->code;
    memset(slot, 0, sizeof *slot);
    const ScalarLayout *layout = &scalar_layouts[code & 127];
    if (layout->type != NULL && Py_TYPE(value) == layout->type) { /* another type or width: converted below */
        memcpy(slot, (char *)value + layout->offset, code_size(code));
        return 1;
    }
    if (code == 'f' || code == 'd') {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        if (code == 'f') { float f = (float)d; memcpy(slot, &f, sizeof f); }
        else memcpy(slot, &d, sizeof d);
        return 1;
    }
    if (code == '?') {
        int truth = PyObject_IsTrue(value);
        if (truth < 0) return -1;
        *(unsigned char *)slot = (unsigned char)truth;
        return 1;
    }
    if ((code == 'q' || code == 'Q') && PyLong_CheckExact(value)) {
        /* the argument's class, part of the caller's key, decides its numba type -- except for a Python
         * int, which numba types as int64, or as uint64 when it does not fit */
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (code == 'q') {
            if (overflow != 0) return 0;
            memcpy(slot, &v, 8);
            return 1;
        }
        if (overflow <= 0) return 0;
        unsigned long long u = PyLong_AsUnsignedLongLong(value);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) { /* past 64 bits: the slow path says so */
            PyErr_Clear();
            return 0;
        }
        memcpy(slot, &u, 8);
        return 1;
    }
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) return -1;
    long long v = 0;
    unsigned long long u = 0;
    if (code == 'Q') u = PyLong_AsUnsignedLongLong(index); else v = PyLong_AsLongLong(index);
    Py_DECREF(index);
    if (PyErr_Occurred()) return -1;
    switch (code) {
    case 'q': memcpy(slot, &v, 8); break;
    case 'Q': memcpy(slot, &u, 8); break;
    case 'i': { int32_t x = (int32_t)v; memcpy(slot, &x, 4); break; }
    case 'I': { uint32_t x = (uint32_t)v; memcpy(slot, &x, 4); break; }
    case 'h': { int16_t x = (int16_t)v; memcpy(slot, &x, 2); break; }
    case 'H': { uint16_t x = (uint16_t)v; memcpy(slot, &x, 2); break; }
    case 'b': { int8_t x = (int8_t)v; memcpy(slot, &x, 1); break; }
    case 'B': { uint8_t x = (uint8_t)v; memcpy(slot, &x, 1); break; }
    default: PyErr_Format(PyExc_TypeError, "unsupported scalar code %c", code); return -1;
    }
    return 1;
}

static int pointer_pack(const ArgSpec *spec, PyObject *value, uint64_t *slot) {
    if (!attr_is(value, s_dtype, spec->dtype) || attr_truth(value, s_device) != spec->device) return 0;
    long long address;
    if (attr_ll(value, s_address, &address) < 0) return -1;
    *slot = (uint64_t)address;
    return 1;
}

/* A cupy array, as numba's exploded array: meminfo, parent, nitems, itemsize, data, shape..., strides...
 * Its rank is its shape's length; a C-contiguous array's strides follow from its shape. */
static Py_ssize_t array_slots(const ArgSpec *spec) { return 5 + 2 * spec->ndim; }

static int array_layout_is(const ArgSpec *spec, PyObject *value) {
    int c = attr_truth(value, s_c_contiguous);
    if (c < 0 || spec->layout == 'C') return c == 1;
    if (c) return 0;
    int f = attr_truth(value, s_f_contiguous);
    return f >= 0 && f == (spec->layout == 'F');
}

static int dtype_is(const ArgSpec *spec, PyObject *value) {
    if (!spec->exact) return attr_is(value, s_dtype, spec->dtype);
    PyObject *dtype = PyObject_GetAttr(value, s_dtype);
    if (dtype == NULL) { PyErr_Clear(); return 0; }
    Py_DECREF(dtype);
    return dtype == spec->dtype;
}

/* Where cupy's ndarray keeps its fields, in the object (set_array_layout: overdub/targets/cuda/arraylayout.py finds
 * them once per process by reading probe arrays, and sets nothing when it cannot be sure): an array of exactly
 * that class is read in place -- its dtype, contiguity flags, shape and strides vectors and data pointer --
 * instead of through attributes that each build a Python object (a tuple for its shape, an int for its
 * pointer): about 0.25 us an array on an H200's host. */
typedef struct {
    PyTypeObject *array_type, *pointer_type; /* cupy.ndarray, cupy.cuda.MemoryPointer; NULL: not known */
    Py_ssize_t dtype, c_contiguous, f_contiguous, shape, strides, data, ptr;
} ArrayLayout;
static ArrayLayout array_layout = {NULL, NULL, 0, 0, 0, 0, 0, 0, 0};

#define FIELD(obj, offset, type) (*(type *)((char *)(obj) + (offset)))

/* The array's vector (shape or strides) of ndim items, or NULL where it holds another number of them. */
static const Py_ssize_t *vector_field(PyObject *value, Py_ssize_t offset, long ndim) {
    const Py_ssize_t *begin = FIELD(value, offset, const Py_ssize_t *);
    const Py_ssize_t *end = FIELD(value, offset + (Py_ssize_t)sizeof(void *), const Py_ssize_t *);
    return end - begin == ndim ? begin : NULL;
}

/* 1 packed, 0 the guard does not hold, -1 the layout does not serve this value (read its attributes). */
static int array_pack_in_place(const ArgSpec *spec, PyObject *value, uint64_t *slots) {
    const ArrayLayout *at = &array_layout;
    if (at->array_type == NULL || Py_TYPE(value) != at->array_type) return -1;
    PyObject *data = FIELD(value, at->data, PyObject *);
    if (data == NULL || Py_TYPE(data) != at->pointer_type) return -1;
    PyObject *dtype = FIELD(value, at->dtype, PyObject *);
    if (dtype != spec->dtype) { /* a record dtype must be the very object (exact); another, equal */
        int same = spec->exact || dtype == NULL ? 0 : PyObject_RichCompareBool(dtype, spec->dtype, Py_EQ);
        if (same < 0) PyErr_Clear();
        if (same != 1) return 0;
    }
    int c = FIELD(value, at->c_contiguous, int) != 0, f = FIELD(value, at->f_contiguous, int) != 0;
    if (spec->layout == 'C' ? !c : (c || f != (spec->layout == 'F'))) return 0;
    long ndim = spec->ndim;
    const Py_ssize_t *shape = vector_field(value, at->shape, ndim), *strides = vector_field(value, at->strides, ndim);
    if (shape == NULL || strides == NULL) return 0;
    uint64_t size = 1;
    for (long i = 0; i < ndim; i++) {
        slots[5 + i] = (uint64_t)shape[i];
        size *= (uint64_t)shape[i];
    }
    if (spec->layout == 'C') {
        uint64_t step = (uint64_t)spec->itemsize;
        for (long i = ndim - 1; i >= 0; i--) { slots[5 + ndim + i] = step; step *= (uint64_t)shape[i]; }
    } else {
        for (long i = 0; i < ndim; i++) slots[5 + ndim + i] = (uint64_t)strides[i];
    }
    slots[0] = 0;
    slots[1] = 0;
    slots[2] = size;
    slots[3] = (uint64_t)spec->itemsize;
    slots[4] = (uint64_t)FIELD(data, at->ptr, intptr_t);
    return 1;
}

static int array_pack(const ArgSpec *spec, PyObject *value, uint64_t *slots) {
    int in_place = array_pack_in_place(spec, value, slots);
    if (in_place >= 0) return in_place;
    if (!dtype_is(spec, value) || !array_layout_is(spec, value)) return 0;
    long ndim = spec->ndim;
    uint64_t *shape = slots + 5, *strides = slots + 5 + ndim;
    PyObject *tuple = PyObject_GetAttr(value, s_shape);
    if (tuple == NULL) return -1;
    int packed = PyTuple_Check(tuple) && PyTuple_Size(tuple) == ndim;
    uint64_t size = 1;
    for (long i = 0; packed && i < ndim; i++) {
        long long extent = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
        if (extent == -1 && PyErr_Occurred()) { Py_DECREF(tuple); return -1; }
        shape[i] = (uint64_t)extent;
        size *= shape[i];
    }
    Py_DECREF(tuple);
    if (!packed) return 0;
    if (spec->layout == 'C') {
        uint64_t step = (uint64_t)spec->itemsize;
        for (long i = ndim - 1; i >= 0; i--) { strides[i] = step; step *= shape[i]; }
    } else {
        Py_ssize_t n = 5 + ndim;
        if (tuple_slots(value, s_strides, ndim, slots, &n) < 0) return -1;
    }
    long long ptr;
    PyObject *data = PyObject_GetAttr(value, s_data);
    if (data == NULL) return -1;
    int failed = attr_ll(data, s_ptr, &ptr);
    Py_DECREF(data);
    if (failed < 0) return -1;
    slots[0] = 0;
    slots[1] = 0;
    slots[2] = size;
    slots[3] = (uint64_t)spec->itemsize;
    slots[4] = (uint64_t)ptr;
    return 1;
}

/* A struct value (overdub/structs.py), passed by value: the bytes of its parameter slots, packed by the spec's
 * `pack` on the value's first launch and kept on the value (it is immutable) as its `__overdub_cuda_slots__`,
 * behind the guard that its class's definition node is still valid (a redefined class's values take the slow
 * path, which refuses them). */
static Py_ssize_t value_slots(const ArgSpec *spec) { return (Py_ssize_t)spec->ndim; }

static PyObject *packed_value(const ArgSpec *spec, PyObject *value) {
    PyObject *bytes = PyObject_GetAttr(value, s_cuda_slots);
    if (bytes != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return bytes;
    PyErr_Clear();
    bytes = PyObject_CallFunctionObjArgs(spec->pack, value, NULL);
    /* kept past the class's immutability (a value without a dict is packed at each launch) */
    if (bytes != NULL && PyObject_GenericSetAttr(value, s_cuda_slots, bytes) < 0) PyErr_Clear();
    return bytes;
}

static int value_pack(const ArgSpec *spec, PyObject *value, uint64_t *slots) {
    int valid = attr_truth(spec->definition, s_valid);
    if (valid != 1) return 0;
    PyObject *bytes = packed_value(spec, value);
    if (bytes == NULL) return -1;
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(bytes, &data, &size) < 0) { Py_DECREF(bytes); PyErr_Clear(); return 0; }
    int packed = size == (Py_ssize_t)spec->ndim * 8;
    if (packed) memcpy(slots, data, (size_t)size);
    Py_DECREF(bytes);
    return packed;
}

/* A numpy array (the CPU target's), as numba's exploded array: read in place, as numpy's own C API reads it
 * (numpy/ndarraytypes.h, PyArrayObject_fields: the same since numpy 1.7), once set_numpy_layout has checked
 * that layout on probe arrays; until then, and where it did not hold, no launcher takes numpy arrays
 * (overdub/targets/cpu/native.py asks numpy_layout_known first). The parent slot holds the array, as numba's
 * own unboxing leaves it (its meminfo is NULL: the CPU target's launches run without numba's runtime). */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} NumpyFields;
static PyTypeObject *numpy_array_type = NULL;
#define NUMPY_C_CONTIGUOUS 0x0001
#define NUMPY_F_CONTIGUOUS 0x0002
#define NUMPY_WRITEABLE 0x0400

static int host_array_pack(const ArgSpec *spec, PyObject *value, uint64_t *slots) {
    if (numpy_array_type == NULL || !PyObject_TypeCheck(value, numpy_array_type)) return 0;
    const NumpyFields *a = (const NumpyFields *)value;
    if (a->descr != spec->dtype) { /* the guard's ``a.dtype is d or a.dtype == d`` */
        int same = PyObject_RichCompareBool(a->descr, spec->dtype, Py_EQ);
        if (same < 0) PyErr_Clear();
        if (same != 1) return 0;
    }
    if (a->nd != spec->ndim || ((a->flags & NUMPY_WRITEABLE) != 0) != spec->writeable) return 0;
    int c = (a->flags & NUMPY_C_CONTIGUOUS) != 0, f = (a->flags & NUMPY_F_CONTIGUOUS) != 0;
    if (spec->layout == 'C' ? !c : spec->layout == 'F' ? (c || !f) : (c || f)) return 0;
    long ndim = spec->ndim;
    uint64_t size = 1;
    for (long i = 0; i < ndim; i++) {
        slots[5 + i] = (uint64_t)a->dimensions[i];
        slots[5 + ndim + i] = (uint64_t)a->strides[i];
        size *= (uint64_t)a->dimensions[i];
    }
    slots[0] = 0;
    slots[1] = (uint64_t)(uintptr_t)value;
    slots[2] = size;
    slots[3] = (uint64_t)spec->itemsize;
    slots[4] = (uint64_t)(uintptr_t)a->data;
    return 1;
}

/* --- the specs: records with named fields -------------------------------------------------------------
 * Each kind's spec is a record (overdub/targets/cuda/abi.py) whose `kind` is the kind's letter and whose
 * fields are the kind's `fields` below, read by name in that order by its `parse`. */

static int field_object(PyObject *spec, const char *name, PyObject **out) { /* a new reference */
    *out = PyObject_GetAttrString(spec, name);
    return *out == NULL ? -1 : 0;
}

static int field_char(PyObject *spec, const char *name, char *out) { /* a one-character string's character */
    PyObject *value = PyObject_GetAttrString(spec, name);
    if (value == NULL) return -1;
    Py_ssize_t size;
    const char *text = PyUnicode_Check(value) ? PyUnicode_AsUTF8AndSize(value, &size) : NULL;
    if (text != NULL && size == 1) *out = text[0];
    Py_DECREF(value);
    if (text == NULL || size != 1) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "a spec's %s is one character", name);
        return -1;
    }
    return 0;
}

static int field_ll(PyObject *spec, const char *name, long long *out) {
    PyObject *value = PyObject_GetAttrString(spec, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int field_truth(PyObject *spec, const char *name, char *out) {
    PyObject *value = PyObject_GetAttrString(spec, name);
    if (value == NULL) return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    *out = (char)(truth == 1);
    return truth < 0 ? -1 : 0;
}

static const char *const scalar_fields[] = {"code", NULL};
static const char *const pointer_fields[] = {"dtype", "device", NULL};
static const char *const array_fields[] = {"dtype", "ndim", "itemsize", "layout", "exact", NULL};
static const char *const value_fields[] = {"definition", "nslots", "pack", NULL};
static const char *const host_array_fields[] = {"dtype", "ndim", "itemsize", "layout", "writeable", NULL};

static int scalar_parse(PyObject *spec, ArgSpec *out) {
    if (field_char(spec, scalar_fields[0], &out->code) < 0) return -1;
    if (code_size(out->code) == 0) {
        PyErr_Format(PyExc_ValueError, "no scalar code %c (SCALAR_CODES)", out->code);
        return -1;
    }
    return 0;
}

static int pointer_parse(PyObject *spec, ArgSpec *out) {
    const char *const *f = pointer_fields;
    return field_object(spec, f[0], &out->dtype) < 0 || field_truth(spec, f[1], &out->device) < 0 ? -1 : 0;
}

/* An array's spec: its dtype, rank, itemsize and layout, then one flag field (the CUDA array's `exact`, the
 * host array's `writeable`) into *flag. */
static int array_spec_parse(PyObject *spec, const char *const *f, ArgSpec *out, char *flag) {
    if (field_object(spec, f[0], &out->dtype) < 0 || field_ll(spec, f[1], &out->ndim) < 0 ||
        field_ll(spec, f[2], &out->itemsize) < 0 || field_char(spec, f[3], &out->layout) < 0 ||
        field_truth(spec, f[4], flag) < 0)
        return -1;
    return 0;
}

static int array_parse(PyObject *spec, ArgSpec *out) { return array_spec_parse(spec, array_fields, out, &out->exact); }

static int host_array_parse(PyObject *spec, ArgSpec *out) {
    return array_spec_parse(spec, host_array_fields, out, &out->writeable);
}

static int value_parse(PyObject *spec, ArgSpec *out) {
    const char *const *f = value_fields;
    if (field_object(spec, f[0], &out->definition) < 0 || field_ll(spec, f[1], &out->ndim) < 0 ||
        field_object(spec, f[2], &out->pack) < 0)
        return -1;
    if (!PyCallable_Check(out->pack)) {
        PyErr_SetString(PyExc_TypeError, "a value spec's pack must be callable");
        return -1;
    }
    return 0;
}

typedef struct Kind_ {
    char kind;
    const char *const *fields;                      /* the spec record's fields, read by parse */
    int (*parse)(PyObject *, ArgSpec *);
    Py_ssize_t (*slots)(const ArgSpec *);
    int (*pack)(const ArgSpec *, PyObject *, uint64_t *);
} Kind;

static const Kind kinds[] = {
    {SCALAR, scalar_fields, scalar_parse, one_slot, scalar_pack},
    {POINTER, pointer_fields, pointer_parse, one_slot, pointer_pack},
    {ARRAY, array_fields, array_parse, array_slots, array_pack},
    {VALUE, value_fields, value_parse, value_slots, value_pack},
    {HOST_ARRAY, host_array_fields, host_array_parse, array_slots, host_array_pack},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static const Kind *kind_named(char name) {
    for (size_t i = 0; i < NKINDS; i++)
        if (kinds[i].kind == name) return &kinds[i];
    return NULL;
}

/* An argument's spec: its record's kind, then that kind's fields. */
static int parse_spec(PyObject *spec, ArgSpec *out) {
    char kind;
    memset(out, 0, sizeof *out);
    if (field_char(spec, "kind", &kind) < 0) return -1;
    if ((out->ops = kind_named(kind)) == NULL) {
        PyErr_Format(PyExc_ValueError, "no argument kind %c (SPEC_FIELDS)", kind);
        return -1;
    }
    return out->ops->parse(spec, out);
}

static void spec_clear(ArgSpec *spec) {
    Py_CLEAR(spec->dtype);
    Py_CLEAR(spec->definition);
    Py_CLEAR(spec->pack);
}

/* One extent of a grid or block: any integer but a bool (numpy's integers too), from 1 to 2^31 - 1. */
static int parse_extent(PyObject *value, unsigned *out) {
    if (PyBool_Check(value) || !PyIndex_Check(value)) return -1;
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) { PyErr_Clear(); return -1; }
    long v = PyLong_AsLong(index);
    Py_DECREF(index);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 1 || v > 0x7FFFFFFFL) return -1;
    *out = (unsigned)v;
    return 0;
}

static int parse_dims(PyObject *value, unsigned out[3]) {
    out[0] = out[1] = out[2] = 1;
    if (PyTuple_Check(value) || PyList_Check(value)) {
        PyObject *seq = PySequence_Tuple(value);
        if (seq == NULL) return -1;
        Py_ssize_t n = PyTuple_Size(seq);
        int ok = n >= 1 && n <= 3;
        for (Py_ssize_t i = 0; ok && i < n; i++) ok = parse_extent(PyTuple_GetItem(seq, i), &out[i]) == 0;
        Py_DECREF(seq);
        if (ok) return 0;
    } else if (parse_extent(value, &out[0]) == 0) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "blocks and threads must be a positive integer or a tuple of 1-3 positive "
                 "integers (not bools), not %R", value);
    return -1;
}

/* CUDA's limits, as overdub/launchconfig.py's dims states them (the driver would refuse with a bare error code). */
static int check_limits(const unsigned grid[3], const unsigned block[3], PyObject *blocks, PyObject *threads) {
    if (block[0] > 1024 || block[1] > 1024 || block[2] > 64 ||
        (unsigned long long)block[0] * block[1] * block[2] > 1024) {
        PyErr_Format(PyExc_ValueError, "threads=%R exceeds CUDA's limits: at most (1024, 1024, 64) per dimension "
                     "and 1024 in all", threads);
        return -1;
    }
    if (grid[0] > 2147483647u || grid[1] > 65535 || grid[2] > 65535) {
        PyErr_Format(PyExc_ValueError, "blocks=%R exceeds CUDA's limits: at most (2147483647, 65535, 65535) per "
                     "dimension", blocks);
        return -1;
    }
    return 0;
}

/* A launch's grid and block, parsed and checked (once per call of od.cuda; once for kernel[blocks, threads]). */
typedef struct {
    unsigned grid[3], block[3];
} Dims;

static int dims_of(PyObject *blocks, PyObject *threads, Dims *out) {
    if (parse_dims(blocks, out->grid) < 0 || parse_dims(threads, out->block) < 0) return -1;
    return check_limits(out->grid, out->block, blocks, threads);
}

/* Where a moved word is a module's version tag and every edge watching it a global's binding (its guard entry,
 * the owner kept, names them: bindings.Guard), does each name still bind the very object read? Then nothing
 * changed (another global of the module was assigned). 1: yes, 0: ask the slow check, -1: error. */
static int rebound_alike(PyObject *owner) {
    if (!PyList_Check(owner) || PyList_Size(owner) < 3) return 0;
    PyObject *rebinds = PyList_GetItem(owner, 2);
    if (!PyTuple_Check(rebinds)) return 0;
    Py_INCREF(rebinds); /* held: a lookup may run Python code (a key's __eq__) that replaces it */
    int alike = 1;
    for (Py_ssize_t k = 0; k < PyTuple_Size(rebinds) && alike == 1; k++) {
        /* (namespace, name, value, builtins or None), made by bindings._rebinds */
        PyObject *binding = PyTuple_GetItem(rebinds, k);
        PyObject *fallback = PyTuple_GetItem(binding, 3);
        PyObject *now = PyDict_GetItemWithError(PyTuple_GetItem(binding, 0), PyTuple_GetItem(binding, 1));
        if (now == NULL && !PyErr_Occurred() && fallback != Py_None)
            now = PyDict_GetItemWithError(fallback, PyTuple_GetItem(binding, 1));
        if (now == NULL && PyErr_Occurred())
            alike = -1;
        else if (now != PyTuple_GetItem(binding, 2))
            alike = 0;
    }
    Py_DECREF(rebinds);
    return alike;
}

/* The kernel's flag, then the words it watches (the version tags of the modules it read, the content
 * pointers of closure cells, the code and defaults pointers of functions); when one moved, the globals it
 * watches compared in place where it can (rebound_alike), else the kernel's own slow check (Kernel.usable)
 * compares what it read and records the new words. 1: valid, 0: not (take the slow path), -1: error. */
static int still_valid(Launcher *self) {
    int valid = self->valid_word != NULL ? *self->valid_word == Py_True : attr_truth(self->kernel, s_valid);
    if (valid != 1) return valid < 0 ? -1 : 0;
    for (Py_ssize_t i = 0; i < self->nchecks; i++) {
        if (*self->versions[i] != *self->expected[i]) {
            uint64_t now = *self->versions[i];
            int alike = rebound_alike(self->keep[i]);
            if (alike < 0) return -1;
            if (alike) {
                *self->expected[i] = now;
                continue;
            }
            PyObject *usable = PyObject_CallMethodObjArgs(self->kernel, s_usable, NULL);
            if (usable == NULL) return -1;
            int truth = PyObject_IsTrue(usable);
            Py_DECREF(usable);
            return truth;
        }
    }
    return 1;
}

/* The kernel's function in the context current on this thread (found, or asked of the driver and kept), or
 * NULL where no context is current or the driver refuses (the slow path makes one current or says why). The
 * refusal for want of code for the device is kept too: a context of a device of another architecture than the
 * kernel's code (one process driving an sm_80 and an sm_90 GPU) never has the function, and another launch
 * function, made for that architecture, serves it. */
static void *function_here(Launcher *self, void **context) {
    *context = NULL;
    if (self->ctx_get_current(context) != 0 || *context == NULL) return NULL;
    unsigned long long id = 0;
    if (self->ctx_get_id != NULL && self->ctx_get_id(*context, &id) != 0) return NULL;
    for (int i = 0; i < self->nloaded; i++)
        if (self->loaded[i].context == *context && self->loaded[i].id == id) return self->loaded[i].function;
    void *function = NULL;
    int err = self->kernel_get_function(&function, self->kernel_handle);
    /* CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_UNSUPPORTED_PTX_VERSION */
    if (err != 0 && err != 209 && err != 218 && err != 222) return NULL;
    if (err != 0) function = NULL;
    int slot = self->nloaded < NCONTEXTS ? self->nloaded++ : (self->evict++ % NCONTEXTS);
    self->loaded[slot].context = *context;
    self->loaded[slot].id = id;
    self->loaded[slot].function = function;
    return function;
}

static void forget_context(Launcher *self, void *context) {
    for (int i = 0; i < self->nloaded;)
        if (self->loaded[i].context == context) self->loaded[i] = self->loaded[--self->nloaded];
        else i++;
}

#define NOT_HERE (-1) /* not a CUresult: the kernel has no function in the context */

/* The driver refused a launch: the error the Python launch path raises for it (cuda.core's CUDAError, which
 * numba-cuda raises and its programs catch), made by overdub.targets.cuda.driver.launch_error_of_code. */
static void raise_launch_error(int err) {
    PyObject *module = PyImport_ImportModule("overdub.targets.cuda.driver");
    if (module == NULL) return;
    PyObject *exc = PyObject_CallMethod(module, "launch_error_of_code", "i", err);
    Py_DECREF(module);
    if (exc == NULL) return;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
}

/* The bytes an argument takes in the launch tuple: a scalar its width, anything else its 8-byte slots. */
static size_t tuple_size(const ArgSpec *spec) {
    return spec->ops->kind == SCALAR ? code_size(spec->code) : 8 * (size_t)spec->ops->slots(spec);
}

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* How many workers run the grid: every one for a kernel that synchronizes its grid or a grid of one block, else
 * the policy's choice (its `use`, and `timing`: whether to tell it how long the launch took). -1: error. */
static long cpu_workers(const CPURun *cpu, long long blocks, int *timing) {
    *timing = 0;
    PyObject *every = PyObject_GetAttr(cpu->target, s_workers);
    if (every == NULL) return -1;
    long workers = PyLong_AsLong(every);
    if (!(workers == -1 && PyErr_Occurred()) && !cpu->every_worker && workers > 1 && blocks > 1) {
        PyObject *count = PyLong_FromLongLong(blocks);
        PyObject *chosen = count == NULL ? NULL : PyObject_CallMethodObjArgs(cpu->policy, s_use, count, every, NULL);
        Py_XDECREF(count);
        workers = chosen == NULL ? -1 : PyLong_AsLong(chosen);
        Py_XDECREF(chosen);
        if (!(workers == -1 && PyErr_Occurred())) {
            *timing = attr_truth(cpu->policy, s_timing);
            if (*timing < 0) workers = -1;
        }
    }
    Py_DECREF(every);
    return workers == -1 && PyErr_Occurred() ? -1 : workers;
}

/* A CPU target's launch, its kernel checked valid: 1 launched, 0 a check failed (take the slow path), -1 error. */
static int cpu_launch(Launcher *self, PyObject *const *args, Py_ssize_t nargs, const Dims *dims, PyObject *shmem_obj,
                      PyObject *stream) {
    const CPURun *cpu = &self->cpu;
    if (nargs != self->nargs) return 0;
    /* shmem other than an int in 0..48 KiB (numpy's, a bad value): the slow path normalises it or says why */
    if (!PyLong_CheckExact(shmem_obj)) return 0;
    long shmem = PyLong_AsLong(shmem_obj);
    if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
    if (shmem < 0 || shmem > 48 * 1024) return 0;
    uint64_t tuple[MAX_SLOTS + 8], slots[MAX_SLOTS];
    char *bytes = (char *)tuple;
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        const ArgSpec *spec = &self->specs[i];
        int packed = spec->ops->pack(spec, args[i], slots);
        if (packed <= 0) return packed;
        memcpy(bytes + cpu->offsets[i], slots, tuple_size(spec));
    }
    if (stream != Py_None) { /* the CPU target runs in order: a stream is checked, not used */
        PyObject *handle = PyObject_CallFunctionObjArgs(self->stream_handle, stream, NULL);
        if (handle == NULL) return -1;
        Py_DECREF(handle);
    }
    const unsigned *grid = dims->grid, *block = dims->block;
    long long blocks = (long long)grid[0] * grid[1] * grid[2];
    int timing;
    long workers = cpu_workers(cpu, blocks, &timing);
    if (workers < 0) return -1;
    for (int k = 0; k < 3; k++) { tuple[k] = grid[k]; tuple[3 + k] = block[k]; }
    bytes[48] = workers > 1 && blocks > 1;
    int32_t status, code = 0;
    void *excinfo = NULL;
    int64_t started = timing ? monotonic_ns() : 0, took;
    Py_BEGIN_ALLOW_THREADS
    status = cpu->run(cpu->mode, workers, cpu->body, tuple, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                      shmem, cpu->stack, &code, &excinfo);
    Py_END_ALLOW_THREADS
    took = timing ? monotonic_ns() - started : 0;
    if (timing) {
        PyObject *result = PyObject_CallMethod(cpu->policy, "ran", "LlL", blocks, workers, (long long)took);
        if (result == NULL) return -1;
        Py_DECREF(result);
    }
    if (cpu->flush) fflush(NULL);
    if (status != 0) { /* the runner's error (a kernel's own exception ends its thread alone: not checked) */
        PyObject *raised = PyObject_CallFunctionObjArgs(cpu->raise_error, self->kernel, NULL);
        Py_XDECREF(raised);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "overdub: a CPU grid failed and said nothing");
        return -1;
    }
    launches++;
    return 1;
}

/* 1: launched, 0: a check failed (take the slow path), -1: error. */
static int launcher_run(Launcher *self, PyObject *const *args, Py_ssize_t nargs, const Dims *dims,
                        PyObject *shmem_obj, PyObject *stream) {
    int valid = still_valid(self);
    if (valid <= 0) return valid;
    if (self->cpu.run != NULL) return cpu_launch(self, args, nargs, dims, shmem_obj, stream);
    if (nargs != self->nargs) return 0;
    uint64_t slots[MAX_SLOTS];
    void *params[MAX_SLOTS];
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        const ArgSpec *spec = &self->specs[i];
        int packed = spec->ops->pack(spec, args[i], slots + n);
        if (packed <= 0) return packed;
        n += spec->ops->slots(spec);
    }
    const unsigned *grid = dims->grid, *block = dims->block;
    /* shmem other than an int in 0..48 KiB (numpy's, a bad value): the slow path normalises it or says why */
    if (!PyLong_CheckExact(shmem_obj)) return 0;
    unsigned long shmem = PyLong_AsUnsignedLong(shmem_obj);
    if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
    if (shmem > 48 * 1024) return 0;
    void *hstream = NULL;
    if (stream != Py_None) {
        PyObject *handle = PyObject_CallFunctionObjArgs(self->stream_handle, stream, NULL);
        if (handle == NULL) return -1;
        hstream = PyLong_AsVoidPtr(handle);
        Py_DECREF(handle);
        if (PyErr_Occurred()) return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) params[i] = &slots[i];
    void *context;
    void *function = function_here(self, &context);
    int err = function == NULL ? NOT_HERE
                               : self->launch(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                              (unsigned)shmem, hstream, n ? params : NULL, NULL);
    if ((err == 400 || (err == NOT_HERE && context != NULL)) && hstream != NULL) {
        /* CUDA_ERROR_INVALID_HANDLE with a stream, or a kernel not loadable here: the stream may be another
         * context's -- then the launch runs in the stream's context, made current for it (kernel[blocks,
         * threads, stream] launches on the stream's device) */
        void *stream_context = NULL;
        if (self->stream_get_ctx(hstream, &stream_context) == 0 && stream_context != NULL &&
            stream_context != context && self->ctx_push_current(stream_context) == 0) {
            void *there, *popped;
            function = function_here(self, &there);
            err = function == NULL ? NOT_HERE
                                   : self->launch(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                                  (unsigned)shmem, hstream, n ? params : NULL, NULL);
            self->ctx_pop_current(&popped);
        }
    }
    /* no context current, or the kernel not loadable in it (another architecture): the slow path makes the
     * device's context current, or compiles for the device */
    if (err == NOT_HERE) return 0;
    if (err == 400) { /* CUDA_ERROR_INVALID_HANDLE: the function's context is gone (the slow path reloads it) */
        forget_context(self, context);
        return 0;
    }
    if (err == 201) return 0; /* CUDA_ERROR_INVALID_CONTEXT: the slow path makes the device's context current */
    if (err != 0) {
        raise_launch_error(err);
        return -1;
    }
    launches++;
    return 1;
}

/* The items of a tuple, borrowed, into ``out`` (room for ``room``), else into memory the caller frees. */
static PyObject **tuple_items(PyObject *tuple, PyObject **out, Py_ssize_t room, Py_ssize_t *n) {
    *n = PyTuple_Size(tuple);
    PyObject **items = *n <= room ? out : PyMem_Malloc(sizeof(PyObject *) * (size_t)(*n ? *n : 1));
    if (items == NULL) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < *n; i++) items[i] = PyTuple_GetItem(tuple, i);
    return items;
}

static PyObject *Launcher_call(Launcher *self, PyObject *call_args, PyObject *kwargs) {
    PyObject *args, *blocks, *threads, *shmem_obj, *stream, *local[32];
    Dims dims;
    if (!PyArg_ParseTuple(call_args, "O!OOOO", &PyTuple_Type, &args, &blocks, &threads, &shmem_obj, &stream))
        return NULL;
    if (dims_of(blocks, threads, &dims) < 0) { /* the slow path says what, naming the kernel */
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    Py_ssize_t n;
    PyObject **items = tuple_items(args, local, 32, &n);
    if (items == NULL) return NULL;
    int launched = launcher_run(self, items, n, &dims, shmem_obj, stream);
    if (items != local) PyMem_Free(items);
    if (launched < 0) return NULL;
    return PyBool_FromLong(launched);
}

/* What every launcher checks and packs: the kernel's validity checks and the arguments' specs. */
static int launcher_init_common(Launcher *self, PyObject *kernel, PyObject *checks, PyObject *specs) {
    self->nchecks = PySequence_Size(checks);
    self->nargs = PySequence_Size(specs);
    if (self->nchecks < 0 || self->nargs < 0) return -1;
    self->versions = PyMem_Calloc(self->nchecks + 1, sizeof(uint64_t *));
    self->expected = PyMem_Calloc(self->nchecks + 1, sizeof(uint64_t *));
    self->keep = PyMem_Calloc(self->nchecks + 1, sizeof(PyObject *));
    self->specs = PyMem_Calloc(self->nargs + 1, sizeof(ArgSpec));
    if (!self->versions || !self->expected || !self->keep || !self->specs) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; i < self->nchecks; i++) {
        /* (address of the watched word, address of the word holding its expected value, their owner) */
        PyObject *check = PySequence_GetItem(checks, i);
        if (check == NULL) return -1;
        if (!PyTuple_Check(check) || PyTuple_Size(check) != 3) {
            Py_DECREF(check);
            PyErr_SetString(PyExc_ValueError, "a check is (word address, expected-word address, owner)");
            return -1;
        }
        self->versions[i] = PyLong_AsVoidPtr(PyTuple_GetItem(check, 0));
        self->expected[i] = PyLong_AsVoidPtr(PyTuple_GetItem(check, 1));
        self->keep[i] = PyTuple_GetItem(check, 2);
        Py_XINCREF(self->keep[i]);
        Py_DECREF(check);
        if (PyErr_Occurred()) return -1;
    }
    self->nslots = 0;
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        PyObject *spec = PySequence_GetItem(specs, i);
        if (spec == NULL) return -1;
        int failed = parse_spec(spec, &self->specs[i]);
        Py_DECREF(spec);
        if (failed) return -1;
        self->nslots += self->specs[i].ops->slots(&self->specs[i]);
    }
    if (self->nslots > MAX_SLOTS) {
        PyErr_Format(PyExc_OverflowError, "the kernel takes %zd parameter slots; the native launcher holds %d",
                     self->nslots, MAX_SLOTS);
        return -1;
    }
    Py_INCREF(kernel);
    self->kernel = kernel;
    /* a world.Node's `valid` slot, read in place (install() said where; anything else: its attribute) */
    self->valid_word = node_type != NULL && PyObject_TypeCheck(kernel, (PyTypeObject *)node_type)
                           ? (PyObject **)((char *)kernel + valid_offset)
                           : NULL;
    return 0;
}

static int Launcher_init(Launcher *self, PyObject *args, PyObject *kwargs) {
    PyObject *kernel, *checks, *specs, *kernel_handle, *stream_handle;
    unsigned long long launch, ctx_get_current, kernel_get_function, stream_get_ctx, ctx_push, ctx_pop, ctx_get_id;
    if (!PyArg_ParseTuple(args, "OOOO(KKKKKKK)O", &kernel, &checks, &specs, &kernel_handle, &launch,
                          &ctx_get_current, &kernel_get_function, &stream_get_ctx, &ctx_push, &ctx_pop, &ctx_get_id,
                          &stream_handle))
        return -1;
    if (self->kernel != NULL) {
        PyErr_SetString(PyExc_TypeError, "a Launcher is made once");
        return -1;
    }
    if (launcher_init_common(self, kernel, checks, specs) < 0) return -1;
    self->kernel_handle = PyLong_AsVoidPtr(kernel_handle);
    self->launch = (cu_launch_kernel_t)(uintptr_t)launch;
    self->ctx_get_current = (cu_ctx_get_current_t)(uintptr_t)ctx_get_current;
    self->kernel_get_function = (cu_kernel_get_function_t)(uintptr_t)kernel_get_function;
    self->stream_get_ctx = (cu_stream_get_ctx_t)(uintptr_t)stream_get_ctx;
    self->ctx_push_current = (cu_ctx_push_current_t)(uintptr_t)ctx_push;
    self->ctx_pop_current = (cu_ctx_pop_current_t)(uintptr_t)ctx_pop;
    self->ctx_get_id = (cu_ctx_get_id_t)(uintptr_t)ctx_get_id;
    self->nloaded = self->evict = 0;
    if (PyErr_Occurred()) return -1;
    Py_INCREF(stream_handle);
    self->stream_handle = stream_handle;
    return 0;
}

static PyObject *LauncherType; /* (made at the module's import) */

/* cpu_launcher(kernel, checks, specs, offsets, (run, body, mode, stack), policy, target, raise_error, stream_check,
 * flush, every_worker): the CPU target's launch function of a kernel (overdub/targets/cpu/native.py). */
static PyObject *cpu_launcher(PyObject *module, PyObject *args) {
    PyObject *kernel, *checks, *specs, *offsets, *policy, *target, *raise_error, *stream_check;
    unsigned long long run, body;
    long long mode, stack;
    int flush, every_worker;
    if (!PyArg_ParseTuple(args, "OOOO!(KKLL)OOOOpp", &kernel, &checks, &specs, &PyTuple_Type, &offsets, &run, &body,
                          &mode, &stack, &policy, &target, &raise_error, &stream_check, &flush, &every_worker))
        return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)LauncherType, Py_tp_alloc);
    Launcher *self = (Launcher *)alloc((PyTypeObject *)LauncherType, 0); /* zeroed; no init: a CUDA target's */
    if (self == NULL) return NULL;
    if (launcher_init_common(self, kernel, checks, specs) < 0) goto failed;
    if (PyTuple_Size(offsets) != self->nargs) {
        PyErr_SetString(PyExc_ValueError, "cpu_launcher: an offset per argument");
        goto failed;
    }
    self->cpu.offsets = PyMem_Calloc(self->nargs + 1, sizeof(long long));
    if (self->cpu.offsets == NULL) { PyErr_NoMemory(); goto failed; }
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        const ArgSpec *spec = &self->specs[i];
        long long offset = PyLong_AsLongLong(PyTuple_GetItem(offsets, i));
        if (offset == -1 && PyErr_Occurred()) goto failed;
        if (offset < TUPLE_ARGS || (size_t)offset + tuple_size(spec) > 8 * (MAX_SLOTS + 8)) {
            PyErr_Format(PyExc_OverflowError, "cpu_launcher: argument %zd at %lld does not fit the launch tuple", i,
                         offset);
            goto failed;
        }
        self->cpu.offsets[i] = offset;
    }
    self->cpu.body = (void *)(uintptr_t)body;
    self->cpu.mode = mode;
    self->cpu.stack = stack;
    self->cpu.flush = flush;
    self->cpu.every_worker = every_worker;
    Py_INCREF(policy); self->cpu.policy = policy;
    Py_INCREF(target); self->cpu.target = target;
    Py_INCREF(raise_error); self->cpu.raise_error = raise_error;
    Py_INCREF(stream_check); self->stream_handle = stream_check;
    self->cpu.run = (cpu_run_t)(uintptr_t)run; /* last: a launcher is the CPU target's once whole */
    return (PyObject *)self;
failed:
    Py_DECREF(self);
    return NULL;
}

/* The end of a dealloc of an instance of a heap type of this module: its memory freed, its type released. */
static void free_instance(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(self);
    Py_DECREF(type);
}

static void Launcher_dealloc(Launcher *self) {
    Py_XDECREF(self->kernel);
    Py_XDECREF(self->cpu.policy);
    Py_XDECREF(self->cpu.target);
    Py_XDECREF(self->cpu.raise_error);
    PyMem_Free(self->cpu.offsets);
    Py_XDECREF(self->stream_handle);
    for (Py_ssize_t i = 0; self->keep && i < self->nchecks; i++) Py_XDECREF(self->keep[i]);
    for (Py_ssize_t i = 0; self->specs && i < self->nargs; i++) spec_clear(&self->specs[i]);
    PyMem_Free(self->versions);
    PyMem_Free(self->expected);
    PyMem_Free(self->keep);
    PyMem_Free(self->specs);
    free_instance((PyObject *)self);
}

static PyObject *Launcher_get_kernel(Launcher *self, void *closure) {
    Py_INCREF(self->kernel);
    return self->kernel;
}

static PyObject *Launcher_get_guarded(Launcher *self, void *closure) { Py_RETURN_TRUE; }

static PyObject *Launcher_get_nslots(Launcher *self, void *closure) { return PyLong_FromSsize_t(self->nslots); }

static PyGetSetDef Launcher_getset[] = {
    {"kernel", (getter)Launcher_get_kernel, NULL, "the compiled kernel node", NULL},
    {"guarded", (getter)Launcher_get_guarded, NULL, "always True: every argument is guarded", NULL},
    {"nslots", (getter)Launcher_get_nslots, NULL, "the kernel's parameter slots", NULL},
    {NULL},
};

static PyType_Slot Launcher_slots[] = {
    {Py_tp_doc, "Launcher(kernel, checks, specs, kernel_handle, driver entry addresses, stream_handle)"},
    {Py_tp_init, Launcher_init},
    {Py_tp_call, Launcher_call},
    {Py_tp_dealloc, Launcher_dealloc},
    {Py_tp_getset, Launcher_getset},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec Launcher_spec = {
    "overdub._fastlaunch.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT, Launcher_slots,
};

/* od.cuda itself: the key (kernel, context, target, argument classes), one dict lookup, and the launch
 * functions found there, native ones called without a Python frame; the slow path otherwise. */
static PyObject *LauncherType, *launch_table, *slow_path, *python_launch, *state_mark, *py_one, *py_zero;
/* The options of a launch this lookup takes, and their defaults (options_init): the keywords of od.cuda it
 * serves (OPTIONS exports them; others, debug= and device=, go to the Python definition), the first CONFIG of
 * them fields of the launch's configuration record (overdub.launchconfig.LaunchConfig) too. */
enum { BLOCKS, THREADS, SHMEM, STREAM, CONFIG, TARGET = CONFIG, CONTEXT, STATE, NOPTIONS };
static const char *const option_text[NOPTIONS] = {"blocks", "threads", "shmem", "stream", "target", "context", "state"};
static PyObject *option_names[NOPTIONS]; /* interned */

static void options_init(PyObject *options[NOPTIONS]) {
    options[BLOCKS] = options[THREADS] = py_one;
    options[SHMEM] = py_zero;
    options[STREAM] = options[TARGET] = options[CONTEXT] = options[STATE] = Py_None;
}

/* Assign a keyword argument to its option: 0, or 1 for another keyword (the Python launch path takes the
 * rarer options, and says what it does not know). */
static int option_set(PyObject *options[NOPTIONS], PyObject *key, PyObject *value) {
    PyObject *const *names = option_names;
    int i = 0;
    while (i < NOPTIONS && key != names[i]) i++; /* keywords are interned: compare pointers */
    if (i == NOPTIONS) {
        i = 0;
        while (i < NOPTIONS && PyUnicode_Compare(key, names[i]) != 0) i++;
    }
    if (i == NOPTIONS) return 1;
    options[i] = value;
    return 0;
}

/* The launch table's key, as runtime.launch_key builds it: (kernel, context, target, argument classes), and
 * for a launch passing state, (kernel, context, target, state_mark, class of the state, argument classes). */
static PyObject *launch_key(PyObject *kernel, PyObject *const *args, Py_ssize_t n, PyObject *context,
                            PyObject *target, PyObject *state) {
    Py_ssize_t extra = state == Py_None ? 0 : 2;
    PyObject *key = PyTuple_New(n + 3 + extra);
    if (key == NULL) return NULL;
    /* the key holds the kernel by its canonical weak reference, as runtime.launch_key does */
    PyObject *kernel_ref = PyWeakref_NewRef(kernel, NULL);
    if (kernel_ref == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) { Py_DECREF(key); return NULL; }
        PyErr_Clear();
        Py_INCREF(kernel);
        kernel_ref = kernel;
    }
    PyTuple_SetItem(key, 0, kernel_ref);
    Py_INCREF(context); PyTuple_SetItem(key, 1, context);
    Py_INCREF(target); PyTuple_SetItem(key, 2, target);
    if (extra) {
        Py_INCREF(state_mark); PyTuple_SetItem(key, 3, state_mark);
        Py_INCREF((PyObject *)Py_TYPE(state)); PyTuple_SetItem(key, 4, (PyObject *)Py_TYPE(state));
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cls = (PyObject *)Py_TYPE(args[i]);
        Py_INCREF(cls);
        PyTuple_SetItem(key, i + 3 + extra, cls);
    }
    return key;
}

/* A tuple of the vector's items, the state first where one is passed (what Python launch functions take). */
static PyObject *as_tuple(PyObject *first, PyObject *const *items, Py_ssize_t n) {
    Py_ssize_t extra = first == NULL ? 0 : 1;
    PyObject *tuple = PyTuple_New(n + extra);
    if (tuple == NULL) return NULL;
    if (extra) { Py_INCREF(first); PyTuple_SetItem(tuple, 0, first); }
    for (Py_ssize_t i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SetItem(tuple, i + extra, items[i]); }
    return tuple;
}

/* The lookup's cache: per kernel (a slot by its address), the launch table's list for the last call's key,
 * valid while the table is unchanged -- its dict's version tag (PEP 509), which every insertion and removal
 * bumps -- and the call names the same kernel (through its weak reference: a dead kernel's address may be
 * reused), context, target, class of the state and argument classes (held: their addresses are not reused).
 * A hit skips building, hashing and comparing the key's tuple. */
#define NCACHE 64
#define CACHE_ARGS 16
typedef struct {
    PyObject *kernel_ref;             /* the kernel's weak reference (or the kernel, where it has none) */
    PyObject *context, *target, *state_class;
    Py_ssize_t nargs;
    PyObject *classes[CACHE_ARGS];
    PyObject *candidates;             /* the table's list, or NULL: an empty slot */
    uint64_t version;
} Cached;
static Cached cache[NCACHE];
static const uint64_t *table_version = NULL; /* the launch table's version tag, where the interpreter has one */

static void cache_clear(Cached *slot) {
    Py_CLEAR(slot->kernel_ref); Py_CLEAR(slot->context); Py_CLEAR(slot->target); Py_CLEAR(slot->state_class);
    for (Py_ssize_t i = 0; i < slot->nargs && i < CACHE_ARGS; i++) Py_CLEAR(slot->classes[i]);
    Py_CLEAR(slot->candidates);
    slot->nargs = 0;
}

static Cached *cache_slot(PyObject *kernel) { return &cache[((uintptr_t)kernel >> 4) % NCACHE]; }

static int cache_hit(const Cached *slot, PyObject *kernel, PyObject *const *args, Py_ssize_t n, PyObject *context,
                     PyObject *target, PyObject *state_class) {
    if (slot->candidates == NULL || table_version == NULL || slot->version != *table_version) return 0;
    PyObject *referent = PyWeakref_Check(slot->kernel_ref) ? PyWeakref_GetObject(slot->kernel_ref) : slot->kernel_ref;
    if (referent != kernel || slot->context != context || slot->target != target || slot->nargs != n ||
        slot->state_class != state_class)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (slot->classes[i] != (PyObject *)Py_TYPE(args[i])) return 0;
    return 1;
}

static void cache_store(Cached *slot, PyObject *key, PyObject *kernel, PyObject *const *args, Py_ssize_t n,
                        PyObject *context, PyObject *target, PyObject *state_class, PyObject *candidates) {
    if (table_version == NULL || n > CACHE_ARGS) return;
    Cached old = *slot; /* released once the slot is whole again: a destructor may run another launch */
    slot->kernel_ref = PyTuple_GetItem(key, 0);
    Py_INCREF(slot->kernel_ref);
    Py_INCREF(context); slot->context = context;
    Py_INCREF(target); slot->target = target;
    Py_INCREF(state_class); slot->state_class = state_class;
    for (Py_ssize_t i = 0; i < n; i++) { slot->classes[i] = (PyObject *)Py_TYPE(args[i]); Py_INCREF(slot->classes[i]); }
    slot->nargs = n;
    Py_INCREF(candidates); slot->candidates = candidates;
    slot->version = *table_version;
    cache_clear(&old);
}

/* The table's list of launch functions for the call (a new reference), None where it has none, NULL on error. */
static PyObject *candidates_for(PyObject *kernel, PyObject *const *args, Py_ssize_t n, PyObject *context,
                                PyObject *target, PyObject *state) {
    PyObject *state_class = state == Py_None ? Py_None : (PyObject *)Py_TYPE(state);
    Cached *slot = cache_slot(kernel);
    if (cache_hit(slot, kernel, args, n, context, target, state_class)) {
        Py_INCREF(slot->candidates);
        return slot->candidates;
    }
    PyObject *key = launch_key(kernel, args, n, context, target, state);
    if (key == NULL) return NULL;
    PyObject *candidates = PyDict_GetItemWithError(launch_table, key);      /* borrowed */
    if (candidates == NULL) {
        Py_DECREF(key);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    cache_store(slot, key, kernel, args, n, context, target, state_class, candidates);
    Py_DECREF(key);
    Py_INCREF(candidates);  /* a launch may replace the table's list */
    return candidates;
}

/* The host thread capturing launches into a graph (od.graph), 0 where none is: its od.cuda calls go to the
 * Python definition, which records them. */
static unsigned long capturing_thread = 0;

/* The Python definition's call, with the arguments as given (other keywords, a capture). */
static PyObject *call_python(PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *args = as_tuple(NULL, argv, nargs), *kwargs = NULL;
    if (args == NULL) return NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    if (nkw) {
        kwargs = PyDict_New();
        for (Py_ssize_t i = 0; kwargs != NULL && i < nkw; i++)
            if (PyDict_SetItem(kwargs, PyTuple_GetItem(kwnames, i), argv[nargs + i]) < 0) Py_CLEAR(kwargs);
        if (kwargs == NULL) { Py_DECREF(args); return NULL; }
    }
    PyObject *result = PyObject_Call(python_launch, args, kwargs);
    Py_DECREF(args);
    Py_XDECREF(kwargs);
    return result;
}

static int capturing_here(void) {
    return capturing_thread != 0 && PyThread_get_thread_ident() == capturing_thread;
}

/* The slow path's call: slow_path(kernel, args, **options), each option by its name. */
static PyObject *call_slow_path(PyObject *kernel, PyObject *args, PyObject *options[NOPTIONS]) {
    PyObject *positional = PyTuple_Pack(2, kernel, args), *keywords = PyDict_New(), *result = NULL;
    int failed = positional == NULL || keywords == NULL;
    for (int i = 0; i < NOPTIONS && !failed; i++) failed = PyDict_SetItem(keywords, option_names[i], options[i]) < 0;
    if (!failed) result = PyObject_Call(slow_path, positional, keywords);
    Py_XDECREF(positional);
    Py_XDECREF(keywords);
    return result;
}

/* A launch of ``kernel`` with ``args`` and its options (``dims``: its grid and block parsed, or NULL: parsed
 * here where a native launch function needs them): the table's launch functions, native ones called in
 * place; where none launches, ``otherwise`` (called with the arguments), or the slow path. */
static PyObject *launch_call(PyObject *kernel, PyObject *const *args, Py_ssize_t n, PyObject *options[NOPTIONS],
                             const Dims *dims, PyObject *otherwise) {
    PyObject *threads = options[THREADS], *blocks = options[BLOCKS], *shmem = options[SHMEM],
             *stream = options[STREAM], *target = options[TARGET], *context = options[CONTEXT],
             *state = options[STATE];
    Dims parsed;
    PyObject *candidates = candidates_for(kernel, args, n, context, target, state);
    if (candidates == NULL) return NULL;
    Py_ssize_t count = candidates == Py_None ? 0 : PyList_Size(candidates);
    PyObject *kernel_args = NULL, *local[32], **with_state = NULL;
    /* native launchers read the arguments in place (after the state where one is passed) */
    PyObject *const *native_args = args;
    Py_ssize_t native_n = n;
    if (state != Py_None && count) {
        with_state = n + 1 <= 32 ? local : PyMem_Malloc(sizeof(PyObject *) * (size_t)(n + 1));
        if (with_state == NULL) { Py_DECREF(candidates); return PyErr_NoMemory(); }
        with_state[0] = state;
        for (Py_ssize_t i = 0; i < n; i++) with_state[i + 1] = args[i];
        native_args = with_state;
        native_n = n + 1;
    }
    int launched = 0;
    for (Py_ssize_t i = 0; i < count && !launched; i++) {
        PyObject *launch = PyList_GetItem(candidates, i);
        if (Py_TYPE(launch) == (PyTypeObject *)LauncherType) {
            if (dims == NULL) { /* parsed once for every native launch function of the call */
                if (dims_of(blocks, threads, &parsed) < 0) { /* the slow path says what, naming the kernel */
                    PyErr_Clear();
                    break;
                }
                dims = &parsed;
            }
            launched = launcher_run((Launcher *)launch, native_args, native_n, dims, shmem, stream);
            continue;
        }
        if (kernel_args == NULL && (kernel_args = as_tuple(state == Py_None ? NULL : state, args, n)) == NULL) {
            launched = -1;
            break;
        }
        PyObject *result = PyObject_CallFunctionObjArgs(launch, kernel_args, blocks, threads, shmem, stream, NULL);
        launched = result == NULL ? -1 : PyObject_IsTrue(result);
        Py_XDECREF(result);
    }
    Py_DECREF(candidates);
    if (with_state != NULL && with_state != local) PyMem_Free(with_state);
    PyObject *result = NULL;
    if (launched > 0) {
        result = Py_None;
        Py_INCREF(result);
    } else if (launched == 0) {
        PyObject *user_args = as_tuple(NULL, args, n);
        if (user_args != NULL) {
            result = otherwise != NULL ? PyObject_Call(otherwise, user_args, NULL)
                                       : call_slow_path(kernel, user_args, options);
            Py_DECREF(user_args);
        }
    }
    Py_XDECREF(kernel_args);
    return result;
}

static PyObject *cuda(PyObject *module, PyObject *const *argv, Py_ssize_t nargs, PyObject *kwnames) {
    if (capturing_here()) return call_python(argv, nargs, kwnames);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "cuda() needs the kernel to launch");
        return NULL;
    }
    PyObject *options[NOPTIONS];
    options_init(options);
    for (Py_ssize_t k = 0; kwnames != NULL && k < PyTuple_Size(kwnames); k++)
        if (option_set(options, PyTuple_GetItem(kwnames, k), argv[nargs + k])) return call_python(argv, nargs, kwnames);
    return launch_call(argv[0], argv + 1, nargs - 1, options, NULL, NULL);
}

/* The class of the module ``overdub.cuda`` (its Python class derives from this one), whose call is od.cuda:
 * a module's call would otherwise go through a Python-level ``__call__`` (looked up per call, its keywords
 * copied into a dict and out again). Called with the arguments' tuple and the keywords' dict, as the
 * interpreter calls any object that is not a function. */
static PyObject *Namespace_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    if (capturing_here()) return PyObject_Call(python_launch, args, kwargs);
    PyObject *options[NOPTIONS], *key, *value;
    options_init(options);
    for (Py_ssize_t pos = 0; kwargs != NULL && PyDict_Next(kwargs, &pos, &key, &value);)
        if (option_set(options, key, value)) return PyObject_Call(python_launch, args, kwargs); /* debug=, ... */
    Py_ssize_t n;
    PyObject *local[32];
    PyObject **items = tuple_items(args, local, 32, &n);
    if (items == NULL) return NULL;
    PyObject *result = NULL;
    if (n < 1)
        PyErr_SetString(PyExc_TypeError, "cuda() needs the kernel to launch");
    else
        result = launch_call(items[0], items + 1, n - 1, options, NULL, NULL);
    if (items != local) PyMem_Free(items);
    return result;
}

static PyType_Slot Namespace_slots[] = {
    {Py_tp_doc, "A module whose call is od.cuda's launch (the class of overdub.cuda derives from it)."},
    {Py_tp_call, Namespace_call},
    {Py_tp_traverse, NULL}, /* a module's: set from ModuleType when the type is made */
    {Py_tp_clear, NULL},
    {0, NULL},
};

static PyType_Spec Namespace_spec = {
    "overdub._fastlaunch.Namespace", 0, 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    Namespace_slots,
};

/* numba-cuda's ``kernel[blocks, threads(, stream(, shmem))]`` (overdub/dropin.py's _Configured, which it
 * fronts): calling it is od.cuda's launch with the configuration held -- read off its record
 * (overdub.launchconfig.LaunchConfig) by field name, its grid and block parsed once, not per call; where no
 * launch function launches -- a first launch, host arrays to copy, a capture on this thread -- the Python
 * definition it fronts takes the call. */
typedef struct {
    PyObject_HEAD
    PyObject *configured;          /* the Python _Configured: what a launch that is not native calls */
    PyObject *function;            /* the kernel */
    PyObject *config;              /* the launch's configuration record */
    PyObject *options[NOPTIONS];   /* the launch's options (its state: None) */
    Dims dims;                     /* its grid and block */
} Configured;

static PyObject *Configured_call(Configured *self, PyObject *args, PyObject *kwargs) {
    if ((kwargs != NULL && PyDict_Size(kwargs)) || capturing_here())
        return PyObject_Call(self->configured, args, kwargs);
    Py_ssize_t n;
    PyObject *local[32];
    PyObject **items = tuple_items(args, local, 32, &n);
    if (items == NULL) return NULL;
    PyObject *result = launch_call(self->function, items, n, self->options, &self->dims, self->configured);
    if (items != local) PyMem_Free(items);
    return result;
}

static void Configured_clear(Configured *self) {
    Py_CLEAR(self->configured);
    Py_CLEAR(self->function);
    Py_CLEAR(self->config);
    for (int i = 0; i < NOPTIONS; i++) Py_CLEAR(self->options[i]);
}

static int Configured_init(Configured *self, PyObject *args, PyObject *kwargs) {
    PyObject *configured, *function, *config, *target, *context;
    if (!PyArg_ParseTuple(args, "OOOOO", &configured, &function, &config, &target, &context)) return -1;
    Configured_clear(self);
    PyObject *given[NOPTIONS] = {NULL};
    given[TARGET] = target;
    given[CONTEXT] = context;
    given[STATE] = Py_None;
    for (int i = 0; i < NOPTIONS; i++) {
        /* the configuration's fields by name; the call's own (target, context, state) as given */
        self->options[i] = i < CONFIG ? PyObject_GetAttr(config, option_names[i]) : given[i];
        if (self->options[i] == NULL) return -1;
        if (i >= CONFIG) Py_INCREF(self->options[i]);
    }
    if (dims_of(self->options[BLOCKS], self->options[THREADS], &self->dims) < 0) return -1;
    Py_INCREF(configured);
    Py_INCREF(function);
    Py_INCREF(config);
    self->configured = configured;
    self->function = function;
    self->config = config;
    return 0;
}

static void Configured_dealloc(Configured *self) {
    Configured_clear(self);
    free_instance((PyObject *)self);
}

static PyObject *Configured_get_configured(Configured *self, void *closure) {
    Py_INCREF(self->configured);
    return self->configured;
}

static PyObject *Configured_repr(Configured *self) { return PyObject_Repr(self->configured); }

/* Pickled as the Python launch configuration it fronts is (the kernel and its configuration, configured again
 * where it arrives) -- a configured kernel sent to another process launches there. */
static PyObject *Configured_reduce(Configured *self, PyObject *unused) {
    return PyObject_CallMethod(self->configured, "__reduce__", NULL);
}

/* numba-cuda's griddim, blockdim, stream and sharedmem: the Python launch configuration's. */
static PyObject *Configured_get_of_configured(Configured *self, void *name) {
    return PyObject_GetAttrString(self->configured, (const char *)name);
}

static PyMethodDef Configured_methods[] = {
    {"__reduce__", (PyCFunction)Configured_reduce, METH_NOARGS, "pickled as the launch configuration it fronts"},
    {NULL},
};

static PyGetSetDef Configured_getset[] = {
    {"configured", (getter)Configured_get_configured, NULL, "the Python launch configuration it fronts", NULL},
    {"griddim", (getter)Configured_get_of_configured, NULL, "the grid, three extents", "griddim"},
    {"blockdim", (getter)Configured_get_of_configured, NULL, "the block, three extents", "blockdim"},
    {"stream", (getter)Configured_get_of_configured, NULL, "the stream (0: the default)", "stream"},
    {"sharedmem", (getter)Configured_get_of_configured, NULL, "the dynamic shared memory's bytes", "sharedmem"},
    {"args", (getter)Configured_get_of_configured, NULL, "None: a launch's arguments are its thread's own", "args"},
    {NULL},
};

static PyType_Slot Configured_slots[] = {
    {Py_tp_doc, "Configured(configured, function, config, target, context): kernel[blocks, threads]'s launch, "
                "its configuration held"},
    {Py_tp_init, Configured_init},
    {Py_tp_call, Configured_call},
    {Py_tp_dealloc, Configured_dealloc},
    {Py_tp_getset, Configured_getset},
    {Py_tp_repr, Configured_repr},
    {Py_tp_methods, Configured_methods},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec Configured_spec = {
    "overdub._fastlaunch.Configured", sizeof(Configured), 0, Py_TPFLAGS_DEFAULT, Configured_slots,
};

/* runtime.launch_key, where the extension is built: the one definition of the key's format that od.cuda's
 * lookup above and the slow path's add_launch both use. */
static PyObject *py_launch_key(PyObject *module, PyObject *args) {
    PyObject *kernel, *user_args, *context, *target, *state, *local[32];
    if (!PyArg_ParseTuple(args, "OO!OOO", &kernel, &PyTuple_Type, &user_args, &context, &target, &state))
        return NULL;
    if (state != Py_None && state_mark == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "launch_key: install() has not run");
        return NULL;
    }
    Py_ssize_t n;
    PyObject **items = tuple_items(user_args, local, 32, &n);
    if (items == NULL) return NULL;
    PyObject *key = launch_key(kernel, items, n, context, target, state);
    if (items != local) PyMem_Free(items);
    return key;
}

static PyObject *install(PyObject *module, PyObject *args) {
    PyObject *table, *slow, *python, *mark, *node;
    unsigned long long version_address;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "O!OOOKOn", &PyDict_Type, &table, &slow, &python, &mark, &version_address, &node,
                          &offset))
        return NULL;
    Py_XDECREF(node_type);
    node_type = node == Py_None || offset <= 0 ? NULL : node;
    Py_XINCREF(node_type);
    valid_offset = offset;
    for (int i = 0; i < NCACHE; i++) cache_clear(&cache[i]);
    table_version = (const uint64_t *)(uintptr_t)version_address;
    Py_XDECREF(launch_table);
    Py_XDECREF(slow_path);
    Py_XDECREF(python_launch);
    Py_XDECREF(state_mark);
    Py_INCREF(table);
    Py_INCREF(slow);
    Py_INCREF(python);
    Py_INCREF(mark);
    launch_table = table;
    slow_path = slow;
    python_launch = python;
    state_mark = mark;
    Py_RETURN_NONE;
}

static PyObject *set_capturing(PyObject *module, PyObject *args) {
    unsigned long thread;
    if (!PyArg_ParseTuple(args, "k", &thread)) return NULL;
    capturing_thread = thread;
    Py_RETURN_NONE;
}

/* A graph's replay: every native launch function's validity check (as a launch checks it), then cuGraphLaunch.
 * True: launched; False: a kernel is no longer valid (the graph is updated first). */
typedef int (*cu_graph_launch_t)(void *exec, void *stream);

static PyObject *graph_launch(PyObject *module, PyObject *args) {
    PyObject *checked;
    unsigned long long exec, stream, address;
    if (!PyArg_ParseTuple(args, "O!KKK", &PyTuple_Type, &checked, &exec, &stream, &address)) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_Size(checked); i++) {
        PyObject *launcher = PyTuple_GetItem(checked, i);
        if (Py_TYPE(launcher) != (PyTypeObject *)LauncherType) {
            PyErr_SetString(PyExc_TypeError, "graph_launch checks native launch functions");
            return NULL;
        }
        int valid = still_valid((Launcher *)launcher);
        if (valid < 0) return NULL;
        if (valid == 0) Py_RETURN_FALSE;
    }
    int err = ((cu_graph_launch_t)(uintptr_t)address)((void *)(uintptr_t)exec, (void *)(uintptr_t)stream);
    if (err != 0) return PyErr_Format(PyExc_RuntimeError, "cuGraphLaunch failed with CUresult %d", err);
    Py_RETURN_TRUE;
}

static PyObject *set_array_layout(PyObject *module, PyObject *args) {
    PyObject *array_type, *pointer_type;
    ArrayLayout at;
    if (!PyArg_ParseTuple(args, "OO(nnnnnnn)", &array_type, &pointer_type, &at.dtype, &at.c_contiguous,
                          &at.f_contiguous, &at.shape, &at.strides, &at.data, &at.ptr))
        return NULL;
    if (array_type == Py_None) {
        Py_CLEAR(array_layout.array_type);
        Py_CLEAR(array_layout.pointer_type);
        Py_RETURN_NONE;
    }
    if (!PyType_Check(array_type) || !PyType_Check(pointer_type)) {
        PyErr_SetString(PyExc_TypeError, "set_array_layout takes the array and pointer classes");
        return NULL;
    }
    Py_INCREF(array_type);
    Py_INCREF(pointer_type);
    Py_XDECREF((PyObject *)array_layout.array_type);
    Py_XDECREF((PyObject *)array_layout.pointer_type);
    at.array_type = (PyTypeObject *)array_type;
    at.pointer_type = (PyTypeObject *)pointer_type;
    array_layout = at;
    Py_RETURN_NONE;
}

/* set_numpy_layout(ndarray, probes): numpy arrays are read in place where every probe -- (array, data address,
 * shape, strides, flags) as numpy's attributes give them, flags (c_contiguous | f_contiguous << 1 | writeable
 * << 10) -- reads so through NumpyFields; True where they all did (else nothing is read in place). */
static PyObject *set_numpy_layout(PyObject *module, PyObject *args) {
    PyObject *array_type, *probes;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &array_type, &PyList_Type, &probes)) return NULL;
    int holds = PyList_Size(probes) > 0;
    for (Py_ssize_t i = 0; holds && i < PyList_Size(probes); i++) {
        PyObject *array, *shape, *strides, *dtype;
        unsigned long long data;
        int flags;
        if (!PyArg_ParseTuple(PyList_GetItem(probes, i), "OKO!O!Oi", &array, &data, &PyTuple_Type, &shape,
                              &PyTuple_Type, &strides, &dtype, &flags))
            return NULL;
        PyObject *basicsize = PyObject_GetAttrString(array_type, "__basicsize__");
        Py_ssize_t room = basicsize == NULL ? -1 : PyLong_AsSsize_t(basicsize);
        Py_XDECREF(basicsize);
        if (room == -1 && PyErr_Occurred()) return NULL;
        if (!PyObject_TypeCheck(array, (PyTypeObject *)array_type) || room < (Py_ssize_t)sizeof(NumpyFields)) {
            holds = 0;
            break;
        }
        const NumpyFields *a = (const NumpyFields *)array;
        holds = (uintptr_t)a->data == data && a->nd == PyTuple_Size(shape) && a->nd == PyTuple_Size(strides) &&
                a->descr == dtype && (a->flags & (NUMPY_C_CONTIGUOUS | NUMPY_F_CONTIGUOUS | NUMPY_WRITEABLE)) == flags;
        for (int k = 0; holds && k < a->nd; k++)
            holds = a->dimensions[k] == PyLong_AsSsize_t(PyTuple_GetItem(shape, k)) &&
                    a->strides[k] == PyLong_AsSsize_t(PyTuple_GetItem(strides, k));
        if (PyErr_Occurred()) return NULL;
    }
    Py_XDECREF((PyObject *)numpy_array_type);
    numpy_array_type = holds ? (PyTypeObject *)array_type : NULL;
    Py_XINCREF((PyObject *)numpy_array_type);
    return PyBool_FromLong(holds);
}

static PyObject *set_scalar_layouts(PyObject *module, PyObject *args) {
    PyObject *layouts;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &layouts)) return NULL;
    ScalarLayout parsed[128] = {{NULL, 0}};
    for (Py_ssize_t i = 0; i < PyList_Size(layouts); i++) {
        PyObject *type;
        const char *code;
        Py_ssize_t offset;
        if (!PyArg_ParseTuple(PyList_GetItem(layouts, i), "O!sn", &PyType_Type, &type, &code, &offset)) return NULL;
        parsed[code[0] & 127] = (ScalarLayout){(PyTypeObject *)type, offset};
    }
    for (int c = 0; c < 128; c++) {
        Py_XINCREF((PyObject *)parsed[c].type);
        Py_XDECREF((PyObject *)scalar_layouts[c].type);
        scalar_layouts[c] = parsed[c];
    }
    Py_RETURN_NONE;
}

/* Guard.fresh (overdub/bindings.py) without a Python loop: ``words`` holds (address of a watched word, address
 * of its expected value) pairs, native-endian uint64 each -- the guard's Guard.words, which it rebuilds when
 * its checks change and whose memory its entries keep alive. True where every watched word equals its expected
 * one; False where one moved, or for None (some word has no view: the slow check decides). */
static PyObject *words_fresh(PyObject *module, PyObject *words) {
    if (words == Py_None) Py_RETURN_FALSE;
    char *bytes = PyBytes_AsString(words);
    if (bytes == NULL) return NULL;
    Py_ssize_t n = PyBytes_Size(words) / (Py_ssize_t)(2 * sizeof(uint64_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t pair[2];
        memcpy(pair, bytes + (size_t)i * sizeof pair, sizeof pair);
        if (*(const volatile uint64_t *)(uintptr_t)pair[0] != *(const volatile uint64_t *)(uintptr_t)pair[1])
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* The drop-in's plan key (overdub/dropin.py, _plan_key) without a Python loop: for each argument, an ndarray's
 * (class, dtype, ndim); a plain int's whether it fits an int64; a float's, bool's or complex's class; any other
 * value's (class, dtype, ndim), and None for the whole key where a value has no dtype or no ndim. */
static PyObject *plan_key_item(PyObject *value, PyObject *ndarray, int *none) {
    PyObject *cls = (PyObject *)Py_TYPE(value);
    if (cls == (PyObject *)&PyLong_Type) {
        int overflow = 0;
        PyLong_AsLongLongAndOverflow(value, &overflow);
        if (PyErr_Occurred()) return NULL;
        return PyBool_FromLong(overflow == 0);
    }
    if (cls == (PyObject *)&PyFloat_Type || cls == (PyObject *)&PyBool_Type || cls == (PyObject *)&PyComplex_Type) {
        Py_INCREF(cls);
        return cls;
    }
    int array = cls == ndarray ? 1 : PyObject_IsInstance(value, ndarray);
    if (array < 0) return NULL;
    PyObject *dtype = PyObject_GetAttr(value, s_dtype), *ndim = NULL;
    if (dtype != NULL) ndim = PyObject_GetAttr(value, s_ndim);
    if (ndim == NULL) {
        Py_XDECREF(dtype);
        if (array || !PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear(); /* getattr(value, ..., None): no dtype or no ndim */
        *none = 1;
        return NULL;
    }
    if (!array && (dtype == Py_None || ndim == Py_None)) { /* as getattr's default: no dtype or ndim */
        Py_DECREF(dtype);
        Py_DECREF(ndim);
        *none = 1;
        return NULL;
    }
    PyObject *item = PyTuple_Pack(3, cls, dtype, ndim);
    Py_DECREF(dtype);
    Py_DECREF(ndim);
    return item;
}

static PyObject *plan_key(PyObject *module, PyObject *const *argv, Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "plan_key(ndarray, args): args a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(argv[1]);
    PyObject *key = PyTuple_New(n);
    if (key == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int none = 0;
        PyObject *item = plan_key_item(PyTuple_GetItem(argv[1], i), argv[0], &none);
        if (item == NULL) {
            Py_DECREF(key);
            if (none) Py_RETURN_NONE;
            return NULL;
        }
        PyTuple_SetItem(key, i, item); /* steals item */
    }
    return key;
}

static PyObject *launch_count(PyObject *module, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(launches);
}

static PyMethodDef module_methods[] = {
    {"launch_count", launch_count, METH_NOARGS, "launches made by native launchers so far"},
    {"plan_key", (PyCFunction)(void (*)(void))plan_key, METH_FASTCALL,
     "plan_key(ndarray, args): the drop-in's plan key of ``args`` (dropin._plan_key), or None"},
    {"words_fresh", words_fresh, METH_O,
     "words_fresh(words): True where each (watched, expected) address pair of ``words`` (bytes of uint64 pairs)\n"
     "holds equal words; False where one differs or ``words`` is None (Guard.fresh)"},
    {"set_numpy_layout", set_numpy_layout, METH_VARARGS,
     "set_numpy_layout(ndarray, [(array, data, shape, strides, dtype, flags), ...]): numpy arrays are read in "
     "place where each probe reads as given (True), else not (False)"},
    {"cpu_launcher", cpu_launcher, METH_VARARGS,
     "cpu_launcher(kernel, checks, specs, offsets, (run, body, mode, stack), policy, target, raise_error, "
     "stream_check, flush, every_worker): the CPU target's native launch function of a kernel"},
    {"set_scalar_layouts", set_scalar_layouts, METH_VARARGS,
     "set_scalar_layouts([(scalar_class, struct_code, offset), ...]): scalars of exactly these classes are "
     "copied from that offset in the object when the kernel takes that code ([]: converted)"},
    {"set_array_layout", set_array_layout, METH_VARARGS,
     "set_array_layout(array_class, pointer_class, (dtype, c_contiguous, f_contiguous, shape, strides, data, "
     "ptr)): the byte offsets at which arrays of exactly array_class keep their fields, read in place (None, "
     "None, ...: read attributes)"},
    {"set_capturing", set_capturing, METH_VARARGS,
     "set_capturing(thread_ident): the thread whose od.cuda calls a graph records (0: none)"},
    {"graph_launch", graph_launch, METH_VARARGS,
     "graph_launch(launch_functions, exec, stream, cuGraphLaunch address): launch a graph if every launch "
     "function's kernel is still valid (True), else False"},
    {"install", install, METH_VARARGS,
     "install(table, slow_path, python_launch, state_mark, version_address, node_type, valid_offset): where "
     "cuda() looks launches up, who takes other keywords, what marks a state's class in a key, the address of "
     "the table's version tag (0: none; the lookup is not cached), and where a node keeps its valid flag "
     "(None, 0: read the attribute)"},
    {"launch_key", py_launch_key, METH_VARARGS,
     "launch_key(kernel, args, context, target, state): the launch table's key of a call (runtime.launch_key)"},
    {"cuda", (PyCFunction)(void (*)(void))cuda, METH_FASTCALL | METH_KEYWORDS,
     "cuda(kernel, /, *args, blocks=1, threads=1, shmem=0, stream=None, target=None, context=None, state=None,\n"
     "     debug=None)\n"
     "--\n\n"
     "Launch ``kernel`` over ``blocks`` x ``threads`` in ``context``: od.cuda's lookup in C. Its documentation\n"
     "is that of the Python definition it stands in for, overdub.launch.cuda (the API reference)."},
    {NULL},
};

/* What Python must agree on, written here once: MAX_SLOTS, the parameter buffer; SCALAR_CODES, each scalar code
 * this path converts and its width; SPEC_FIELDS, each kind's letter and the fields of its spec record, in order;
 * OPTIONS, the keywords of od.cuda this lookup serves, the first CONFIG_OPTIONS of them a LaunchConfig's. */
static int add_constants(PyObject *module) {
    PyObject *codes = PyDict_New(), *fields = PyDict_New(), *options = PyTuple_New(NOPTIONS);
    int failed = codes == NULL || fields == NULL || options == NULL;
    for (int c = 1; c < 128 && !failed; c++) {
        if (code_size((char)c) == 0) continue;
        PyObject *code = PyUnicode_FromOrdinal(c), *size = PyLong_FromSize_t(code_size((char)c));
        failed = code == NULL || size == NULL || PyDict_SetItem(codes, code, size) < 0;
        Py_XDECREF(code);
        Py_XDECREF(size);
    }
    for (size_t k = 0; k < NKINDS && !failed; k++) {
        Py_ssize_t n = 0;
        while (kinds[k].fields[n] != NULL) n++;
        PyObject *names = PyTuple_New(n), *letter = PyUnicode_FromOrdinal(kinds[k].kind);
        for (Py_ssize_t i = 0; names != NULL && i < n && !failed; i++) {
            PyObject *name = PyUnicode_FromString(kinds[k].fields[i]);
            failed = name == NULL || PyTuple_SetItem(names, i, name) < 0;
        }
        failed = failed || names == NULL || letter == NULL || PyDict_SetItem(fields, letter, names) < 0;
        Py_XDECREF(names);
        Py_XDECREF(letter);
    }
    for (int i = 0; i < NOPTIONS && !failed; i++) {
        Py_INCREF(option_names[i]);
        PyTuple_SetItem(options, i, option_names[i]);
    }
    failed = failed || PyModule_AddIntConstant(module, "MAX_SLOTS", MAX_SLOTS) < 0 ||
             PyModule_AddIntConstant(module, "CONFIG_OPTIONS", CONFIG) < 0 ||
             PyModule_AddObjectRef(module, "SCALAR_CODES", codes) < 0 ||
             PyModule_AddObjectRef(module, "SPEC_FIELDS", fields) < 0 ||
             PyModule_AddObjectRef(module, "OPTIONS", options) < 0;
    Py_XDECREF(codes);
    Py_XDECREF(fields);
    Py_XDECREF(options);
    return failed ? -1 : 0;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastlaunch", "The native launch path of overdub's CUDA target.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_workers, "workers"); INTERN(s_use, "use"); INTERN(s_timing, "timing");
    INTERN(s_valid, "valid"); INTERN(s_usable, "usable"); INTERN(s_dtype, "dtype"); INTERN(s_ndim, "ndim");
    INTERN(s_c_contiguous, "_c_contiguous"); INTERN(s_f_contiguous, "_f_contiguous");
    INTERN(s_size, "size"); INTERN(s_data, "data"); INTERN(s_ptr, "ptr"); INTERN(s_shape, "shape");
    INTERN(s_strides, "strides"); INTERN(s_address, "address"); INTERN(s_device, "device");
    INTERN(s_cuda_slots, "__overdub_cuda_slots__");
    for (int i = 0; i < NOPTIONS; i++) INTERN(option_names[i], option_text[i]);
    if ((py_one = PyLong_FromLong(1)) == NULL || (py_zero = PyLong_FromLong(0)) == NULL) return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (add_constants(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    PyObject *type = PyType_FromSpec(&Launcher_spec);
    if (type == NULL) {
        Py_DECREF(module);
        return NULL;
    }
    LauncherType = type;
    Py_INCREF(type);
    if (PyModule_AddObject(module, "Launcher", type) < 0) {
        Py_DECREF(type);
        Py_DECREF(module);
        return NULL;
    }
    PyObject *configured = PyType_FromSpec(&Configured_spec);
    if (configured == NULL || PyModule_AddObject(module, "Configured", configured) < 0) {
        Py_XDECREF(configured);
        Py_DECREF(module);
        return NULL;
    }
    Namespace_slots[2].pfunc = PyType_GetSlot(&PyModule_Type, Py_tp_traverse);
    Namespace_slots[3].pfunc = PyType_GetSlot(&PyModule_Type, Py_tp_clear);
    PyObject *namespace = PyType_FromSpecWithBases(&Namespace_spec, (PyObject *)&PyModule_Type);
    if (namespace == NULL || PyModule_AddObject(module, "Namespace", namespace) < 0) {
        Py_XDECREF(namespace);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
