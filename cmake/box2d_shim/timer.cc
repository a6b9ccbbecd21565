// Box2D's b2Timer without the clock. Box2D times its stages for b2World::GetProfile (and
// b2TimeOfImpact's b2_toiTime statistics) with gettimeofday, about a dozen reads a step and one
// per time-of-impact query; no env reads those figures, and they never enter the simulation.
// This file stands in for Common/b2Timer.cpp: every timer reads 0 ms.
#include <Box2D/Common/b2Timer.h>

b2Timer::b2Timer() {}

void b2Timer::Reset() {}

float32 b2Timer::GetMilliseconds() const { return 0.0f; }
