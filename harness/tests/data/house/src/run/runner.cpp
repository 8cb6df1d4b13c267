#include "perfgate/runner.hpp"
int measured() { return loaded(); }
