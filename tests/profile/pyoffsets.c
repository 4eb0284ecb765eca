#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "frameobject.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
/* Offsets of what pyebpf.symbols.python.LAYOUTS lists, from a CPython's own headers
   (built by tests/profile/test_python.py against each interpreter found). */
#define P(name, expr) printf("%s=%ld\n", name, (long)(expr))
int main(void) {
#if PY_VERSION_HEX < 0x030B0000
    P("tstate_current", offsetof(_PyRuntimeState, gilstate.tstate_current));
#endif
    P("interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
    
#if PY_VERSION_HEX < 0x030B0000
    P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#else
    P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#endif
    P("tstate_next", offsetof(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030B0000
    P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#endif
#if PY_VERSION_HEX < 0x030B0000
    P("tstate_frame", offsetof(PyThreadState, frame));
    P("frame_back", offsetof(PyFrameObject, f_back));
    P("frame_code", offsetof(PyFrameObject, f_code));
    P("frame_instr", offsetof(PyFrameObject, f_lasti));
#elif PY_VERSION_HEX < 0x030D0000
    P("tstate_frame", offsetof(PyThreadState, cframe));
    P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
    P("frame_back", offsetof(_PyInterpreterFrame, previous));
    P("frame_code", offsetof(_PyInterpreterFrame, f_code));
    P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#if PY_VERSION_HEX < 0x030C0000
    P("frame_entry", offsetof(_PyInterpreterFrame, is_entry));
#else
    P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#endif
    P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
#if PY_VERSION_HEX < 0x030D0000
    P("code_filename", offsetof(PyCodeObject, co_filename));
    P("code_name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030B0000
    P("code_qualname", offsetof(PyCodeObject, co_qualname));
#endif
    P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
    P("code_linetable", offsetof(PyCodeObject, co_linetable));
    P("ascii_size", sizeof(PyASCIIObject));
    P("compact_size", sizeof(PyCompactUnicodeObject));
#endif
    return 0;
}
