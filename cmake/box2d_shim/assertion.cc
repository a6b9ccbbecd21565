// The text of the last failed b2Assert on this thread (see Python.h beside this file).
thread_local const char* aiopool_box2d_assertion = nullptr;
