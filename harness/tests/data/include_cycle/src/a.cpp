#include "demo/a.hpp"

#include "demo/b.hpp"

int a() { return b() + 1; }
