#pragma once
// Fixture for tools/check_include_cycles.py: a and b depend on each other only through their sources.
int a();
