/*
 * gil.hpp — run a blocking step without Python's GIL.
 *
 * A tensor made in Python is freed under the GIL, so the stream's worker
 * takes the GIL whenever it drops the last reference to one (a Work that
 * Python no longer holds). A thread that waits for the worker while it
 * holds the GIL (destroy_process_group does) must let go of it meanwhile.
 */
#pragma once

#include <Python.h>

namespace weft_torch {

template <typename Fn>
void without_gil(Fn&& fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState *state = PyEval_SaveThread();
    fn();
    PyEval_RestoreThread(state);
  } else {
    fn();
  }
}

}  // namespace weft_torch
