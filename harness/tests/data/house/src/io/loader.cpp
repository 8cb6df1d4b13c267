#include "perfgate/loader.hpp"
#include "perfgate/runner.hpp"  // a door backwards: io may not include run
int loaded() { return 1; }
