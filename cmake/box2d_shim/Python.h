// Box2D as box2d-py ships it (Common/b2Settings.h) includes <Python.h> so that a failed
// b2Assert sets a Python AssertionError before it throws b2AssertException. aiopool's workers
// step Box2D without the GIL and must not touch Python: this header stands in for Python's when
// the Box2D library is compiled (cmake/box2d.cmake). The assertion's text goes to a per-thread
// string instead, which the env reads when it catches b2AssertException (env_error()).
#pragma once

extern thread_local const char* aiopool_box2d_assertion;

#define PyExc_AssertionError nullptr
#define PyErr_SetString(type, message) ((void)(type), aiopool_box2d_assertion = (message))
