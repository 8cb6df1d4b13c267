#include "demo/b.hpp"

#include "demo/a.hpp"

int b() { return a() - 1; }
