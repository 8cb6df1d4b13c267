#include "perfgate/runner.hpp"
int main() { return measured(); }
